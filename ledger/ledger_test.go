package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// variant is one configuration the whole suite runs on.
type variant struct {
	name    string
	storage ledger.Storage
	expect  ledger.Expectation
}

var variants = []variant{
	{"memory", ledger.MemoryStorage, ledger.ExpectAuto},
	{"file", ledger.FileStorage, ledger.ExpectAuto},
	{"memory/stream-wide", ledger.MemoryStorage, ledger.ExpectStream},
	{"file/stream-wide", ledger.FileStorage, ledger.ExpectStream},
}

// env is one embedded server and the configuration of the variant.
type env struct {
	srv *server.Server
	cfg ledger.Config
}

// forEach runs f once per variant, each on its own server.
func forEach(t *testing.T, f func(t *testing.T, e env)) {
	t.Helper()
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			cfg := ledger.DefaultConfig()
			cfg.Storage = v.storage
			cfg.Expect = v.expect
			f(t, env{srv: natstest.Start(t), cfg: cfg})
		})
	}
}

// open opens a Store on a new connection of its own.
func (e env) open(t *testing.T) *ledger.Store {
	t.Helper()
	s, err := ledger.Open(context.Background(), natstest.Connect(t, e.srv), e.cfg)
	if err != nil {
		t.Fatalf("Open(%+v) = %v", e.cfg, err)
	}
	return s
}

var at = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// record is a turn.record_appended event of project on turn with turn_seq n.
func record(project, turn string, n uint64) kernel.Event {
	return kernel.Event{
		Type:      kernel.EvTurnRecordAppended,
		V:         1,
		ProjectID: project,
		Aggregate: kernel.AggTurn,
		ID:        turn,
		At:        at.Add(time.Duration(n) * time.Second),
		Actor:     kernel.Actor{Kind: "agent", AgentID: "a1"},
		Data: &kernel.TurnRecordAppended{
			ClaimID: "c1",
			TurnSeq: n,
			Role:    "note",
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)),
		},
	}
}

func heartbeat(project, agent string) kernel.Event {
	return kernel.Event{
		Type:      kernel.EvAgentHeartbeat,
		V:         1,
		ProjectID: project,
		Aggregate: kernel.AggAgent,
		ID:        agent,
		At:        at,
		Actor:     kernel.Actor{Kind: "agent", AgentID: agent},
		Data:      &kernel.AgentHeartbeat{},
		Meta:      &kernel.Meta{Note: "here"},
	}
}

func mustAppend(t *testing.T, s *ledger.Store, project string, expect uint64, e kernel.Event) uint64 {
	t.Helper()
	seq, err := s.Append(context.Background(), project, expect, e)
	if err != nil {
		t.Fatalf("Append(%s, %d, %s) = %v", project, expect, e.Type, err)
	}
	return seq
}

// readProject returns every event of project after after.
func readProject(t *testing.T, s *ledger.Store, project string, after uint64) ([]kernel.Recorded, uint64) {
	t.Helper()
	var got []kernel.Recorded
	last, err := s.ReadProject(context.Background(), project, after, func(r kernel.Recorded) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadProject(%s, %d) = %v", project, after, err)
	}
	return got, last
}

func lastSeq(t *testing.T, s *ledger.Store, project string) uint64 {
	t.Helper()
	n, err := s.LastSeq(context.Background(), project)
	if err != nil {
		t.Fatalf("LastSeq(%s) = %v", project, err)
	}
	return n
}

func head(t *testing.T, s *ledger.Store) uint64 {
	t.Helper()
	n, err := s.Head(context.Background())
	if err != nil {
		t.Fatalf("Head() = %v", err)
	}
	return n
}

func TestAppendReadRoundTrip(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		events := []kernel.Event{record("p1", "t1", 1), heartbeat("p1", "a1"), record("p1", "t2", 2)}
		var want []kernel.Recorded
		var last uint64
		for _, ev := range events {
			seq := mustAppend(t, s, "p1", last, ev)
			if seq <= last {
				t.Fatalf("Append after ledger_seq %d = %d, want a greater ledger_seq", last, seq)
			}
			last = seq
			want = append(want, kernel.Recorded{Seq: seq, Event: ev})
		}
		got, gotLast := readProject(t, s, "p1", 0)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ReadProject(p1, 0) mismatch (-want +got):\n%s", diff)
		}
		if gotLast != last {
			t.Errorf("ReadProject(p1, 0) last = %d, want %d", gotLast, last)
		}
		got, gotLast = readProject(t, s, "p1", want[0].Seq)
		if diff := cmp.Diff(want[1:], got); diff != "" {
			t.Errorf("ReadProject(p1, %d) mismatch (-want +got):\n%s", want[0].Seq, diff)
		}
		if gotLast != last {
			t.Errorf("ReadProject(p1, %d) last = %d, want %d", want[0].Seq, gotLast, last)
		}
		if got := lastSeq(t, s, "p1"); got != last {
			t.Errorf("LastSeq(p1) = %d, want %d", got, last)
		}
		if got := head(t, s); got != last {
			t.Errorf("Head() = %d, want %d", got, last)
		}
	})
}

func TestTypeAndVersionTravelInHeaders(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		seq := mustAppend(t, s, "p1", 0, heartbeat("p1", "a1"))
		js, err := jetstream.New(natstest.Connect(t, e.srv))
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(context.Background(), e.cfg.Stream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatalf("GetMsg(%d) = %v", seq, err)
		}
		got := map[string]string{
			"subject":            m.Subject,
			ledger.HeaderType:    m.Header.Get(ledger.HeaderType),
			ledger.HeaderVersion: m.Header.Get(ledger.HeaderVersion),
			ledger.HeaderID:      m.Header.Get(ledger.HeaderID),
		}
		want := map[string]string{
			"subject":            "tl.p1.agent",
			ledger.HeaderType:    kernel.EvAgentHeartbeat,
			ledger.HeaderVersion: "1",
			ledger.HeaderID:      "a1",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("message %d mismatch (-want +got):\n%s", seq, diff)
		}
	})
}

func TestStaleExpectationIsConflictAndWritesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		s1 := mustAppend(t, s, "p1", 0, record("p1", "t1", 1))
		s2 := mustAppend(t, s, "p1", s1, record("p1", "t1", 2))
		for _, expect := range []uint64{0, s1, s2 + 1, s2 + 100} {
			_, err := s.Append(context.Background(), "p1", expect, record("p1", "t1", 3))
			if !errors.Is(err, ledger.ErrConflict) {
				t.Errorf("Append(p1, %d) with project at %d = %v, want ErrConflict", expect, s2, err)
			}
		}
		if got := head(t, s); got != s2 {
			t.Errorf("Head() after refused appends = %d, want %d", got, s2)
		}
		got, _ := readProject(t, s, "p1", 0)
		if len(got) != 2 {
			t.Errorf("ReadProject(p1) after refused appends has %d events, want 2", len(got))
		}
	})
}

func TestProjectsDoNotContend(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		a, b := e.open(t), e.open(t)
		// Each store appends to its own project with that project's
		// expectation, while the other project moves the stream head.
		lastA, lastB := uint64(0), uint64(0)
		for i := range uint64(5) {
			lastA = mustAppend(t, a, "pa", lastA, record("pa", "t", i+1))
			lastB = mustAppend(t, b, "pb", lastB, record("pb", "t", i+1))
		}
		// A project that has never written, behind everyone.
		mustAppend(t, a, "pc", 0, record("pc", "t", 1))
		for _, c := range []struct {
			project string
			n       int
		}{{"pa", 5}, {"pb", 5}, {"pc", 1}} {
			got, _ := readProject(t, a, c.project, 0)
			if len(got) != c.n {
				t.Errorf("ReadProject(%s) has %d events, want %d", c.project, len(got), c.n)
			}
			for i, r := range got {
				if r.Event.ProjectID != c.project {
					t.Errorf("ReadProject(%s)[%d] is of project %s", c.project, i, r.Event.ProjectID)
				}
			}
		}
	})
}

func TestReadProjectWithNoEvents(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		mustAppend(t, s, "other", 0, record("other", "t1", 1))
		for _, after := range []uint64{0, 7} {
			last, err := s.ReadProject(context.Background(), "empty", after, func(r kernel.Recorded) error {
				t.Errorf("ReadProject(empty, %d) handed over ledger_seq %d", after, r.Seq)
				return nil
			})
			if err != nil || last != after {
				t.Errorf("ReadProject(empty, %d) = %d, %v, want %d, nil", after, last, err, after)
			}
		}
		if got := lastSeq(t, s, "empty"); got != 0 {
			t.Errorf("LastSeq(empty) = %d, want 0", got)
		}
		// Nothing after the project's last event.
		last := lastSeq(t, s, "other")
		got, gotLast := readProject(t, s, "other", last)
		if len(got) != 0 || gotLast != last {
			t.Errorf("ReadProject(other, %d) = %d events, last %d; want 0 events, last %d", last, len(got), gotLast, last)
		}
	})
}

func TestEmptyStream(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		if got := head(t, s); got != 0 {
			t.Errorf("Head() of an empty stream = %d, want 0", got)
		}
		h, err := s.ReadAll(context.Background(), 0, func(batch []kernel.Recorded, head uint64) error {
			t.Errorf("ReadAll of an empty stream handed over %d events", len(batch))
			return nil
		})
		if err != nil || h != 0 {
			t.Errorf("ReadAll(0) of an empty stream = %d, %v, want 0, nil", h, err)
		}
	})
}

func TestFollowReceivesNewEvents(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		var want []kernel.Recorded
		var last uint64
		add := func(n uint64) {
			ev := record("p1", "t1", n)
			last = mustAppend(t, s, "p1", last, ev)
			want = append(want, kernel.Recorded{Seq: last, Event: ev})
		}
		add(1)
		add(2)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var (
			mu  sync.Mutex
			got []kernel.Recorded
		)
		done := make(chan error, 1)
		go func() {
			done <- s.Follow(ctx, 0, func(batch []kernel.Recorded) error {
				mu.Lock()
				got = append(got, batch...)
				mu.Unlock()
				return nil
			})
		}()
		// Wait until Follow has caught up, then append more.
		checkfor.NoError(t, 5*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(got) < 2 {
				return fmt.Errorf("Follow delivered %d events, want 2", len(got))
			}
			return nil
		})
		for n := range uint64(5) {
			add(n + 3)
		}
		checkfor.NoError(t, 5*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(got) < len(want) {
				return fmt.Errorf("Follow delivered %d events, want %d", len(got), len(want))
			}
			return nil
		})
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Follow after cancel = %v, want context.Canceled", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Follow(0) mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestFollowFromTheMiddleAndFnError(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		var last uint64
		for n := range uint64(4) {
			last = mustAppend(t, s, "p1", last, record("p1", "t1", n+1))
		}
		stop := errors.New("stop")
		var first uint64
		err := s.Follow(context.Background(), 2, func(batch []kernel.Recorded) error {
			first = batch[0].Seq
			return stop
		})
		if !errors.Is(err, stop) {
			t.Errorf("Follow with fn failing = %v, want fn's error", err)
		}
		if first != 3 {
			t.Errorf("Follow(2) first ledger_seq = %d, want 3", first)
		}
	})
}

func TestReadAllBatchesUpToHead(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		e.cfg.BatchSize = 3
		s := e.open(t)
		lasts := map[string]uint64{}
		var want []uint64
		for n := range uint64(10) {
			p := []string{"p1", "p2"}[n%2]
			lasts[p] = mustAppend(t, s, p, lasts[p], record(p, "t", n+1))
			want = append(want, lasts[p])
		}
		var got []uint64
		var heads []uint64
		h, err := s.ReadAll(context.Background(), 1, func(batch []kernel.Recorded, head uint64) error {
			if len(batch) == 0 || len(batch) > 3 {
				t.Errorf("ReadAll batch of %d events, want 1 to 3", len(batch))
			}
			for _, r := range batch {
				got = append(got, r.Seq)
			}
			heads = append(heads, head)
			// Events appended while reading are not part of this read.
			lasts["p1"] = mustAppend(t, s, "p1", lasts["p1"], record("p1", "t", 100))
			return nil
		})
		if err != nil || h != 10 {
			t.Fatalf("ReadAll(1) = %d, %v, want 10, nil", h, err)
		}
		if diff := cmp.Diff(want[1:], got); diff != "" {
			t.Errorf("ReadAll(1) ledger_seqs mismatch (-want +got):\n%s", diff)
		}
		for _, hh := range heads {
			if hh != 10 {
				t.Errorf("ReadAll fn got head %d, want 10", hh)
			}
		}
	})
}

func TestUnsafeIDsAreRefused(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		bad := func(f func(*kernel.Event)) kernel.Event {
			ev := record("p1", "t1", 1)
			f(&ev)
			return ev
		}
		for _, c := range []struct {
			name    string
			project string
			event   kernel.Event
		}{
			{"dot in project", "p.1", bad(func(e *kernel.Event) { e.ProjectID = "p.1" })},
			{"wildcard project", "*", bad(func(e *kernel.Event) { e.ProjectID = "*" })},
			{"tail wildcard project", ">", bad(func(e *kernel.Event) { e.ProjectID = ">" })},
			{"space in project", "p 1", bad(func(e *kernel.Event) { e.ProjectID = "p 1" })},
			{"empty project", "", bad(func(e *kernel.Event) { e.ProjectID = "" })},
			{"dot in aggregate", "p1", bad(func(e *kernel.Event) { e.Aggregate = "turn.x" })},
			{"empty aggregate", "p1", bad(func(e *kernel.Event) { e.Aggregate = "" })},
			{"wildcard id", "p1", bad(func(e *kernel.Event) { e.ID = "t1.>" })},
			{"space in id", "p1", bad(func(e *kernel.Event) { e.ID = "t 1" })},
		} {
			_, err := s.Append(context.Background(), c.project, 0, c.event)
			if !errors.Is(err, ledger.ErrInvalidID) {
				t.Errorf("%s: Append(%q, 0, %+v) = %v, want ErrInvalidID", c.name, c.project, c.event, err)
			}
		}
		// The project given and the event's project must agree.
		if _, err := s.Append(context.Background(), "p2", 0, record("p1", "t1", 1)); err == nil {
			t.Errorf("Append(p2, 0, event of p1) = nil, want an error")
		}
		if got := head(t, s); got != 0 {
			t.Errorf("Head() after refused appends = %d, want 0", got)
		}
		for _, p := range []string{"p.1", "*", ">", "p1.>", ""} {
			if _, err := s.LastSeq(context.Background(), p); !errors.Is(err, ledger.ErrInvalidID) {
				t.Errorf("LastSeq(%q) = %v, want ErrInvalidID", p, err)
			}
			if _, err := s.ReadProject(context.Background(), p, 0, func(kernel.Recorded) error { return nil }); !errors.Is(err, ledger.ErrInvalidID) {
				t.Errorf("ReadProject(%q) = %v, want ErrInvalidID", p, err)
			}
		}
	})
}

func TestUndecodableEventIsAnError(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		good := mustAppend(t, s, "p1", 0, record("p1", "t1", 1))
		js, err := jetstream.New(natstest.Connect(t, e.srv))
		if err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{
			"unknown type":  `{"type":"turn.exploded","v":1,"project_id":"p1","aggregate":"turn","id":"t1","at":"2026-11-21T10:00:00Z","actor":{"kind":"admin"},"data":{}}`,
			"newer version": `{"type":"turn.record_appended","v":99,"project_id":"p1","aggregate":"turn","id":"t1","at":"2026-11-21T10:00:00Z","actor":{"kind":"admin"},"data":{}}`,
			"not json":      `{`,
			"other subject": `{"type":"agent.heartbeat","v":1,"project_id":"p1","aggregate":"agent","id":"a9","at":"2026-11-21T10:00:00Z","actor":{"kind":"admin"},"data":{}}`,
		} {
			t.Run(name, func(t *testing.T) {
				st, err := js.Stream(context.Background(), e.cfg.Stream)
				if err != nil {
					t.Fatal(err)
				}
				info, err := st.Info(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				// Each case starts from a stream whose only bad message is
				// the last one: read from just before it.
				before := info.State.LastSeq
				if _, err := js.Publish(context.Background(), "tl.p1.turn", []byte(body)); err != nil {
					t.Fatal(err)
				}
				var seen []uint64
				_, err = s.ReadProject(context.Background(), "p1", before, func(r kernel.Recorded) error {
					seen = append(seen, r.Seq)
					return nil
				})
				if err == nil || len(seen) != 0 {
					t.Errorf("ReadProject over a bad event = %v after %v, want an error and nothing handed over", err, seen)
				}
				ferr := s.Follow(context.Background(), before, func([]kernel.Recorded) error { return nil })
				if ferr == nil || errors.Is(ferr, context.Canceled) {
					t.Errorf("Follow over a bad event = %v, want a decoding error", ferr)
				}
				if _, err := s.ReadAll(context.Background(), before, func([]kernel.Recorded, uint64) error { return nil }); err == nil {
					t.Errorf("ReadAll over a bad event = nil, want an error")
				}
			})
		}
		// The good event before them still reads.
		var first kernel.Recorded
		_, err = s.ReadProject(context.Background(), "p1", 0, func(r kernel.Recorded) error {
			if first.Seq == 0 {
				first = r
			}
			return nil
		})
		if err == nil || first.Seq != good {
			t.Errorf("ReadProject(p1, 0) = first %d, err %v; want first %d and an error at the bad event", first.Seq, err, good)
		}
	})
}

// TestRaceOneWinnerPerRound runs two Stores on two connections to one server:
// in each round both append with the same expectation at the same time, and
// exactly one wins.
func TestRaceOneWinnerPerRound(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		stores := []*ledger.Store{e.open(t), e.open(t)}
		const rounds = 30
		for round := range rounds {
			last := lastSeq(t, stores[0], "p1")
			start := make(chan struct{})
			errs := make([]error, len(stores))
			var wg sync.WaitGroup
			for i, s := range stores {
				wg.Go(func() {
					<-start
					_, errs[i] = s.Append(context.Background(), "p1", last, record("p1", "t1", uint64(round)))
				})
			}
			close(start)
			wg.Wait()
			wins, conflicts := 0, 0
			for i, err := range errs {
				switch {
				case err == nil:
					wins++
				case errors.Is(err, ledger.ErrConflict):
					conflicts++
				default:
					t.Fatalf("round %d: store %d Append = %v", round, i, err)
				}
			}
			if wins != 1 || conflicts != 1 {
				t.Fatalf("round %d: %d wins and %d conflicts, want 1 and 1", round, wins, conflicts)
			}
		}
		if got := lastSeq(t, stores[1], "p1"); got != rounds {
			t.Errorf("LastSeq(p1) after %d rounds = %d, want %d", rounds, got, rounds)
		}
	})
}

// TestRetryLoopIsGapFree has writers on two Stores decide each event on what
// they read (its turn_seq is the count of events before it plus one) and
// retry after catching up when they lose. Every append lands once, and the
// turn_seqs read back are 1..N with no gap and no repeat.
func TestRetryLoopIsGapFree(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		stores := []*ledger.Store{e.open(t), e.open(t)}
		const writers, each = 6, 15
		var wg sync.WaitGroup
		errc := make(chan error, writers)
		for w := range writers {
			s := stores[w%len(stores)]
			wg.Go(func() {
				var last, count uint64
				for done := 0; done < each; {
					var err error
					last, err = s.ReadProject(context.Background(), "p1", last, func(kernel.Recorded) error {
						count++
						return nil
					})
					if err != nil {
						errc <- err
						return
					}
					_, err = s.Append(context.Background(), "p1", last, record("p1", fmt.Sprintf("w%d", w), count+1))
					if errors.Is(err, ledger.ErrConflict) {
						continue
					}
					if err != nil {
						errc <- err
						return
					}
					done++
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatalf("writer: %v", err)
		}
		got, _ := readProject(t, stores[1], "p1", 0)
		var gotSeqs, gotTurnSeqs, want []uint64
		perWriter := map[string]int{}
		for i, r := range got {
			gotSeqs = append(gotSeqs, r.Seq)
			gotTurnSeqs = append(gotTurnSeqs, r.Event.Data.(*kernel.TurnRecordAppended).TurnSeq)
			perWriter[r.Event.ID]++
			want = append(want, uint64(i+1))
		}
		if len(got) != writers*each {
			t.Fatalf("ReadProject(p1) has %d events, want %d", len(got), writers*each)
		}
		if diff := cmp.Diff(want, gotSeqs); diff != "" {
			t.Errorf("ledger_seqs mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, gotTurnSeqs); diff != "" {
			t.Errorf("turn_seqs decided by the writers mismatch (-want +got):\n%s", diff)
		}
		for w := range writers {
			if n := perWriter[fmt.Sprintf("w%d", w)]; n != each {
				t.Errorf("writer %d has %d events, want %d", w, n, each)
			}
		}
	})
}

func TestOpenTwiceAndModes(t *testing.T) {
	srv := natstest.Start(t)
	for _, c := range []struct {
		expect ledger.Expectation
		want   ledger.Expectation
	}{
		{ledger.ExpectAuto, ledger.ExpectProject}, // the embedded server is 2.15
		{ledger.ExpectProject, ledger.ExpectProject},
		{ledger.ExpectStream, ledger.ExpectStream},
	} {
		cfg := ledger.DefaultConfig()
		cfg.Storage = ledger.MemoryStorage
		cfg.Expect = c.expect
		s, err := ledger.Open(context.Background(), natstest.Connect(t, srv), cfg)
		if err != nil {
			t.Fatalf("Open(expect %s) = %v", c.expect, err)
		}
		if got := s.Mode(); got != c.want {
			t.Errorf("Open(expect %s).Mode() = %s, want %s", c.expect, got, c.want)
		}
		if got, want := s.ServerVersion(), server.VERSION; got != want {
			t.Errorf("ServerVersion() = %q, want %q", got, want)
		}
	}
	// An existing stream is used as it is: its storage does not change.
	cfg := ledger.DefaultConfig()
	cfg.Storage = ledger.FileStorage
	s, err := ledger.Open(context.Background(), natstest.Connect(t, srv), cfg)
	if err != nil {
		t.Fatalf("Open with file storage over a memory stream = %v, want nil", err)
	}
	if st, err := s.Status(context.Background()); err != nil || st.Storage != ledger.MemoryStorage {
		t.Errorf("Status() after Open(file) over a memory stream = %+v, %v; want memory storage", st, err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := ledger.DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v, want nil", err)
	}
	bad := ledger.Config{
		Stream:                "a.b",
		Prefix:                "tl.>",
		Storage:               "disk",
		Replicas:              0,
		DuplicateWindow:       -time.Second,
		Expect:                "maybe",
		BatchSize:             0,
		StreamConflictRetries: -1,
		AttemptTimeout:        2 * time.Second,
		RetryFor:              time.Second,
	}
	err := bad.Validate()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 9 {
		t.Fatalf("Validate(%+v) = %v, want 9 joined problems", bad, err)
	}
	if _, err := ledger.Open(context.Background(), nil, bad); err == nil {
		t.Errorf("Open with a bad config = nil, want an error")
	}
}

// TestReadsLeaveNoConsumers reads a project long enough to need a consumer,
// from several points, and the whole stream; afterwards the server holds no
// consumer of the stream (it allows 1000 per stream by default, so leftovers
// would soon make every read fail).
func TestReadsLeaveNoConsumers(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		var want []kernel.Recorded
		var last uint64
		for n := range uint64(12) {
			ev := record("p1", "t1", n+1)
			last = mustAppend(t, s, "p1", last, ev)
			want = append(want, kernel.Recorded{Seq: last, Event: ev})
			mustAppend(t, s, "noise", lastSeq(t, s, "noise"), record("noise", "t1", n+1))
		}
		for _, from := range []int{0, 3, 7, 10, 11} {
			after := uint64(0)
			if from > 0 {
				after = want[from-1].Seq
			}
			got, gotLast := readProject(t, s, "p1", after)
			if diff := cmp.Diff(want[from:], got); diff != "" {
				t.Errorf("ReadProject(p1, %d) mismatch (-want +got):\n%s", after, diff)
			}
			if gotLast != last {
				t.Errorf("ReadProject(p1, %d) last = %d, want %d", after, gotLast, last)
			}
		}
		if _, err := s.ReadAll(context.Background(), 0, func([]kernel.Recorded, uint64) error { return nil }); err != nil {
			t.Fatalf("ReadAll(0) = %v", err)
		}
		stop := errors.New("stop")
		if err := s.Follow(context.Background(), 0, func([]kernel.Recorded) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("Follow(0) = %v, want fn's error", err)
		}
		js, err := jetstream.New(natstest.Connect(t, e.srv))
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(context.Background(), e.cfg.Stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Consumers != 0 {
			t.Errorf("stream has %d consumers after the reads, want 0", info.State.Consumers)
		}
	})
}

// TestParallelProjectsOnOneStoreNeverConflict appends from many goroutines of
// one Store, each to a project of its own with the right expectation: none
// of them may see a conflict, in either mode. In stream-wide mode a Store
// serializes its own appends, so they never need a retry: allow none.
func TestParallelProjectsOnOneStoreNeverConflict(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		e.cfg.StreamConflictRetries = 0
		s := e.open(t)
		const writers, each = 8, 25
		var wg sync.WaitGroup
		errc := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				p := fmt.Sprintf("p%d", w)
				var last uint64
				for n := range uint64(each) {
					seq, err := s.Append(context.Background(), p, last, record(p, "t1", n+1))
					if err != nil {
						errc <- fmt.Errorf("Append(%s, %d) = %v", p, last, err)
						return
					}
					last = seq
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		if got := head(t, s); got != writers*each {
			t.Errorf("Head() = %d, want %d", got, writers*each)
		}
	})
}

// TestFollowSurvivesServerRestart follows a file stream on an external
// server that restarts: Follow goes on once the client has reconnected, with
// no event lost or repeated.
func TestFollowSurvivesServerRestart(t *testing.T) {
	dir := t.TempDir()
	srv := natstest.Start(t, natstest.StoreDir(dir))
	port := srv.Addr().(*net.TCPAddr).Port
	nc := natstest.Connect(t, srv, nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1))
	cfg := ledger.DefaultConfig()
	s, err := ledger.Open(context.Background(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	var last uint64
	add := func(n uint64) {
		t.Helper()
		last = mustAppend(t, s, "p1", last, record("p1", "t1", n))
		want = append(want, last)
	}
	add(1)
	add(2)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu  sync.Mutex
		got []uint64
	)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(ctx, 0, func(batch []kernel.Recorded) error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range batch {
				got = append(got, r.Seq)
			}
			return nil
		})
	}()
	received := func(n int) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(got) < n {
				return fmt.Errorf("Follow delivered %d events, want %d", len(got), n)
			}
			return nil
		}
	}
	checkfor.NoError(t, 5*time.Second, received(2))

	srv.Shutdown()
	srv.WaitForShutdown()
	natstest.Start(t, natstest.StoreDir(dir), natstest.Port(port))
	checkfor.NoError(t, 10*time.Second, func() error {
		if !nc.IsConnected() {
			return errors.New("client not reconnected")
		}
		return nil
	})
	// JetStream may need a moment after the restart before it takes writes.
	for n := uint64(3); n <= 5; n++ {
		checkfor.NoError(t, 10*time.Second, func() error {
			seq, err := s.Append(context.Background(), "p1", last, record("p1", "t1", n))
			if err != nil {
				return err
			}
			last = seq
			want = append(want, seq)
			return nil
		})
	}
	checkfor.NoError(t, 20*time.Second, received(5))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Follow after cancel = %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Follow across a restart mismatch (-want +got):\n%s", diff)
	}
}

// TestReplicatedStreamConflicts runs the race on a three-server cluster with a
// stream of three replicas, where JetStream reports a lost race with another
// error code (10164): it is still ErrConflict.
func TestReplicatedStreamConflicts(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	cfg := ledger.DefaultConfig()
	cfg.Replicas = 3
	var stores []*ledger.Store
	for _, srv := range servers[:2] {
		s, err := ledger.Open(context.Background(), natstest.Connect(t, srv), cfg)
		if err != nil {
			t.Fatalf("Open(replicas 3) on %s = %v", srv.Name(), err)
		}
		stores = append(stores, s)
	}
	var last uint64
	for round := range 5 {
		errs := make([]error, len(stores))
		seqs := make([]uint64, len(stores))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Go(func() {
				<-start
				seqs[i], errs[i] = s.Append(context.Background(), "p1", last, record("p1", "t1", uint64(round+1)))
			})
		}
		close(start)
		wg.Wait()
		wins := 0
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
				last = seqs[i]
			case errors.Is(err, ledger.ErrConflict):
			default:
				t.Fatalf("round %d: store %d Append = %v, want nil or ErrConflict", round, i, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d wins, want 1", round, wins)
		}
		// A plainly stale expectation is a conflict too.
		if _, err := stores[round%2].Append(context.Background(), "p1", 0, record("p1", "t1", 99)); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("round %d: Append(p1, 0) on a project at %d = %v, want ErrConflict", round, last, err)
		}
	}
	got, _ := readProject(t, stores[1], "p1", 0)
	if len(got) != 5 {
		t.Errorf("ReadProject(p1) on the cluster has %d events, want 5", len(got))
	}
}

// TestBadEventInTheMiddleOfALongRead puts an undecodable message between
// hundreds of good ones: every read hands over exactly the good events before
// it, in order, and then fails, however the messages were batched and
// decoded.
func TestBadEventInTheMiddleOfALongRead(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		var want []uint64
		var last uint64
		for n := range uint64(150) {
			last = mustAppend(t, s, "p1", last, record("p1", "t1", n+1))
			want = append(want, last)
		}
		js, err := jetstream.New(natstest.Connect(t, e.srv))
		if err != nil {
			t.Fatal(err)
		}
		ack, err := js.Publish(context.Background(), "tl.p1.turn", []byte(`{"type":"turn.exploded","v":1}`))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
		for n := range uint64(100) {
			last = mustAppend(t, s, "p1", last, record("p1", "t1", n+151))
		}

		var got []uint64
		_, err = s.ReadAll(context.Background(), 0, func(batch []kernel.Recorded, _ uint64) error {
			for _, r := range batch {
				got = append(got, r.Seq)
			}
			return nil
		})
		if err == nil {
			t.Errorf("ReadAll over a bad event = nil, want an error")
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ReadAll handed over (-want +got):\n%s", diff)
		}

		got = nil
		err = s.Follow(context.Background(), 0, func(batch []kernel.Recorded) error {
			for _, r := range batch {
				got = append(got, r.Seq)
			}
			return nil
		})
		if err == nil || errors.Is(err, context.Canceled) {
			t.Errorf("Follow over a bad event = %v, want a decoding error", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Follow handed over (-want +got):\n%s", diff)
		}

		got = nil
		seen, err := s.ReadProject(context.Background(), "p1", 0, func(r kernel.Recorded) error {
			got = append(got, r.Seq)
			return nil
		})
		if err == nil || seen != want[len(want)-1] {
			t.Errorf("ReadProject over a bad event = %d, %v; want %d and an error", seen, err, want[len(want)-1])
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ReadProject handed over (-want +got):\n%s", diff)
		}
	})
}
