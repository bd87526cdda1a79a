package serve

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/internal/checkfor"
)

// The head a page's diagnostics report is one read after the page was
// asked for: requests that ask while a read is in flight do not take its
// answer (the ledger may have moved on since it started) but share the
// next read, one for all of them; a request that leaves does not hold the
// others up.
func TestHeadProbeAnswersWithAReadStartedAfterTheRequest(t *testing.T) {
	var mu sync.Mutex
	reads := 0
	release := make(chan uint64)
	q := &headProbe{fetch: func(ctx context.Context) (uint64, error) {
		mu.Lock()
		reads++
		mu.Unlock()
		select {
		case h := <-release:
			return h, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}}
	asked := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.next == nil {
			return 0
		}
		return q.next.asked
	}

	// A lone request reads the head itself.
	first := make(chan uint64)
	go func() {
		h, _ := q.get(context.Background())
		first <- h
	}()
	checkfor.Until(t, 5*time.Second, "the first read to start", func() bool { mu.Lock(); defer mu.Unlock(); return reads == 1 })

	// Five more ask while it is in flight, and one of them leaves.
	got := make([]uint64, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = q.get(context.Background())
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := q.get(ctx)
		left <- err
	}()
	checkfor.Until(t, 5*time.Second, "five requests waiting for the next read", func() bool { return asked() == 5 })
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("a request that left = %v, want context.Canceled", err)
	}

	release <- 10 // the first read's answer, from before the five asked
	if h := <-first; h != 10 {
		t.Errorf("the first request's head = %d, want 10 (its own read)", h)
	}
	release <- 12 // the one read the five share
	wg.Wait()
	if diff := cmp.Diff([]uint64{12, 12, 12, 12}, got); diff != "" {
		t.Errorf("heads of the requests that asked during the first read (-want +got):\n%s", diff)
	}
	if reads != 2 {
		t.Errorf("%d reads of the head, want 2 (one per request in flight, then one shared)", reads)
	}

	// With nothing in flight, the next request reads again.
	go func() { release <- 15 }()
	if h, err := q.get(context.Background()); h != 15 || err != nil || reads != 3 {
		t.Errorf("a request after the others = %d, %v after %d reads; want 15 from a third read", h, err, reads)
	}
}
