package httpapi_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

type bulkAnswer struct {
	Stopped []string `json:"stopped"`
	Retried []string `json:"retried"`
	HasMore bool     `json:"has_more"`
}

func TestBulkStopInPagesWithHasMoreAndItsKey(t *testing.T) {
	e, req, w := schedEnv(t)
	ops := e.register("p1", "ops", 1, kernel.GrantManage)
	var tagged []string
	for i := range 7 {
		v := e.scheduled(req, fmt.Sprintf("t%d", i), map[string]any{"tags": []string{"runaway"}})
		tagged = append(tagged, v.TurnID)
	}
	other := e.scheduled(req, "other", nil)
	held := e.claim(w) // the oldest tagged Turn is claimed: its stop is a request its holder sees
	if held.Claim.TurnID != tagged[0] {
		t.Fatalf("claimed %s, want %s", held.Claim.TurnID, tagged[0])
	}
	body := map[string]any{"requested_by": ref("p1", "ops"), "filter": map[string]any{"tag": "runaway"}, "limit": 3, "reason": "runaway loop"}
	e.must(req, "POST", schedP+"/management/turns:bulk-stop", map[string]any{"requested_by": ref("p1", "req"), "filter": map[string]any{"tag": "runaway"}}, 403)
	for _, bad := range []map[string]any{
		{"requested_by": ref("p1", "ops"), "limit": 0}, {"requested_by": ref("p1", "ops"), "limit": 1001},
		{"requested_by": ref("p1", "ops"), "filter": map[string]any{"state": "finished"}},
		{"requested_by": ref("p1", "ops"), "filter": map[string]any{"tag": "no spaces"}},
		{"requested_by": ref("p1", "ops"), "filter": map[string]any{"colour": "red"}},
	} {
		e.must(ops, "POST", schedP+"/management/turns:bulk-stop", bad, 422)
	}
	var first, again bulkAnswer
	e.must(ops.withKey("bulk-1"), "POST", schedP+"/management/turns:bulk-stop", body, 200).decode(t, &first)
	if diff := cmp.Diff(tagged[:3], first.Stopped); diff != "" || !first.HasMore {
		t.Fatalf("first page (-want +got):\n%s\nhas_more %v", diff, first.HasMore)
	}
	head := e.ledgerLast(t, "p1")
	e.must(ops.withKey("bulk-1"), "POST", schedP+"/management/turns:bulk-stop", body, 200).decode(t, &again)
	if !cmp.Equal(first.Stopped, again.Stopped) || e.ledgerLast(t, "p1") != head {
		t.Errorf("retried with its key = %v (ledger %d -> %d), want the first answer and nothing appended", again.Stopped, head, e.ledgerLast(t, "p1"))
	}
	var second, third bulkAnswer
	e.must(ops, "POST", schedP+"/management/turns:bulk-stop", body, 200).decode(t, &second)
	e.must(ops, "POST", schedP+"/management/turns:bulk-stop", body, 200).decode(t, &third)
	if diff := cmp.Diff([][]string{tagged[3:6], tagged[6:]}, [][]string{second.Stopped, third.Stopped}); diff != "" || !second.HasMore || third.HasMore {
		t.Errorf("the next pages (-want +got):\n%s\nhas_more %v, %v; want true, false", diff, second.HasMore, third.HasMore)
	}
	// Each Turn by its own event, with the reason; the held one sees a stop request.
	for i, id := range tagged {
		v := e.turnView(asAdmin, id)
		if i == 0 {
			if v.State != kernel.StateClaimed || !v.StopRequested {
				t.Errorf("the claimed Turn after bulk-stop: %s stop_requested %v", v.State, v.StopRequested)
			}
			continue
		}
		if v.Outcome == nil || *v.Outcome != kernel.OutcomeStopped {
			t.Errorf("turn %s after bulk-stop: %s/%v", id, v.State, v.Outcome)
		}
	}
	if v := e.turnView(asAdmin, other.TurnID); v.State != kernel.StateQueued {
		t.Errorf("a Turn the filter did not match is %s", v.State)
	}
	var feed struct{ Items []projection.FeedItem }
	e.must(asAdmin, "GET", schedP+"/turns/"+tagged[1]+"/feed", nil, 200).decode(t, &feed)
	last := feed.Items[len(feed.Items)-1]
	if last.Type != kernel.EvTurnStopped || last.Meta == nil || last.Meta.Reason != "runaway loop" {
		t.Errorf("the stop event of a bulk-stopped Turn = %s meta %+v, want turn.stopped with the reason", last.Type, last.Meta)
	}
}

func TestBulkRetryInPages(t *testing.T) {
	e, req, w := schedEnv(t)
	var failed []string
	for i := range 5 {
		v := e.scheduled(req, fmt.Sprintf("f%d", i), map[string]any{"tags": []string{"batch-9"}})
		e.finishAs(w, e.claim(w), map[string]any{"outcome": "failed"}, 200)
		failed = append(failed, v.TurnID)
	}
	ok := e.scheduled(req, "ok", map[string]any{"tags": []string{"batch-9"}})
	e.finishAs(w, e.claim(w), map[string]any{"outcome": "succeeded"}, 200)
	// One of them retried by hand already: bulk-retry passes over it.
	e.must(req, "POST", schedP+"/turns/"+failed[1]+":retry", map[string]any{"requested_by": ref("p1", "req")}, 200)
	body := map[string]any{"requested_by": ref("p1", "req"), "filter": map[string]any{"tag": "batch-9"}, "limit": 2}
	e.must(asAdmin, "POST", schedP+"/management/turns:bulk-retry", map[string]any{"requested_by": ref("p1", "req"), "filter": map[string]any{"outcome": "succeeded"}}, 422)
	var pages []bulkAnswer
	for range 3 {
		var a bulkAnswer
		e.must(asAdmin.withKey(fmt.Sprint("retry-page-", len(pages))), "POST", schedP+"/management/turns:bulk-retry", body, 200).decode(t, &a)
		pages = append(pages, a)
	}
	var from []string
	for i, pg := range pages {
		for _, id := range pg.Retried {
			v := e.turnView(asAdmin, id)
			if v.RetryOf == nil || v.State != kernel.StateQueued {
				t.Fatalf("page %d: new Turn %s = %+v, want a queued retry", i, id, v)
			}
			from = append(from, *v.RetryOf)
		}
	}
	if diff := cmp.Diff([]string{failed[0], failed[2], failed[3], failed[4]}, from); diff != "" {
		t.Errorf("retried Turns (-want +got):\n%s", diff)
	}
	if !pages[0].HasMore || pages[1].HasMore || len(pages[2].Retried) != 0 {
		t.Errorf("has_more = %v, %v; third page %v; want true, false, none", pages[0].HasMore, pages[1].HasMore, pages[2].Retried)
	}
	if v := e.turnView(asAdmin, ok.TurnID); v.RetryOf != nil {
		t.Errorf("a succeeded Turn was retried")
	}
}
