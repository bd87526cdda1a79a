package httpapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestOpenAPIMatchesRouter: every route of the table is in the document,
// once, and every operation of the document is a route.
func TestOpenAPIMatchesRouter(t *testing.T) {
	routes := tableRoutes()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	var documented []string
	for path, item := range doc.Paths {
		for method := range item {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(routes)
	slices.Sort(documented)
	if diff := cmp.Diff(routes, documented); diff != "" {
		t.Errorf("routes of the table (-) and operations of the OpenAPI document (+) differ:\n%s", diff)
	}
}

// TestOpenAPIDocument: the document is OpenAPI 3.1 with unique operation
// ids, each operation in one of the document's tags, and each of its schemas
// compiles as JSON Schema 2020-12 with every $ref resolved.
func TestOpenAPIDocument(t *testing.T) {
	var doc struct {
		OpenAPI string `json:"openapi"`
		Tags    []struct {
			Name string `json:"name"`
		} `json:"tags"`
		Paths map[string]map[string]struct {
			OperationID string   `json:"operationId"`
			Tags        []string `json:"tags"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	tags := map[string]bool{}
	for _, tag := range doc.Tags {
		tags[tag.Name] = true
	}
	ids := map[string]string{}
	for path, item := range doc.Paths {
		for method, op := range item {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			}
			if prev, dup := ids[op.OperationID]; dup {
				t.Errorf("operationId %q is used by %s and %s %s", op.OperationID, prev, method, path)
			}
			ids[op.OperationID] = method + " " + path
			if len(op.Tags) != 1 || !tags[op.Tags[0]] {
				t.Errorf("%s %s has tags %q, want one of the document's tags", method, path, op.Tags)
			}
		}
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(OpenAPI()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", raw); err != nil {
		t.Fatal(err)
	}
	for name := range doc.Components.Schemas {
		if _, err := c.Compile("openapi.json#/components/schemas/" + name); err != nil {
			t.Errorf("schema %s does not compile: %v", name, err)
		}
	}
}
