package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkFastDecode fails t when the fast path takes b and decodes it other
// than encoding/json does.
func checkFastDecode(t *testing.T, b []byte) (taken bool) {
	t.Helper()
	fast, ok := unmarshalEventFast(b)
	if !ok {
		return false
	}
	std, err := unmarshalEventStd(b)
	if err != nil {
		t.Fatalf("the fast path decoded %q, encoding/json refuses it: %v", b, err)
	}
	if diff := cmp.Diff(std, fast); diff != "" {
		t.Fatalf("the fast path decodes %q other than encoding/json (-std +fast):\n%s", b, diff)
	}
	return true
}

// fastDecodeSeeds are the golden events and variations of their form that
// encoding/json reads alike: other spacing, escapes, key case, repeated and
// unknown keys, nulls, trailing data.
func fastDecodeSeeds(t testing.TB) [][]byte {
	files, err := filepath.Glob("testdata/events/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("golden events: %v (%d files)", err, len(files))
	}
	var seeds [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	base := `{"type":"turn.claimed","v":1,"project_id":"p","aggregate":"turn","id":"t","at":"2026-11-21T12:00:00.5+01:00","actor":{"kind":"agent","agent_id":"a"},"data":{"claim_id":"c","agent_id":"a","token_hash":"h","expires_at":"2026-11-21T12:00:00Z"}}`
	for _, s := range []string{
		base,
		" \n" + base + " \t",
		base + `{}`,
		base + ` x`,
		`{"TYPE":"turn.claimed","V":1,"Project_Id":"p","data":{"CLAIM_ID":"c"}}`,
		`{"type":"turn.claimed","type":"turn.claimed","v":1,"data":{"claim_id":"c","claim_id":"d"}}`,
		`{"type":"turn.claimed","v":1,"unknown":[1,{"x":null}],"data":{"claim_id":"c","extra":1e400}}`,
		`{"type":"turn.claimed","v":1,"data":null,"meta":null,"trace":null,"idem":null}`,
		`{"type":"turn.claimed","v":1,"data":{"claim_id":null,"expires_at":null}}`,
		`{"type":"turn\u002eclaimed","v":1.0,"data":{"claim_id":"\ud800\u00e9\\<"}}`,
		`{"type":"turn.claimed","v":1,"data":{"claim_id":"` + "\xff\xfe" + `"}}`,
		`{"type":"turn.record_appended","v":1,"data":{"payload": { "a" : [ 1 , 2.50 ] } ,"turn_seq":18446744073709551615}}`,
		`{"type":"turn.record_appended","v":1,"data":{"turn_seq":-1}}`,
		`{"type":"turn.record_appended","v":1,"data":{"turn_seq":"1"}}`,
		`{"type":"turn.claimed","v":1,"meta":{"note":"n","annotations":{"k": "v"}},"trace":{"trace_id":"x","recursion_depth":3},"data":{}}`,
		`{"type":"turn.claimed","v":1,"at":"2026-11-21 12:00:00","data":{}}`,
		`{"type":"turn.claimed","v":2,"data":{}}`,
		`[]`, `null`, `{`, ``,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// TestUnmarshalEventFastIsEncodingJSON: whatever the fast path decodes
// (every golden event among it), it decodes as encoding/json does.
func TestUnmarshalEventFastIsEncodingJSON(t *testing.T) {
	taken := 0
	for _, b := range fastDecodeSeeds(t) {
		if checkFastDecode(t, b) {
			taken++
		}
	}
	files, _ := filepath.Glob("testdata/events/*.json")
	if taken < len(files) {
		t.Errorf("the fast path took %d of the seeds, want at least the %d golden events", taken, len(files))
	}
	// Data that may hold an interface is left to encoding/json (slower): a
	// new such type is a choice to make here, not by accident.
	var slow []string
	for k, plain := range codecPlain {
		if !plain {
			slow = append(slow, fmt.Sprintf("%s v%d", k.typ, k.v))
		}
	}
	if diff := cmp.Diff([]string{"agent.work_memory_reported v1"}, slow); diff != "" {
		t.Errorf("event types decoded by encoding/json alone (-want +got):\n%s", diff)
	}
}

// FuzzUnmarshalEventFast: any bytes the fast path decodes, encoding/json
// decodes alike.
func FuzzUnmarshalEventFast(f *testing.F) {
	for _, b := range fastDecodeSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFastDecode(t, b) })
}
