package catalogue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// Path is the one route of the listing.
const Path = "/api/public/v2/subcategories"

// Config is what a Server needs.
type Config struct {
	// Catalogue is the data served; DefaultConfig uses the embedded sample.
	Catalogue *Catalogue
	// Keys are the SHA-256 hashes of the partner keys; at least one.
	Keys []KeyHash
	// BaseURL is the absolute http(s) URL the localized paths are joined to
	// to make canonicalUrl (the partner-facing website, not this API).
	BaseURL string
}

// DefaultConfig serves the sample catalogue with canonical URLs on
// http://127.0.0.1:8040; it has no keys, which Validate reports.
func DefaultConfig() Config {
	return Config{Catalogue: Sample(), BaseURL: "http://127.0.0.1:8040"}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Catalogue == nil {
		errs = append(errs, errors.New("no catalogue"))
	}
	if len(c.Keys) == 0 {
		errs = append(errs, errors.New("no partner keys: every request would be refused"))
	}
	if _, err := parseBaseURL(c.BaseURL); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func parseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("base URL %q: %v", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("base URL %q must start with http:// or https://", s)
	case u.Host == "":
		return nil, fmt.Errorf("base URL %q has no host", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("base URL %q must not carry user info, a query or a fragment", s)
	}
	return u, nil
}

// SubCategory is one entry of a response.
type SubCategory struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	CategoryID         string            `json:"categoryId"`
	CanonicalURL       string            `json:"canonicalUrl"`
	LocaleSpecificURLs map[string]string `json:"localeSpecificUrls"`
}

// Response is the body of a successful request.
type Response struct {
	SubCategories []SubCategory `json:"subCategories"`
}

// page is one prepared response: its bytes and their entity tag.
type page struct {
	body []byte
	etag string
}

// Server serves the listing. Every response is prepared when it is built,
// so a request costs a key hash and a map lookup.
type Server struct {
	keys  keyring
	pages map[string]map[string]page // city -> language -> page
}

// New checks cfg and prepares every (city, language) response.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, _ := parseBaseURL(cfg.BaseURL)
	root := strings.TrimSuffix(base.String(), "/")
	s := &Server{keys: keyring(cfg.Keys), pages: map[string]map[string]page{}}
	for _, city := range cfg.Catalogue.Cities {
		s.pages[city.Code] = map[string]page{}
		for _, lang := range Languages {
			resp := Response{SubCategories: []SubCategory{}}
			for _, sc := range cfg.Catalogue.Subcategories {
				if sc.CityCode != city.Code {
					continue
				}
				resp.SubCategories = append(resp.SubCategories, present(sc, lang, root))
			}
			body, err := json.Marshal(resp)
			if err != nil {
				return nil, err
			}
			body = append(body, '\n')
			sum := sha256.Sum256(body)
			s.pages[city.Code][lang] = page{body: body, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		}
	}
	return s, nil
}

// present is a subcategory as a partner asking in lang sees it: the name in
// lang (EN when the catalogue has none), canonicalUrl the base URL joined to
// the path in lang (EN's when there is none), and the paths of every
// language that has one.
func present(sc Subcategory, lang, root string) SubCategory {
	name, ok := sc.Names[lang]
	if !ok {
		name = sc.Names[DefaultLanguage]
	}
	path, ok := sc.Paths[lang]
	if !ok {
		path = sc.Paths[DefaultLanguage]
	}
	urls := make(map[string]string, len(sc.Paths))
	for l, p := range sc.Paths {
		urls[l] = p
	}
	return SubCategory{ID: sc.ID, Name: name, CategoryID: sc.CategoryID, CanonicalURL: root + path, LocaleSpecificURLs: urls}
}

// ServeHTTP answers GET (and HEAD) on Path. Checks run in this order: route,
// method, Partner-Auth, query.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		jsonhttp.WriteError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("no route %s; the listing is GET %s", r.URL.Path, Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		jsonhttp.WriteError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" is not allowed; use GET")
		return
	}
	keys := r.Header.Values("Partner-Auth")
	missing := len(keys) == 0 || strings.TrimSpace(keys[0]) == ""
	if missing || len(keys) > 1 || !s.keys.allows(strings.TrimSpace(keys[0])) {
		// RFC 9110: a 401 names the scheme the client must use.
		w.Header().Set("WWW-Authenticate", `Partner-Auth realm="partner API v2"`)
		msg := "the Partner-Auth key is not valid"
		if missing {
			msg = "the Partner-Auth header with your partner key is required"
		}
		jsonhttp.WriteError(w, http.StatusUnauthorized, "Unauthorized", msg)
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		jsonhttp.WriteError(w, http.StatusBadRequest, "InvalidQuery", "the query string is malformed")
		return
	}
	city, name, msg := one(q, "cityCode")
	if msg != "" {
		jsonhttp.WriteError(w, http.StatusBadRequest, name, msg)
		return
	}
	if city == "" {
		jsonhttp.WriteError(w, http.StatusBadRequest, "MissingCityCode", "the cityCode query parameter is required, e.g. ?cityCode=PARIS")
		return
	}
	lang, name, msg := one(q, "languageCode")
	if msg != "" {
		jsonhttp.WriteError(w, http.StatusBadRequest, name, msg)
		return
	}
	if lang == "" {
		lang = DefaultLanguage
	}
	lang = strings.ToUpper(lang)
	if !supported(lang) {
		jsonhttp.WriteError(w, http.StatusBadRequest, "UnsupportedLanguage",
			fmt.Sprintf("languageCode %q is not supported; use one of %s", truncate(lang), strings.Join(Languages, ", ")))
		return
	}
	byLang, ok := s.pages[strings.ToUpper(city)]
	if !ok {
		jsonhttp.WriteError(w, http.StatusNotFound, "CityNotFound", fmt.Sprintf("no city with code %q in the catalogue", truncate(city)))
		return
	}
	pg := byLang[lang]
	h := w.Header()
	h.Set("ETag", pg.etag)
	h.Set("Cache-Control", "private, no-cache")
	h.Set("Vary", "Partner-Auth")
	if noneMatch(r.Header.Values("If-None-Match"), pg.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(pg.body)
	}
}

// one returns the single value of a query parameter ("" when absent), or an
// error name and message when it is given more than once.
func one(q url.Values, key string) (value, errName, msg string) {
	vs := q[key]
	switch len(vs) {
	case 0:
		return "", "", ""
	case 1:
		return strings.TrimSpace(vs[0]), "", ""
	}
	return "", "InvalidQuery", fmt.Sprintf("%s is given %d times; give it once", key, len(vs))
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// noneMatch reports whether an If-None-Match header names etag (weak
// comparison, as RFC 9110 asks for If-None-Match) or is "*".
func noneMatch(headers []string, etag string) bool {
	for _, h := range headers {
		for _, tag := range strings.Split(h, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
				return true
			}
		}
	}
	return false
}
