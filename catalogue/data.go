package catalogue

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

//go:embed sample.json
var sampleJSON []byte

// Languages are the language codes the listing serves, in the order the spec
// lists them. EN is the default.
var Languages = []string{"EN", "ES", "FR", "IT", "DE", "PT", "NL"}

// DefaultLanguage answers a request without languageCode.
const DefaultLanguage = "EN"

func supported(lang string) bool {
	for _, l := range Languages {
		if l == lang {
			return true
		}
	}
	return false
}

// Catalogue is the data the listing serves: cities, categories and the
// subcategories of each city, in file order.
type Catalogue struct {
	Cities        []City
	Categories    []Category
	Subcategories []Subcategory
}

// City is a place partners ask about by code.
type City struct {
	Code  string            `json:"code"`
	Names map[string]string `json:"names"`
}

// Category is the parent of subcategories.
type Category struct {
	ID    string            `json:"id"`
	Names map[string]string `json:"names"`
}

// Subcategory is one entry of the listing. Names and Paths are keyed by
// language code; EN is required, other languages are optional.
type Subcategory struct {
	ID         string            `json:"id"`
	CityCode   string            `json:"cityCode"`
	CategoryID string            `json:"categoryId"`
	Names      map[string]string `json:"names"`
	Paths      map[string]string `json:"paths"`
}

// DataError is a catalogue file that cannot be served; Line (1-based, 0 when
// unknown) is the line at fault.
type DataError struct {
	Line int
	Msg  string
}

func (e *DataError) Error() string {
	if e.Line == 0 {
		return "catalogue data: " + e.Msg
	}
	return fmt.Sprintf("catalogue data: line %d: %s", e.Line, e.Msg)
}

// Sample returns the embedded sample catalogue.
func Sample() *Catalogue {
	c, err := Parse(sampleJSON)
	if err != nil {
		panic("catalogue: embedded sample is broken: " + err.Error())
	}
	return c
}

// SampleJSON returns the embedded sample file, a template for a user's own.
func SampleJSON() []byte { return bytes.Clone(sampleJSON) }

var (
	cityCodePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)
	idPattern       = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	pathPattern     = regexp.MustCompile(`^/[^\s?#]*$`)
)

// Parse reads and checks a catalogue file (the format is in the package
// doc). Every problem is a *DataError naming the line of the record at fault.
func Parse(data []byte) (*Catalogue, error) {
	p := &parser{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.DisallowUnknownFields()
	c, err := p.parse()
	if err != nil {
		return nil, err
	}
	return c, nil
}

type parser struct {
	data []byte
	dec  *json.Decoder
}

func (p *parser) line(off int64) int {
	if off > int64(len(p.data)) {
		off = int64(len(p.data))
	}
	return bytes.Count(p.data[:off], []byte("\n")) + 1
}

// next returns the line where the next value starts (after blanks, commas
// and colons the decoder has not yet consumed).
func (p *parser) nextLine() int {
	off := p.dec.InputOffset()
	for off < int64(len(p.data)) && strings.IndexByte(" \t\r\n,:", p.data[off]) >= 0 {
		off++
	}
	return p.line(off)
}

// failAt is a decode error inside the record that starts on line.
func (p *parser) failAt(line int, err error) error {
	de, ok := p.fail(err).(*DataError)
	if ok {
		de.Line = line
		return de
	}
	return err
}

func (p *parser) fail(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &DataError{Line: p.line(syn.Offset), Msg: "malformed JSON: " + syn.Error()}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "value"
		}
		return &DataError{Line: p.line(typ.Offset), Msg: fmt.Sprintf("%s must not be a JSON %s", field, typ.Value)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &DataError{Line: p.line(int64(len(p.data))), Msg: "malformed JSON: unexpected end of file"}
	}
	return &DataError{Line: p.nextLine(), Msg: strings.TrimPrefix(err.Error(), "json: ")}
}

func (p *parser) delim(want json.Delim) error {
	line := p.nextLine()
	tok, err := p.dec.Token()
	if err != nil {
		return p.fail(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return &DataError{Line: line, Msg: fmt.Sprintf("want %q, found %v", string(want), tok)}
	}
	return nil
}

// array decodes each element of a JSON array with one, which gets the line
// where the element starts.
func (p *parser) array(each func(line int) error) error {
	if err := p.delim('['); err != nil {
		return err
	}
	for p.dec.More() {
		if err := each(p.nextLine()); err != nil {
			return err
		}
	}
	return p.delim(']')
}

func (p *parser) parse() (*Catalogue, error) {
	if len(bytes.TrimSpace(p.data)) == 0 {
		return nil, &DataError{Line: 1, Msg: "the file is empty; want a JSON object with cities, categories and subcategories"}
	}
	// Syntax first, on the whole file, so a syntax error has its exact line.
	var whole any
	if err := json.Unmarshal(p.data, &whole); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, &DataError{Line: p.line(syn.Offset), Msg: "malformed JSON: " + syn.Error()}
		}
		return nil, &DataError{Line: p.line(int64(len(p.data))), Msg: "malformed JSON: unexpected end of file"}
	}
	c := &Catalogue{}
	cities := map[string]int{} // code -> line
	cats := map[string]int{}   // id -> line
	subs := map[string]int{}   // id -> line
	seen := map[string]bool{}  // root keys
	if err := p.delim('{'); err != nil {
		return nil, err
	}
	for p.dec.More() {
		line := p.nextLine()
		tok, err := p.dec.Token()
		if err != nil {
			return nil, p.fail(err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, &DataError{Line: line, Msg: fmt.Sprintf("%q appears twice", key)}
		}
		seen[key] = true
		switch key {
		case "cities":
			err = p.array(func(line int) error {
				var city City
				if err := p.dec.Decode(&city); err != nil {
					return p.failAt(line, err)
				}
				if !cityCodePattern.MatchString(city.Code) {
					return &DataError{Line: line, Msg: fmt.Sprintf("city code %q must be upper-case letters, digits and _ (e.g. NEW_YORK)", city.Code)}
				}
				if prev, dup := cities[city.Code]; dup {
					return &DataError{Line: line, Msg: fmt.Sprintf("city %s is already defined on line %d", city.Code, prev)}
				}
				if err := checkNames(city.Names); err != nil {
					return &DataError{Line: line, Msg: fmt.Sprintf("city %s: %v", city.Code, err)}
				}
				cities[city.Code] = line
				c.Cities = append(c.Cities, city)
				return nil
			})
		case "categories":
			err = p.array(func(line int) error {
				var cat Category
				if err := p.dec.Decode(&cat); err != nil {
					return p.failAt(line, err)
				}
				if !idPattern.MatchString(cat.ID) {
					return &DataError{Line: line, Msg: fmt.Sprintf("category id %q must be 1 to 64 letters, digits, - or _", cat.ID)}
				}
				if prev, dup := cats[cat.ID]; dup {
					return &DataError{Line: line, Msg: fmt.Sprintf("category %s is already defined on line %d", cat.ID, prev)}
				}
				if err := checkNames(cat.Names); err != nil {
					return &DataError{Line: line, Msg: fmt.Sprintf("category %s: %v", cat.ID, err)}
				}
				cats[cat.ID] = line
				c.Categories = append(c.Categories, cat)
				return nil
			})
		case "subcategories":
			if !seen["cities"] || !seen["categories"] {
				return nil, &DataError{Line: line, Msg: "subcategories must come after cities and categories"}
			}
			err = p.array(func(line int) error {
				var s Subcategory
				if err := p.dec.Decode(&s); err != nil {
					return p.failAt(line, err)
				}
				if err := checkSubcategory(s, cities, cats); err != nil {
					return &DataError{Line: line, Msg: fmt.Sprintf("subcategory %q: %v", s.ID, err)}
				}
				if prev, dup := subs[s.ID]; dup {
					return &DataError{Line: line, Msg: fmt.Sprintf("subcategory %s is already defined on line %d", s.ID, prev)}
				}
				subs[s.ID] = line
				c.Subcategories = append(c.Subcategories, s)
				return nil
			})
		default:
			return nil, &DataError{Line: line, Msg: fmt.Sprintf("unknown key %q; want cities, categories and subcategories", key)}
		}
		if err != nil {
			return nil, err
		}
	}
	if err := p.delim('}'); err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, &DataError{Line: p.nextLine(), Msg: "data after the JSON object"}
	}
	if len(c.Cities) == 0 {
		return nil, &DataError{Line: 1, Msg: "no cities: the catalogue needs at least one"}
	}
	return c, nil
}

// checkNames: EN is required, every key is a supported language code and no
// name is blank.
func checkNames(names map[string]string) error {
	if strings.TrimSpace(names[DefaultLanguage]) == "" {
		return fmt.Errorf("names.%s is required", DefaultLanguage)
	}
	for lang, n := range names {
		if !supported(lang) {
			return fmt.Errorf("names has language %q; want one of %s", lang, strings.Join(Languages, ", "))
		}
		if strings.TrimSpace(n) == "" {
			return fmt.Errorf("names.%s is blank", lang)
		}
	}
	return nil
}

func checkSubcategory(s Subcategory, cities, cats map[string]int) error {
	if !idPattern.MatchString(s.ID) {
		return errors.New("id must be 1 to 64 letters, digits, - or _")
	}
	if _, ok := cities[s.CityCode]; !ok {
		return fmt.Errorf("cityCode %q is not one of the cities", s.CityCode)
	}
	if _, ok := cats[s.CategoryID]; !ok {
		return fmt.Errorf("categoryId %q is not one of the categories", s.CategoryID)
	}
	if err := checkNames(s.Names); err != nil {
		return err
	}
	if s.Paths[DefaultLanguage] == "" {
		return fmt.Errorf("paths.%s is required", DefaultLanguage)
	}
	for lang, path := range s.Paths {
		if !supported(lang) {
			return fmt.Errorf("paths has language %q; want one of %s", lang, strings.Join(Languages, ", "))
		}
		if !pathPattern.MatchString(path) || strings.HasPrefix(path, "//") {
			return fmt.Errorf("paths.%s %q must be a URL path starting with / (no host, query or spaces)", lang, path)
		}
	}
	return nil
}
