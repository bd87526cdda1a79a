package httpapi_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/turnledger/turnledger/httpapi"
)

// TestOpenAPIIdempotencyKeyOnMutatingRoutes: every route that is not a GET
// lists the Idempotency-Key header, and no GET does.
func TestOpenAPIIdempotencyKeyOnMutatingRoutes(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]struct{ Parameters []map[string]string }
		Components struct{ Parameters map[string]map[string]any }
	}
	if err := json.Unmarshal(httpapi.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Components.Parameters[httpapi.IdempotencyHeader]
	if p["in"] != "header" || p["name"] != httpapi.IdempotencyHeader {
		t.Fatalf("components.parameters[%s] = %v, want a header parameter", httpapi.IdempotencyHeader, p)
	}
	ref := "#/components/parameters/" + httpapi.IdempotencyHeader
	mutating := 0
	for path, item := range doc.Paths {
		for method, op := range item {
			has := slices.ContainsFunc(op.Parameters, func(p map[string]string) bool { return p["$ref"] == ref })
			if want := method != "get"; has != want {
				t.Errorf("%s %s lists Idempotency-Key: %v, want %v", method, path, has, want)
			}
			if method != "get" {
				mutating++
			}
		}
	}
	if mutating < 10 {
		t.Errorf("only %d mutating routes in the document", mutating)
	}
}
