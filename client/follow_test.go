package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/client"
)

// cutter is a transport that can cut every open response body, as a
// network failure would.
type cutter struct {
	mu     sync.Mutex
	bodies []io.Closer
	opened int // streams opened
}

func (c *cutter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Header.Get("Accept") == "text/event-stream" {
		c.mu.Lock()
		c.bodies = append(c.bodies, resp.Body)
		c.opened++
		c.mu.Unlock()
	}
	return resp, err
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bodies {
		b.Close()
	}
	c.bodies = nil
}

func (c *cutter) streams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened
}

// TestFollowAcrossReconnects: Follow yields every event of the feed once,
// in order, while its connection is cut twice.
func TestFollowAcrossReconnects(t *testing.T) {
	s := startServer(t, 0)
	cut := &cutter{}
	boss := s.agentWith(t, "p", "boss", 1, &http.Client{Transport: cut}, "turns:dispatch", "projections:read")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type seen struct {
		Seq  uint64
		Type string
	}
	events := make(chan seen, 1000)
	errc := make(chan error, 1)
	go func() {
		for it, err := range boss.Follow(ctx, client.ProjectFeedOf("p"), 0) {
			if err != nil {
				errc <- err
				return
			}
			events <- seen{it.LedgerSeq, it.Type}
		}
		close(events)
	}()
	var got []seen
	take := func(n int) {
		t.Helper()
		for len(got) < n {
			select {
			case ev := <-events:
				got = append(got, ev)
			case err := <-errc:
				t.Fatalf("Follow ended with %v", err)
			case <-time.After(20 * time.Second):
				t.Fatalf("Follow yielded %d events in 20s, want %d", len(got), n)
			}
		}
	}
	head := func() int {
		pf, err := boss.ProjectFeed(ctx, "p", client.FeedQuery{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		return len(pf.Items)
	}
	for round := range 3 {
		for i := range 5 {
			dispatch(t, boss, "p", "boss", "boss", fmt.Sprintf("r%d-%d", round, i))
		}
		take(head())
		cut.cut()
	}
	if n := cut.streams(); n < 3 {
		t.Errorf("Follow opened %d streams, want at least 3 (two reconnects)", n)
	}
	pf, _ := boss.ProjectFeed(ctx, "p", client.FeedQuery{Limit: 500})
	var want []seen
	for _, it := range pf.Items {
		want = append(want, seen{it.LedgerSeq, it.Type})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Follow yielded (-feed +followed):\n%s", diff)
	}
	cancel()
	for range events {
	}
}

// TestFollowStopsOnRefusal: a feed the caller may not read ends the
// iteration with the *Error, without retrying forever.
func TestFollowStopsOnRefusal(t *testing.T) {
	s := startServer(t, 0)
	w := s.agent(t, "p", "w", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got error
	for _, err := range w.Follow(ctx, client.ProjectFeedOf("p"), 0) {
		got = err
		break
	}
	if !errors.Is(got, client.ErrForbidden) {
		t.Errorf("Follow of a forbidden feed = %v, want ForbiddenError", got)
	}
}
