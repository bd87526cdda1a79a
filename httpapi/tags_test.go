package httpapi_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/projection"
)

func TestTagsAreValidatedShownAndFiltered(t *testing.T) {
	e, req, w := schedEnv(t)
	head := e.ledgerLast(t, "p1")
	for _, tags := range []any{
		[]string{"has space"}, []string{""}, []string{strings.Repeat("a", 65)}, []string{"ünïcode"},
		make([]string, 17), "not-a-list",
	} {
		body := dispatchBody("p1", "req", "worker", "bad", map[string]any{})
		body["tags"] = tags
		if r := e.must(req, "POST", schedP+"/turns:dispatch", body, 422); !strings.Contains(errorMessage(r), "tags") {
			t.Errorf("dispatch with tags %v = %s, want a 422 naming tags", tags, r.body)
		}
	}
	if got := e.ledgerLast(t, "p1"); got != head {
		t.Errorf("refused dispatches moved the ledger from %d to %d", head, got)
	}
	a := e.scheduled(req, "a", map[string]any{"tags": []string{"customer:42", "run.7"}})
	b := e.scheduled(req, "b", map[string]any{"tags": []string{"customer:42"}})
	e.scheduled(req, "c", map[string]any{"tags": []string{"run.7"}})
	plain := e.scheduled(req, "d", nil)
	if diff := cmp.Diff([]string{"customer:42", "run.7"}, a.Tags); diff != "" {
		t.Errorf("tags on the snapshot (-want +got):\n%s", diff)
	}
	if plain.Tags == nil || len(plain.Tags) != 0 {
		t.Errorf("a Turn without tags shows %v, want []", plain.Tags)
	}
	// The feed carries them with the dispatch.
	if r := e.must(req, "GET", schedP+"/turns/"+a.TurnID+"/feed", nil, 200); !strings.Contains(string(r.body), `"tags":["customer:42","run.7"]`) {
		t.Errorf("the Turn's feed does not carry its tags: %s", r.body)
	}
	list := func(tags ...string) []string {
		q := url.Values{"tag": tags}
		var pg struct{ Items []projection.TurnView }
		e.must(asAdmin, "GET", schedP+"/projection/turns?"+q.Encode(), nil, 200).decode(t, &pg)
		var ids []string
		for _, v := range pg.Items {
			ids = append(ids, v.TurnID)
		}
		return ids
	}
	if diff := cmp.Diff([]string{a.TurnID, b.TurnID}, list("customer:42")); diff != "" {
		t.Errorf("?tag=customer:42 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{a.TurnID}, list("customer:42", "run.7")); diff != "" {
		t.Errorf("?tag=customer:42&tag=run.7 (-want +got):\n%s", diff)
	}
	if got := list("nobody"); len(got) != 0 {
		t.Errorf("?tag=nobody = %v, want none", got)
	}
	e.must(asAdmin, "GET", schedP+"/projection/turns?tag=has%20space", nil, 422)
	// A child has tags of its own, none inherited.
	c := e.claim(w)
	child := dispatchBody("p1", "worker", "worker", "child", map[string]any{})
	child["authority"] = map[string]any{"mode": "child_derivation", "parent_claim": c.Claim}
	var kid projection.TurnView
	e.must(w, "POST", schedP+"/turns:dispatch", child, 200).decode(t, &kid)
	if len(kid.Tags) != 0 {
		t.Errorf("a child of a tagged Turn has tags %v, want none", kid.Tags)
	}
}

// TestTagFilterWalksTheTagsIndex: Turns without the tag cost the filter
// nothing. With a walk of every Turn, a page of one would stop at its scan
// budget (10 × limit + 100 Turns) before it reached the tagged Turn.
func TestTagFilterWalksTheTagsIndex(t *testing.T) {
	e, req, _ := schedEnv(t)
	for i := range 150 {
		e.scheduled(req, "plain-"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+strings.Repeat("y", i/26), nil)
	}
	tagged := e.scheduled(req, "tagged", map[string]any{"tags": []string{"needle"}})
	var pg struct {
		Items   []projection.TurnView
		HasMore bool `json:"has_more"`
	}
	e.must(asAdmin, "GET", schedP+"/projection/turns?tag=needle&limit=1", nil, 200).decode(t, &pg)
	if len(pg.Items) != 1 || pg.Items[0].TurnID != tagged.TurnID || pg.HasMore {
		t.Errorf("first page of ?tag=needle&limit=1 = %d items, has_more %v; want the tagged Turn alone", len(pg.Items), pg.HasMore)
	}
}
