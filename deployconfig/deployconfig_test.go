package deployconfig

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func newValidator(t *testing.T) *Validator {
	t.Helper()
	v, err := New()
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return v
}

func validateFile(t *testing.T, v *Validator, path string) ([]Problem, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return v.Validate(path, data)
}

func TestValidExamples(t *testing.T) {
	v := newValidator(t)
	files, err := filepath.Glob("testdata/valid/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in testdata/valid: %v", err)
	}
	for _, f := range files {
		problems, err := validateFile(t, v, f)
		if err != nil || len(problems) != 0 {
			t.Errorf("Validate(%s) = %v, %v; want no problems", f, problems, err)
		}
	}
}

func p(ptr string, line, col int, msg string) Problem {
	return Problem{Pointer: ptr, Pos: Position{line, col}, Message: msg}
}

func TestInvalidExamples(t *testing.T) {
	v := newValidator(t)
	want := map[string][]Problem{
		"architecture.yml":                   {p("/provider/architecture", 4, 17, `got "arm", want one of "x86_64", "arm64"`)},
		"aws-event-two-keys.yml":             {p("/functions/hello/events/0", 8, 9, "has 2 properties, want at most 1")},
		"duplicate-key.yml":                  {p("/service", 4, 1, `key "service" appears more than once`)},
		"empty.yml":                          {p("", 1, 1, "got null, want object")},
		"framework-version-number.yml":       {p("/frameworkVersion", 2, 19, "got number, want string")},
		"memory-size-string.yml":             {p("/provider/memorySize", 4, 15, "got string, want integer or a ${...} variable")},
		"missing-provider.yml":               {p("", 1, 1, `missing property "provider"`)},
		"missing-service.yml":                {p("", 1, 1, `missing property "service"`)},
		"plugins-item-not-string.yml":        {p("/plugins/1", 6, 5, "got object, want string")},
		"plugins-number.yml":                 {p("/plugins", 4, 10, "got number, want array or object or a ${...} variable")},
		"plugins-object-without-modules.yml": {p("/plugins", 4, 1, `missing property "modules"`)},
		"provider-string.yml":                {p("/provider", 2, 11, "got string, want object or a ${...} variable")},
		"provider-without-name.yml":          {p("/provider", 2, 1, `missing property "name"`)},
		"resource-without-type.yml":          {p("/resources/Resources/Bucket", 6, 5, `missing property "Type"`)},
		"resources-array-of-numbers.yml":     {p("/resources/1", 6, 5, "got number, want object or a ${...} variable")},
		"unknown-aws-event.yml":              {p("/functions/hello/events/0/htpApi", 8, 9, `property "htpApi" is not allowed here`)},
		"unknown-aws-provider-key.yml":       {p("/provider/runtme", 4, 3, `property "runtme" is not allowed here`)},
		"unknown-root-key.yml":               {p("/functons", 4, 1, `property "functons" is not allowed here`)},
		"unknown-tag.yml": {p("/provider/environment/TABLE", 5, 12,
			"unknown YAML tag !Reff (the CloudFormation short forms such as !Ref, !GetAtt, !Sub and !Join are known)")},
		"bad-names.yml": {
			p("/provider/environment/TABLE-NAME", 5, 5, `name "TABLE-NAME" is not allowed: want an environment variable name: a letter or _, then letters, digits and _`),
			p("/functions/send mail", 7, 3, `name "send mail" is not allowed: want a function name: letters, digits, - and _`),
		},
		"http-event-without-method.yml": {p("/functions/hello/events/0/http", 8, 15, `got "/hello", want "METHOD /path", e.g. "GET /users"`)},
		"cfn-function-two-keys.yml": {
			p("/provider/environment/TABLE", 5, 5, "has 2 properties, want at most 1"),
			p("/provider/environment/TABLE/Extra", 5, 31, `name "Extra" is not allowed: want Ref, Condition or Fn::<Name> (a CloudFormation function)`),
		},
		"state-machine-without-start.yml": {p("/stepFunctions/stateMachines/fulfil/definition", 7, 7, `missing property "StartAt"`)},
		"wrong-types.json": {
			p("/provider/versionFunctions", 3, 51, "got string, want boolean or a ${...} variable"),
			p("/functions/hello/handler", 4, 38, "got number, want string"),
		},
	}
	files, err := os.ReadDir("testdata/invalid")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := f.Name()
		seen[name] = true
		w, ok := want[name]
		if !ok {
			t.Errorf("testdata/invalid/%s has no expected error in this table", name)
			continue
		}
		got, err := validateFile(t, v, filepath.Join("testdata/invalid", name))
		if err != nil {
			t.Errorf("Validate(%s) error = %v, want problems", name, err)
			continue
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("Validate(%s) problems (-want +got):\n%s", name, diff)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("table names %s, which is not in testdata/invalid", name)
		}
	}
}

func TestUnreadableExamples(t *testing.T) {
	v := newValidator(t)
	for name, want := range map[string]SyntaxError{
		"bad-indent.yml":      {Pos: Position{4, 0}, Msg: "mapping values are not allowed in this context"},
		"trailing-comma.json": {Pos: Position{3, 31}, Msg: "invalid character '}' looking for beginning of object key string"},
		"two-documents.yml":   {Pos: Position{4, 1}, Msg: "the file holds more than one YAML document; a configuration is one document"},
	} {
		problems, err := validateFile(t, v, filepath.Join("testdata/unreadable", name))
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Validate(%s) = %v, %v; want a *SyntaxError", name, problems, err)
			continue
		}
		if diff := cmp.Diff(want, *se); diff != "" {
			t.Errorf("Validate(%s) syntax error (-want +got):\n%s", name, diff)
		}
	}
}

// TestCloudFormationTags pins how each short tag is read: as the long form
// CloudFormation itself would see.
func TestCloudFormationTags(t *testing.T) {
	in := `
ref: !Ref Bucket
getatt: !GetAtt Bucket.Arn
getattNested: !GetAtt Cluster.Endpoint.Address
getattList: !GetAtt [Bucket, Arn]
sub: !Sub "arn:aws:s3:::${Bucket}"
subList: !Sub ["${A}-x", {A: !Ref B}]
join: !Join [",", [a, !Ref B]]
import: !ImportValue shared-vpc
if: !If [IsProd, !Ref Big, !Ref Small]
cond: !Condition IsProd
base64: !Base64 hello
azs: !GetAZs ""
`
	doc, err := parseYAML([]byte(in))
	if err != nil {
		t.Fatalf("parseYAML = %v", err)
	}
	want := map[string]any{
		"ref":          map[string]any{"Ref": "Bucket"},
		"getatt":       map[string]any{"Fn::GetAtt": []any{"Bucket", "Arn"}},
		"getattNested": map[string]any{"Fn::GetAtt": []any{"Cluster", "Endpoint.Address"}},
		"getattList":   map[string]any{"Fn::GetAtt": []any{"Bucket", "Arn"}},
		"sub":          map[string]any{"Fn::Sub": "arn:aws:s3:::${Bucket}"},
		"subList":      map[string]any{"Fn::Sub": []any{"${A}-x", map[string]any{"A": map[string]any{"Ref": "B"}}}},
		"join":         map[string]any{"Fn::Join": []any{",", []any{"a", map[string]any{"Ref": "B"}}}},
		"import":       map[string]any{"Fn::ImportValue": "shared-vpc"},
		"if":           map[string]any{"Fn::If": []any{"IsProd", map[string]any{"Ref": "Big"}, map[string]any{"Ref": "Small"}}},
		"cond":         map[string]any{"Condition": "IsProd"},
		"base64":       map[string]any{"Fn::Base64": "hello"},
		"azs":          map[string]any{"Fn::GetAZs": ""},
	}
	if diff := cmp.Diff(want, doc.value); diff != "" {
		t.Errorf("parseYAML(tags) (-want +got):\n%s", diff)
	}
	if len(doc.problems) != 0 {
		t.Errorf("parseYAML(tags) problems = %v, want none", doc.problems)
	}
}

func TestMergeKeysAndScalars(t *testing.T) {
	in := `
base: &base {a: 1, b: two}
merged:
  <<: *base
  b: three
  c: 1.5
  d: true
  e: ~
  f: 2024-01-02
  g: 0x10
`
	doc, err := parseYAML([]byte(in))
	if err != nil {
		t.Fatalf("parseYAML = %v", err)
	}
	want := map[string]any{
		"a": json.Number("1"), "b": "three", "c": json.Number("1.5"), "d": true, "e": nil,
		"f": "2024-01-02", "g": json.Number("16"),
	}
	if diff := cmp.Diff(want, doc.value.(map[string]any)["merged"]); diff != "" {
		t.Errorf("parseYAML(merge) merged (-want +got):\n%s", diff)
	}
}

func TestAliasBombIsRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	_, err := newValidator(t).Validate("bomb.yml", []byte(b.String()))
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("Validate(alias bomb) = %v, want a *SyntaxError", err)
	}
}

func TestSchemaIsDraft07WithTheSpecRoot(t *testing.T) {
	var s struct {
		Schema     string         `json:"$schema"`
		Title      string         `json:"title"`
		Required   []string       `json:"required"`
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatalf("Schema() is not JSON: %v", err)
	}
	if s.Schema != "http://json-schema.org/draft-07/schema#" || s.Title != "ServerlessFrameworkConfiguration" {
		t.Errorf("Schema() $schema, title = %q, %q; want draft-07, ServerlessFrameworkConfiguration", s.Schema, s.Title)
	}
	if diff := cmp.Diff([]string{"provider", "service"}, s.Required); diff != "" {
		t.Errorf("Schema() required (-want +got):\n%s", diff)
	}
	for _, k := range []string{"service", "provider", "app", "org", "frameworkVersion", "plugins", "functions",
		"layers", "package", "custom", "resources", "stages", "params", "ai", "stepFunctions"} {
		if _, ok := s.Properties[k]; !ok {
			t.Errorf("Schema() has no root property %q", k)
		}
	}
}
