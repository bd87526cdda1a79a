package inflight_test

import (
	"context"
	"testing"

	"github.com/turnledger/turnledger/internal/inflight"
)

// A request's slots are given back once: by Detach while it waits, and not
// again at its end; a context without slots holds nothing.
func TestSlotsAreReleasedOnce(t *testing.T) {
	released := map[string]int{}
	rel := func(name string) func() { return func() { released[name]++ } }
	s := inflight.New(rel("instance"))
	ctx := inflight.With(context.Background(), s)
	if !inflight.Hold(ctx, rel("project")) {
		t.Fatal("Hold on a request's context = false, want true")
	}
	inflight.Detach(ctx)
	s.ReleaseAll() // the end of the request
	if released["instance"] != 1 || released["project"] != 1 {
		t.Errorf("released %v, want each slot once", released)
	}

	if inflight.Hold(context.Background(), rel("other")) {
		t.Error("Hold without slots in the context = true, want false (the caller releases)")
	}
	inflight.Detach(context.Background()) // nothing to give back, no panic
	if released["other"] != 0 {
		t.Errorf("a slot held by no request was released %d times", released["other"])
	}
}
