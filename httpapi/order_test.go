package httpapi_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/projection"
)

// TestTurnListOrder: the Turn list answers oldest first as it always did,
// newest first with order=newest, its cursor paging on in the order asked
// for; any other order is a 422 naming the two.
func TestTurnListOrder(t *testing.T) {
	e, req, _ := schedEnv(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, e.scheduled(req, "o"+strconv.Itoa(i), nil).TurnID)
	}
	list := func(query string) []string {
		t.Helper()
		var got []string
		after := uint64(0)
		for range 10 {
			var pg struct {
				Items []projection.TurnView
				Next  uint64 `json:"next_after_ledger_seq"`
				More  bool   `json:"has_more"`
			}
			e.must(asAdmin, "GET", schedP+"/projection/turns?limit=2&after_ledger_seq="+strconv.FormatUint(after, 10)+query, nil, 200).decode(t, &pg)
			for _, v := range pg.Items {
				got = append(got, v.TurnID)
			}
			if !pg.More {
				return got
			}
			after = pg.Next
		}
		t.Fatalf("%s: no end after 10 pages", query)
		return nil
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	for _, tc := range []struct {
		query string
		want  []string
	}{{"", ids}, {"&order=oldest", ids}, {"&order=newest", newest}} {
		if diff := cmp.Diff(tc.want, list(tc.query)); diff != "" {
			t.Errorf("the Turn list%s (-want +got):\n%s", tc.query, diff)
		}
	}
	if r := e.must(asAdmin, "GET", schedP+"/projection/turns?order=desc", nil, 422); !strings.Contains(errorMessage(r), "oldest or newest") {
		t.Errorf("order=desc = %s, want a 422 naming oldest and newest", r.body)
	}
}
