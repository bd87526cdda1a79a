package projection

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzFeedDecoder: the fast feed decoder answers what json.Unmarshal does,
// whatever the stored bytes.
func FuzzFeedDecoder(f *testing.F) {
	for _, r := range scenario(3, 60).recs {
		if b, err := feedItem(r); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"ledger_seq":1,"type":"t\u0041","data":null}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		var want, got FeedItem
		werr := json.Unmarshal(v, &want)
		var dec feedDecoder
		gerr := dec.decode(v, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("decode(%q) error = %v, json.Unmarshal's = %v", v, gerr, werr)
		}
		if werr == nil {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("decode(%q) differs from json.Unmarshal (-want +got):\n%s", v, diff)
			}
		}
	})
}

// FuzzCheck: whatever bytes the projection file holds, Check never crashes
// the process (no panic, no SIGBUS), and a file it passes opens and reads
// without a panic; a damaged read is ErrDamaged, not a crash.
func FuzzCheck(f *testing.F) {
	// Seeds: a real small file, and its pieces.
	path := filepath.Join(f.TempDir(), "seed.db")
	s, err := Open(path, testConfig())
	if err != nil {
		f.Fatal(err)
	}
	mustApply(f, s, scenario(5, 30).recs)
	s.Close()
	real, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(real)
	f.Add(real[:8192])
	f.Add(real[:len(real)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "p.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Check(p); err != nil {
			return
		}
		st, err := Open(p, testConfig())
		if err != nil {
			return
		}
		defer st.Close()
		st.Dump()
		st.Turns(proj, TurnFilter{}, MaxLimit)
	})
}
