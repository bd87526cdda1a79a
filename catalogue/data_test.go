package catalogue

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSampleIsRealistic(t *testing.T) {
	c, err := Parse(SampleJSON())
	if err != nil {
		t.Fatalf("Parse(sample) = %v", err)
	}
	if len(c.Cities) < 5 || len(c.Categories) < 3 || len(c.Subcategories) < 20 {
		t.Errorf("sample has %d cities, %d categories, %d subcategories; want at least 5, 3, 20",
			len(c.Cities), len(c.Categories), len(c.Subcategories))
	}
	for _, s := range c.Subcategories {
		for _, l := range Languages {
			if s.Names[l] == "" || s.Paths[l] == "" {
				t.Errorf("sample subcategory %s has no name or path in %s", s.ID, l)
			}
		}
	}
}

// A broken catalogue file is refused with the line at fault.
func TestParseReportsTheLineAtFault(t *testing.T) {
	const head = `{
  "cities": [
    {"code": "PARIS", "names": {"EN": "Paris"}}
  ],
  "categories": [
    {"id": "1", "names": {"EN": "Tickets"}}
  ],
  "subcategories": [
    {"id": "1", "cityCode": "PARIS", "categoryId": "1", "names": {"EN": "Museums"}, "paths": {"EN": "/paris/museums/"}},
`
	const tail = "\n  ]\n}\n"
	good := `    {"id": "2", "cityCode": "PARIS", "categoryId": "1", "names": {"EN": "Cruises"}, "paths": {"EN": "/paris/cruises/"}}`
	if _, err := Parse([]byte(head + good + tail)); err != nil {
		t.Fatalf("Parse(good file) = %v, want nil", err)
	}
	for _, tc := range []struct {
		name, line string
		want       DataError
	}{
		{"unknown city", `    {"id": "2", "cityCode": "ROME", "categoryId": "1", "names": {"EN": "x"}, "paths": {"EN": "/x/"}}`,
			DataError{Line: 10, Msg: `subcategory "2": cityCode "ROME" is not one of the cities`}},
		{"unknown category", `    {"id": "2", "cityCode": "PARIS", "categoryId": "9", "names": {"EN": "x"}, "paths": {"EN": "/x/"}}`,
			DataError{Line: 10, Msg: `subcategory "2": categoryId "9" is not one of the categories`}},
		{"duplicate id", `    {"id": "1", "cityCode": "PARIS", "categoryId": "1", "names": {"EN": "x"}, "paths": {"EN": "/x/"}}`,
			DataError{Line: 10, Msg: `subcategory 1 is already defined on line 9`}},
		{"no EN name", `    {"id": "2", "cityCode": "PARIS", "categoryId": "1", "names": {"FR": "x"}, "paths": {"EN": "/x/"}}`,
			DataError{Line: 10, Msg: `subcategory "2": names.EN is required`}},
		{"lower-case language", `    {"id": "2", "cityCode": "PARIS", "categoryId": "1", "names": {"EN": "x", "fr": "y"}, "paths": {"EN": "/x/"}}`,
			DataError{Line: 10, Msg: `subcategory "2": names has language "fr"; want one of EN, ES, FR, IT, DE, PT, NL`}},
		{"absolute path", `    {"id": "2", "cityCode": "PARIS", "categoryId": "1", "names": {"EN": "x"}, "paths": {"EN": "https://x.test/x/"}}`,
			DataError{Line: 10, Msg: `subcategory "2": paths.EN "https://x.test/x/" must be a URL path starting with / (no host, query or spaces)`}},
		{"unknown field", `    {"id": "2", "cityCode": "PARIS", "categoryId": "1", "names": {"EN": "x"}, "paths": {"EN": "/x/"}, "price": 3}`,
			DataError{Line: 10, Msg: `unknown field "price"`}},
		{"wrong type", `    {"id": 2, "cityCode": "PARIS", "categoryId": "1", "names": {"EN": "x"}, "paths": {"EN": "/x/"}}`,
			DataError{Line: 10, Msg: `id must not be a JSON number`}},
		{"syntax", `    {"id": "2", "cityCode": "PARIS",, }`,
			DataError{Line: 10, Msg: `malformed JSON: invalid character ',' looking for beginning of object key string`}},
	} {
		_, err := Parse([]byte(head + tc.line + tail))
		var de *DataError
		if !errors.As(err, &de) {
			t.Errorf("Parse(%s) = %v, want a *DataError", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, *de); diff != "" {
			t.Errorf("Parse(%s) error (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestParseRefusesBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		line     int
	}{
		{"empty", "", 1},
		{"array", "[]", 1},
		{"lower-case city", "{\n\"cities\": [\n{\"code\": \"paris\", \"names\": {\"EN\": \"Paris\"}}]}", 3},
		{"unknown key", "{\"cities\": [],\n\"towns\": []}", 2},
		{"no cities", `{"cities": [], "categories": [], "subcategories": []}`, 1},
		{"subcategories first", "{\n\"subcategories\": []}", 2},
		{"truncated", "{\"cities\": [\n{\"code\": \"PARIS\"", 2},
		{"trailing data", "{\"cities\": [{\"code\": \"PARIS\", \"names\": {\"EN\": \"P\"}}]}\n{}", 2},
	} {
		_, err := Parse([]byte(tc.in))
		var de *DataError
		if !errors.As(err, &de) || de.Line != tc.line || strings.TrimSpace(de.Msg) == "" {
			t.Errorf("Parse(%s) = %v, want a *DataError on line %d", tc.name, err, tc.line)
		}
	}
}
