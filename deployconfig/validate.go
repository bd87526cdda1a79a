package deployconfig

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed schema.json
var schemaJSON []byte

// schemaURL is the $id of the embedded schema.
const schemaURL = "https://github.com/turnledger/turnledger/deployconfig/schema.json"

// variablePattern is the pattern of the schema's "variable" definition; a
// failure of it is reported as "want a ${...} variable", not as a regexp.
const variablePattern = `^\$\{.*\}$`

// Schema returns the embedded JSON Schema (draft-07) as it is printed by
// `turnledger deployconfig schema`.
func Schema() []byte { return bytes.Clone(schemaJSON) }

// Position is a place in a file, 1-based. Zero means unknown.
type Position struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// Problem is one reason a configuration is invalid.
type Problem struct {
	// Pointer is the JSON pointer (RFC 6901) of the value at fault; "" is
	// the whole document.
	Pointer string `json:"pointer"`
	// Pos is where that value (or, for a collection, its key) starts.
	Pos     Position `json:"position"`
	Message string   `json:"message"`
}

func (p Problem) String() string {
	return fmt.Sprintf("%d:%d: at %q: %s", p.Pos.Line, p.Pos.Column, p.Pointer, p.Message)
}

// SyntaxError is a file that cannot be read as YAML or JSON at all.
type SyntaxError struct {
	Pos Position
	Msg string
}

func (e *SyntaxError) Error() string {
	if e.Pos.Line == 0 {
		return "syntax error: " + e.Msg
	}
	if e.Pos.Column == 0 {
		return fmt.Sprintf("%d: syntax error: %s", e.Pos.Line, e.Msg)
	}
	return fmt.Sprintf("%d:%d: syntax error: %s", e.Pos.Line, e.Pos.Column, e.Msg)
}

// Validator checks configuration files against the embedded schema. It is
// safe for concurrent use.
type Validator struct {
	schema  *jsonschema.Schema
	printer *message.Printer
}

// New compiles the embedded schema.
func New() (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("embedded schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("embedded schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("embedded schema: %w", err)
	}
	return &Validator{schema: sch, printer: message.NewPrinter(language.English)}, nil
}

// Validate checks one file's contents; name only chooses the reader: a name
// ending in .json is read as JSON, anything else as YAML. The problems come
// sorted by position; none means the file is valid. The error, a
// *SyntaxError, is for a file that is not YAML or JSON at all.
func (v *Validator) Validate(name string, data []byte) ([]Problem, error) {
	var doc *document
	var err error
	if strings.EqualFold(filepath.Ext(name), ".json") {
		doc, err = parseJSON(data)
	} else {
		doc, err = parseYAML(data)
	}
	if err != nil {
		return nil, err
	}
	problems := slices.Clone(doc.problems)
	if verr := v.schema.Validate(doc.value); verr != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(verr, &ve) {
			return nil, verr
		}
		for _, r := range v.leaves(ve) {
			problems = append(problems, v.problems(doc, r)...)
		}
	}
	slices.SortStableFunc(problems, func(a, b Problem) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		if a.Pos.Column != b.Pos.Column {
			return a.Pos.Column - b.Pos.Column
		}
		return strings.Compare(a.Pointer, b.Pointer)
	})
	return slices.CompactFunc(problems, func(a, b Problem) bool { return a == b }), nil
}

// leaf is one failure kept from the library's error tree.
type leaf struct {
	loc  []string
	kind jsonschema.ErrorKind
	// want, for a failure merged from the branches of anyOf/oneOf that all
	// failed on the type: the types (or "a ${...} variable") accepted there.
	want []string
	got  string
	// schema is the location of the failing keyword's schema.
	schema string
}

// leaves flattens the error tree into the failures worth showing. For
// anyOf/oneOf it keeps the failures of the branch whose type matched the
// value (the branch the author meant); when none did, one "got X, want A or
// B" failure stands for them all.
func (v *Validator) leaves(e *jsonschema.ValidationError) []leaf {
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf:
		return v.alternatives(e)
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			return v.alternatives(e)
		}
	}
	if len(e.Causes) == 0 {
		return []leaf{{loc: e.InstanceLocation, kind: e.ErrorKind, schema: e.SchemaURL}}
	}
	var out []leaf
	for _, c := range e.Causes {
		out = append(out, v.leaves(c)...)
	}
	return out
}

func (v *Validator) alternatives(e *jsonschema.ValidationError) []leaf {
	var wants []string
	var got string
	for _, c := range e.Causes {
		ls := v.leaves(c)
		typeMiss := false
		for _, l := range ls {
			if slices.Equal(l.loc, e.InstanceLocation) {
				if w, g, ok := typeMismatch(l); ok {
					typeMiss = true
					got = g
					for _, x := range w {
						if !slices.Contains(wants, x) {
							wants = append(wants, x)
						}
					}
				}
			}
		}
		if !typeMiss {
			return ls
		}
	}
	return []leaf{{loc: e.InstanceLocation, want: wants, got: got}}
}

// nameRules says, for the schemas whose property names follow a pattern
// (patternProperties with additionalProperties false), what a name must be.
var nameRules = map[string]string{
	"#/definitions/cfnFunction":         "Ref, Condition or Fn::<Name> (a CloudFormation function)",
	"#/definitions/environment/anyOf/0": "an environment variable name: a letter or _, then letters, digits and _",
	"#/definitions/functions/anyOf/0":   "a function name: letters, digits, - and _",
}

// patternText says in words what a pattern of the schema asks for.
var patternText = map[string]string{
	`^[A-Za-z*]+ +\S+`: `"METHOD /path", e.g. "GET /users"`,
}

func describePattern(p string) string {
	if t, ok := patternText[p]; ok {
		return t
	}
	return fmt.Sprintf("a match of %s", p)
}

// typeMismatch reports whether l says "this value is not of my type".
func typeMismatch(l leaf) (want []string, got string, ok bool) {
	if l.want != nil {
		return l.want, l.got, true
	}
	switch k := l.kind.(type) {
	case *kind.Type:
		if strings.HasSuffix(l.schema, "#/definitions/variable") {
			return []string{"a ${...} variable"}, k.Got, true
		}
		return k.Want, k.Got, true
	case *kind.Pattern:
		if k.Want == variablePattern {
			return []string{"a ${...} variable"}, "string", true
		}
	}
	return nil, "", false
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, t := range loc {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

func (v *Validator) problems(doc *document, l leaf) []Problem {
	ptr := pointer(l.loc)
	if l.kind == nil {
		return []Problem{{Pointer: ptr, Pos: doc.at(ptr), Message: fmt.Sprintf("got %s, want %s", l.got, strings.Join(l.want, " or "))}}
	}
	switch k := l.kind.(type) {
	case *kind.AdditionalProperties:
		var out []Problem
		for _, p := range k.Properties {
			child := ptr + "/" + escapeToken(p)
			pos, ok := doc.key[child]
			if !ok {
				pos = doc.at(ptr)
			}
			msg := fmt.Sprintf("property %q is not allowed here", p)
			if rule, ok := nameRules[l.schema[strings.LastIndexByte(l.schema, '#'):]]; ok {
				msg = fmt.Sprintf("name %q is not allowed: want %s", p, rule)
			}
			out = append(out, Problem{Pointer: child, Pos: pos, Message: msg})
		}
		return out
	case *kind.Required:
		var out []Problem
		for _, m := range k.Missing {
			out = append(out, Problem{Pointer: ptr, Pos: doc.at(ptr), Message: fmt.Sprintf("missing property %q", m)})
		}
		return out
	case *kind.Pattern:
		if k.Want == variablePattern {
			return []Problem{{Pointer: ptr, Pos: doc.at(ptr), Message: fmt.Sprintf("got %q, want a ${...} variable", k.Got)}}
		}
		return []Problem{{Pointer: ptr, Pos: doc.at(ptr), Message: fmt.Sprintf("got %q, want %s", k.Got, describePattern(k.Want))}}
	case *kind.Enum:
		return []Problem{{Pointer: ptr, Pos: doc.at(ptr), Message: fmt.Sprintf("got %s, want one of %s", jsonText(k.Got), jsonList(k.Want))}}
	case *kind.MaxProperties:
		return []Problem{{Pointer: ptr, Pos: doc.at(ptr), Message: fmt.Sprintf("has %d properties, want at most %d", k.Got, k.Want)}}
	case *kind.Const:
		return []Problem{{Pointer: ptr, Pos: doc.at(ptr), Message: fmt.Sprintf("got %s, want %s", jsonText(k.Got), jsonText(k.Want))}}
	}
	return []Problem{{Pointer: ptr, Pos: doc.at(ptr), Message: l.kind.LocalizedString(v.printer)}}
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func jsonList(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = jsonText(v)
	}
	return strings.Join(parts, ", ")
}
