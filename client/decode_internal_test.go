package client

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decode gives what encoding/json gives, values and errors alike, for the
// bodies the server answers and for ones it never would.
func TestDecodeIsEncodingJSONs(t *testing.T) {
	bodies := []string{
		`{"project_id":"p","items":[{"ledger_seq":7,"type":"turn.dispatched","v":1,"project_id":"p","aggregate":"turn","id":"t1",` +
			`"at":"2026-11-27T10:00:00.123456789Z","actor":{"kind":"agent","agent_id":"a"},"data":{"input":{"n":1.5e3,"s":"\u00e9\ud83d\ude00<>&"},"tags":[]},` +
			`"meta":null,"trace":{"trace_id":"x"}}],"limit":100,"diagnostics":[{"code":"projection_lag","message":"m"}],"next_after_ledger_seq":7,"has_more":false}`,
		`{"PROJECT_ID":"case","Items":[],"limit":1,"unknown":{"deep":[1,2,{"x":null}]}}`, // field names match regardless of case; unknown fields are skipped
		`{"project_id":"dup","project_id":"last","items":null,"limit":0}`,                // the last of a repeated name wins
		"{\"project_id\":\"bad \xff utf-8\",\"items\":[],\"limit\":0}",                   // invalid UTF-8 becomes U+FFFD
		`{"project_id":"p","items":[{"ledger_seq":-1}],"limit":0}`,                       // a negative ledger_seq: an error
		`{"project_id":"p","items":[`,                                                    // cut short
		`{"project_id":"p"} {"limit":1}`,                                                 // two values
		`{"items":[{"at":"yesterday"}]}`,                                                 // not a time
	}
	for _, body := range bodies {
		var got, want Page[FeedItem]
		gotErr, wantErr := decode([]byte(body), &got), json.Unmarshal([]byte(body), &want)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Errorf("decode(%s) error = %v; encoding/json's = %v", body, gotErr, wantErr)
			continue
		}
		if wantErr != nil {
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("decode(%s) differs from encoding/json's (-want +got):\n%s", body, diff)
		}
	}
	var gotAny, wantAny any
	body := []byte(`{"n":12345678901234567890,"f":0.1,"l":[true,null,"s"]}`) // numbers in an interface are float64
	if err := decode(body, &gotAny); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &wantAny); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantAny, gotAny); diff != "" {
		t.Errorf("decode into any differs from encoding/json's (-want +got):\n%s", diff)
	}
}
