package catalogue

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkListing measures one authenticated request through the handler
// (no network): key hash, constant-time comparison, lookup and write.
func BenchmarkListing(b *testing.B) {
	cfg := DefaultConfig()
	for i := range 50 {
		cfg.Keys = append(cfg.Keys, HashKey(string(rune('a'+i%26))+"-partner"))
	}
	cfg.Keys = append(cfg.Keys, HashKey(testKey))
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", Path+"?cityCode=PARIS&languageCode=FR", nil)
	req.Header.Set("Partner-Auth", testKey)
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status = %d, want 200", rec.Code)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(SampleJSON())
	f.Add([]byte(`{"cities": [{"code": "A", "names": {"EN": "a"}}], "categories": [], "subcategories": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err == nil && len(c.Cities) == 0 {
			t.Fatalf("Parse(%q) accepted a catalogue without cities", data)
		}
	})
}
