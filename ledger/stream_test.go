package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// goodStream is a stream an operator might make for the ledger by hand.
func goodStream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:      "TURNLEDGER",
		Subjects:  []string{"tl.>"},
		Retention: jetstream.LimitsPolicy,
		Storage:   jetstream.MemoryStorage,
	}
}

// TestOpenUsesAnExistingStreamAsItIs makes streams by hand that the ledger
// can work on, opens the ledger over each with another storage and replica
// count asked for, and finds each stream's configuration unchanged.
func TestOpenUsesAnExistingStreamAsItIs(t *testing.T) {
	for name, change := range map[string]func(*jetstream.StreamConfig){
		"as serve makes it": func(*jetstream.StreamConfig) {},
		"wider subjects":    func(c *jetstream.StreamConfig) { c.Subjects = []string{"other.x", "tl.>"} },
		"bounded, discard new": func(c *jetstream.StreamConfig) {
			c.MaxMsgs, c.Discard = 1_000_000, jetstream.DiscardNew
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			js, err := jetstream.New(natstest.Connect(t, natstest.Start(t)))
			if err != nil {
				t.Fatal(err)
			}
			c := goodStream()
			change(&c)
			st, err := js.CreateStream(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			before := st.CachedInfo().Config
			cfg := ledger.DefaultConfig()
			cfg.Storage, cfg.Replicas = ledger.FileStorage, 3
			s, err := ledger.Open(ctx, natstest.ConnectURL(t, js.Conn().ConnectedUrl()), cfg)
			if err != nil {
				t.Fatalf("Open over %+v = %v, want nil", c, err)
			}
			mustAppend(t, s, "p1", 0, record("p1", "t1", 1))
			info, err := js.Stream(ctx, "TURNLEDGER")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, info.CachedInfo().Config); diff != "" {
				t.Errorf("the stream's configuration after Open changed (-before +after):\n%s", diff)
			}
			got, err := s.Status(ctx)
			want := ledger.StreamStatus{Head: 1, Replicas: 1, Storage: ledger.MemoryStorage, Leader: "natstest", Current: 1}
			if err != nil || got != want {
				t.Errorf("Status() = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}

// TestOpenRefusesAStreamItCannotWorkOn makes streams by hand that would drop
// events, take none, or miss the ledger's subjects: Open refuses each with
// an error and leaves it alone.
func TestOpenRefusesAStreamItCannotWorkOn(t *testing.T) {
	for name, change := range map[string]func(*jetstream.StreamConfig){
		"other subjects":       func(c *jetstream.StreamConfig) { c.Subjects = []string{"other.>"} },
		"narrower subjects":    func(c *jetstream.StreamConfig) { c.Subjects = []string{"tl.*"} },
		"work queue":           func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy },
		"max age":              func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour },
		"bounded, discard old": func(c *jetstream.StreamConfig) { c.MaxMsgs = 1000 },
		"direct get":           func(c *jetstream.StreamConfig) { c.AllowDirect = true },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			js, err := jetstream.New(natstest.Connect(t, natstest.Start(t)))
			if err != nil {
				t.Fatal(err)
			}
			c := goodStream()
			change(&c)
			st, err := js.CreateStream(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			before := st.CachedInfo().Config
			if _, err := ledger.Open(ctx, js.Conn(), ledger.DefaultConfig()); err == nil {
				t.Errorf("Open over %+v = nil, want an error", c)
			}
			info, err := js.Stream(ctx, "TURNLEDGER")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, info.CachedInfo().Config); diff != "" {
				t.Errorf("the refused stream's configuration changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestClusterLeaderChange appends from two Stores on a three-server cluster
// with a stream of three replicas, and shuts the stream leader's server down
// in the middle: every append succeeds (the Stores retry through the
// election), and the stream holds each event exactly once.
func TestClusterLeaderChange(t *testing.T) {
	c := natstest.NewCluster(t, 3)
	cfg := ledger.DefaultConfig()
	cfg.Storage, cfg.Replicas = ledger.MemoryStorage, 3
	var stores []*ledger.Store
	for range 2 {
		s, err := ledger.Open(context.Background(), natstest.ConnectURL(t, c.URLs()), cfg)
		if err != nil {
			t.Fatalf("Open(replicas 3) = %v", err)
		}
		stores = append(stores, s)
	}
	leader := c.WaitStreamLeader(cfg.Stream, 20*time.Second)

	// Each Store writes its own project: n events, each expecting the last.
	const n = 150
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	var progress [2]chan struct{}
	for i, s := range stores {
		progress[i] = make(chan struct{}, n)
		project := []string{"p1", "p2"}[i]
		wg.Go(func() {
			var last uint64
			for k := range uint64(n) {
				seq, err := s.Append(context.Background(), project, last, record(project, "t1", k+1))
				for tries := 0; errors.Is(err, ledger.ErrConflict) && tries < 10; tries++ {
					// A refusal at an expectation is a conflict at once,
					// even one JetStream gives while the new leader has
					// not applied the project's last event yet; the engine
					// then catches up and, finding nothing new, appends
					// again with the same expectation, which the Store
					// looks into. Do as the engine does. Anything new
					// (a duplicate) is still a failure.
					if now, lerr := s.LastSeq(context.Background(), project); lerr != nil || now != last {
						break
					}
					seq, err = s.Append(context.Background(), project, last, record(project, "t1", k+1))
				}
				if err != nil {
					errs[i] = err
					return
				}
				last = seq
				progress[i] <- struct{}{}
			}
		})
	}
	for i := range stores {
		for range n / 3 {
			<-progress[i]
		}
	}
	c.Kill(leader)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("store %d: Append across the leader change = %v, want nil", i, err)
		}
	}
	if next := c.WaitStreamLeader(cfg.Stream, 20*time.Second); next == leader {
		t.Fatalf("the stream leader is still the server that was shut down")
	}
	for _, project := range []string{"p1", "p2"} {
		got, _ := readProject(t, stores[0], project, 0)
		if len(got) != n {
			t.Errorf("ReadProject(%s) has %d events, want %d", project, len(got), n)
		}
		for k, r := range got {
			d, ok := r.Event.Data.(*kernel.TurnRecordAppended)
			if want := uint64(k + 1); !ok || d.TurnSeq != want {
				t.Fatalf("ReadProject(%s)[%d] = %+v, want turn_seq %d", project, k, r.Event.Data, want)
			}
		}
	}
}

// TestClusterWithoutQuorumIsUnavailable stops two of the three servers: the
// stream has no leader and cannot elect one, and an Append gives up after
// the configured bound with kernel.Unavailable, never another error.
func TestClusterWithoutQuorumIsUnavailable(t *testing.T) {
	c := natstest.NewCluster(t, 3)
	cfg := ledger.DefaultConfig()
	cfg.Storage, cfg.Replicas = ledger.MemoryStorage, 3
	cfg.AttemptTimeout, cfg.RetryFor = 250*time.Millisecond, time.Second
	kept := c.Servers[0]
	s, err := ledger.Open(context.Background(), natstest.Connect(t, kept), cfg)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	c.WaitStreamLeader(cfg.Stream, 20*time.Second)
	mustAppend(t, s, "p1", 0, record("p1", "t1", 1))
	for _, srv := range c.Servers[1:] {
		c.Kill(srv)
	}
	start := time.Now()
	_, err = s.Append(context.Background(), "p1", 1, record("p1", "t1", 2))
	if kind := kernel.ErrorKind(err); kind != kernel.Unavailable {
		t.Fatalf("Append without quorum = %v (kind %s), want kind %s", err, kind, kernel.Unavailable)
	}
	if waited := time.Since(start); waited < cfg.RetryFor {
		t.Errorf("Append without quorum gave up after %v, before the bound %v", waited, cfg.RetryFor)
	}
}
