package catalogue

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/jsonhttp"
)

const testKey = "pk_test_partner_key"

// startServer runs a listing over loopback with the given catalogue (the
// sample when nil) and one partner key, testKey.
func startServer(t *testing.T, c *Catalogue) *httptest.Server {
	t.Helper()
	cfg := DefaultConfig()
	if c != nil {
		cfg.Catalogue = c
	}
	cfg.Keys = []KeyHash{HashKey("some other partner"), HashKey(testKey)}
	cfg.BaseURL = "https://www.example.test/"
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(cfg) = %v", err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func get(t *testing.T, ts *httptest.Server, method, target string, header map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, body}
}

func auth() map[string]string { return map[string]string{"Partner-Auth": testKey} }

func decode(t *testing.T, r reply) Response {
	t.Helper()
	var resp Response
	if err := json.Unmarshal(r.body, &resp); err != nil {
		t.Fatalf("body %q is not a listing: %v", r.body, err)
	}
	return resp
}

func TestListingInRequestedLanguage(t *testing.T) {
	ts := startServer(t, nil)
	r := get(t, ts, "GET", Path+"?cityCode=PARIS&languageCode=FR", auth())
	if r.status != 200 {
		t.Fatalf("GET PARIS FR status = %d, want 200 (body %s)", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	resp := decode(t, r)
	if len(resp.SubCategories) != 6 {
		t.Fatalf("GET PARIS FR has %d subcategories, want 6", len(resp.SubCategories))
	}
	want := SubCategory{
		ID:           "20001",
		Name:         "Musées",
		CategoryID:   "1",
		CanonicalURL: "https://www.example.test/fr/paris/musees-sc-20001/",
		LocaleSpecificURLs: map[string]string{
			"EN": "/paris/museums-sc-20001/",
			"ES": "/es/paris/museos-sc-20001/",
			"FR": "/fr/paris/musees-sc-20001/",
			"IT": "/it/parigi/musei-sc-20001/",
			"DE": "/de/paris/museen-sc-20001/",
			"PT": "/pt/paris/museus-sc-20001/",
			"NL": "/nl/parijs/musea-sc-20001/",
		},
	}
	if diff := cmp.Diff(want, resp.SubCategories[0]); diff != "" {
		t.Errorf("GET PARIS FR first subcategory (-want +got):\n%s", diff)
	}
}

func TestLanguageDefaultsToENAndCodesAreCaseInsensitive(t *testing.T) {
	ts := startServer(t, nil)
	en := get(t, ts, "GET", Path+"?cityCode=ROME&languageCode=EN", auth())
	for _, q := range []string{"?cityCode=ROME", "?cityCode=ROME&languageCode=", "?cityCode=rome&languageCode=en", "?cityCode=Rome&languageCode=En&utm_source=x"} {
		r := get(t, ts, "GET", Path+q, auth())
		if r.status != 200 || string(r.body) != string(en.body) {
			t.Errorf("GET %s = %d %s, want 200 and the EN listing of ROME", q, r.status, r.body)
		}
	}
	if got := decode(t, en).SubCategories[0].Name; got != "Museums" {
		t.Errorf("GET ROME EN first name = %q, want Museums", got)
	}
}

func TestErrors(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		method, target string
		header         map[string]string
		status         int
		name           string
	}{
		{"GET", Path + "?cityCode=PARIS", nil, 401, "Unauthorized"},
		{"GET", Path + "?cityCode=PARIS", map[string]string{"Partner-Auth": "  "}, 401, "Unauthorized"},
		{"GET", Path + "?cityCode=PARIS", map[string]string{"Partner-Auth": "pk_wrong"}, 401, "Unauthorized"},
		{"GET", Path + "?cityCode=PARIS", map[string]string{"Partner-Auth": HashKey(testKey).String()}, 401, "Unauthorized"},
		{"GET", Path, nil, 401, "Unauthorized"},
		{"GET", Path, auth(), 400, "MissingCityCode"},
		{"GET", Path + "?cityCode=", auth(), 400, "MissingCityCode"},
		{"GET", Path + "?languageCode=FR", auth(), 400, "MissingCityCode"},
		{"GET", Path + "?cityCode=PARIS&cityCode=ROME", auth(), 400, "InvalidQuery"},
		{"GET", Path + "?cityCode=PARIS&languageCode=FR&languageCode=DE", auth(), 400, "InvalidQuery"},
		{"GET", Path + "?cityCode=%zz", auth(), 400, "InvalidQuery"},
		{"GET", Path + "?cityCode=PARIS&languageCode=JA", auth(), 400, "UnsupportedLanguage"},
		{"GET", Path + "?cityCode=PARIS&languageCode=en-US", auth(), 400, "UnsupportedLanguage"},
		{"GET", Path + "?cityCode=ATLANTIS", auth(), 404, "CityNotFound"},
		{"GET", Path + "?cityCode=ATLANTIS&languageCode=JA", auth(), 400, "UnsupportedLanguage"},
		{"POST", Path + "?cityCode=PARIS", auth(), 405, "MethodNotAllowed"},
		{"GET", "/api/public/v1/subcategories?cityCode=PARIS", auth(), 404, "NotFound"},
		{"GET", "/", nil, 404, "NotFound"},
	} {
		r := get(t, ts, tc.method, tc.target, tc.header)
		var body jsonhttp.ErrorBody
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Errorf("%s %s body %q is not an error body: %v", tc.method, tc.target, r.body, err)
			continue
		}
		if r.status != tc.status || body.Error != tc.name || body.Message == "" {
			t.Errorf("%s %s (header %v) = %d %+v, want %d %s with a message", tc.method, tc.target, tc.header, r.status, body, tc.status, tc.name)
		}
		if got := r.header.Get("WWW-Authenticate"); (tc.status == 401) != (got != "") {
			t.Errorf("%s %s = %d with WWW-Authenticate %q; want it on 401 only", tc.method, tc.target, r.status, got)
		}
		if r.header.Get("ETag") != "" {
			t.Errorf("%s %s error has ETag %q, want none", tc.method, tc.target, r.header.Get("ETag"))
		}
	}
	r := get(t, ts, "POST", Path+"?cityCode=PARIS", auth())
	if got := r.header.Get("Allow"); got != "GET, HEAD" {
		t.Errorf("POST Allow = %q, want GET, HEAD", got)
	}
}

func TestETagAndNotModified(t *testing.T) {
	ts := startServer(t, nil)
	first := get(t, ts, "GET", Path+"?cityCode=LISBON&languageCode=PT", auth())
	etag := first.header.Get("ETag")
	if first.status != 200 || !strings.HasPrefix(etag, `"`) || len(etag) < 10 {
		t.Fatalf("GET LISBON PT = %d, ETag %q; want 200 and a strong ETag", first.status, etag)
	}
	again := get(t, ts, "GET", Path+"?cityCode=LISBON&languageCode=PT", auth())
	if again.header.Get("ETag") != etag {
		t.Errorf("ETag of the same listing = %q, then %q; want it stable", etag, again.header.Get("ETag"))
	}
	other := get(t, ts, "GET", Path+"?cityCode=LISBON&languageCode=NL", auth())
	if other.header.Get("ETag") == etag {
		t.Errorf("ETag of LISBON NL = ETag of LISBON PT (%s), want them to differ", etag)
	}
	for _, inm := range []string{etag, "W/" + etag, `"nope", ` + etag, "*"} {
		h := auth()
		h["If-None-Match"] = inm
		r := get(t, ts, "GET", Path+"?cityCode=LISBON&languageCode=PT", h)
		if r.status != 304 || len(r.body) != 0 || r.header.Get("ETag") != etag {
			t.Errorf("GET with If-None-Match %s = %d, body %q, ETag %q; want 304, no body, ETag %s", inm, r.status, r.body, r.header.Get("ETag"), etag)
		}
	}
	h := auth()
	h["If-None-Match"] = `"stale"`
	if r := get(t, ts, "GET", Path+"?cityCode=LISBON&languageCode=PT", h); r.status != 200 || string(r.body) != string(first.body) {
		t.Errorf("GET with a stale If-None-Match = %d, want 200 and the listing", r.status)
	}
	// A wrong key gets 401 even with a matching ETag: nothing is revealed.
	h = map[string]string{"Partner-Auth": "pk_wrong", "If-None-Match": etag}
	if r := get(t, ts, "GET", Path+"?cityCode=LISBON&languageCode=PT", h); r.status != 401 {
		t.Errorf("GET with a wrong key and a matching If-None-Match = %d, want 401", r.status)
	}
}

func TestHEADHasHeadersOnly(t *testing.T) {
	ts := startServer(t, nil)
	r := get(t, ts, "HEAD", Path+"?cityCode=BERLIN", auth())
	if r.status != 200 || len(r.body) != 0 || r.header.Get("ETag") == "" {
		t.Errorf("HEAD BERLIN = %d, body %q, ETag %q; want 200, no body, an ETag", r.status, r.body, r.header.Get("ETag"))
	}
}

func TestKnownCityWithoutSubcategoriesIsAnEmptyList(t *testing.T) {
	c, err := Parse([]byte(`{
  "cities": [{"code": "PARIS", "names": {"EN": "Paris"}}, {"code": "OSLO", "names": {"EN": "Oslo"}}],
  "categories": [{"id": "1", "names": {"EN": "Tickets"}}],
  "subcategories": [{"id": "7", "cityCode": "PARIS", "categoryId": "1", "names": {"EN": "Museums", "FR": "Musées"}, "paths": {"EN": "/paris/museums/"}}]
}`))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	ts := startServer(t, c)
	r := get(t, ts, "GET", Path+"?cityCode=OSLO", auth())
	if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"subCategories":[]}` {
		t.Errorf("GET OSLO = %d %s, want 200 {\"subCategories\":[]}", r.status, r.body)
	}
	// A language without a name or path falls back to EN's.
	r = get(t, ts, "GET", Path+"?cityCode=PARIS&languageCode=DE", auth())
	want := []SubCategory{{
		ID: "7", Name: "Museums", CategoryID: "1",
		CanonicalURL:       "https://www.example.test/paris/museums/",
		LocaleSpecificURLs: map[string]string{"EN": "/paris/museums/"},
	}}
	if diff := cmp.Diff(want, decode(t, r).SubCategories); diff != "" {
		t.Errorf("GET PARIS DE (-want +got):\n%s", diff)
	}
}

func TestConfigValidateJoinsEveryProblem(t *testing.T) {
	err := Config{BaseURL: "ftp://x"}.Validate()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 3 {
		t.Errorf("Config{BaseURL: ftp://x}.Validate() = %v, want 3 joined problems", err)
	}
	for _, base := range []string{"", "www.example.com", "https://", "https://x.test/?a=1", "https://u:p@x.test"} {
		cfg := DefaultConfig()
		cfg.Keys = []KeyHash{HashKey("k")}
		cfg.BaseURL = base
		if cfg.Validate() == nil {
			t.Errorf("Validate(BaseURL %q) = nil, want an error", base)
		}
	}
	cfg := DefaultConfig()
	cfg.Keys = []KeyHash{HashKey("k")}
	if err := cfg.Validate(); err != nil {
		t.Errorf("DefaultConfig() with a key: Validate() = %v, want nil", err)
	}
}
