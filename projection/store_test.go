package projection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/kernel"
)

func scenario(seed uint64, n int) *events {
	l := newEvents()
	randomScenario(l, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), n)
	return l
}

func TestApplySkipsWhatIsApplied(t *testing.T) {
	l := scenario(1, 400)
	s := applied(t, l)
	before := mustDump(t, s)
	if got := s.Checkpoint(); got != l.seq {
		t.Fatalf("Checkpoint() = %d, want %d", got, l.seq)
	}
	mustApply(t, s, l.recs)                 // the whole ledger again
	mustApply(t, s, l.recs[10:20])          // a slice of it
	mustApply(t, s, l.recs[len(l.recs)-1:]) // the last event
	if diff := cmp.Diff(before, mustDump(t, s)); diff != "" {
		t.Errorf("re-applying changed the store (-before +after):\n%s", diff)
	}

	// Overlapping batches fold like one batch.
	o, _ := openStore(t)
	mustApply(t, o, l.recs[:100])
	mustApply(t, o, l.recs[50:250])
	mustApply(t, o, l.recs[249:])
	if diff := cmp.Diff(before, mustDump(t, o)); diff != "" {
		t.Errorf("overlapping batches differ from one batch (-one +overlapping):\n%s", diff)
	}
}

func TestApplyOrderAndGaps(t *testing.T) {
	l := newEvents()
	for range 6 {
		l.register("w", "r", 1)
	}
	r := l.recs
	s, _ := openStore(t)
	mustApply(t, s, r[:3])
	before := mustDump(t, s)

	bad := []struct {
		name  string
		batch []kernel.Recorded
	}{
		{"decreasing", []kernel.Recorded{r[4], r[3]}},
		{"repeated", []kernel.Recorded{r[3], r[3]}},
		{"old after new", []kernel.Recorded{r[3], r[1]}},
		{"bad data after a good event", []kernel.Recorded{r[3], {Seq: 5, Event: kernel.Event{
			Type: kernel.EvTurnDispatched, V: 1, ProjectID: proj, Aggregate: kernel.AggTurn, ID: "t", Data: &kernel.TurnClaimed{}}}}},
	}
	for _, tt := range bad {
		if err := s.Apply(tt.batch); err == nil {
			t.Errorf("Apply(%s) = nil, want an error", tt.name)
		}
		if got := s.Checkpoint(); got != 3 {
			t.Errorf("Checkpoint() after Apply(%s) = %d, want 3", tt.name, got)
		}
		if diff := cmp.Diff(before, mustDump(t, s)); diff != "" {
			t.Errorf("failed Apply(%s) changed the store (-before +after):\n%s", tt.name, diff)
		}
	}
	// A gap is applicable: the stream may hold other messages.
	mustApply(t, s, []kernel.Recorded{r[5]})
	if got := s.Checkpoint(); got != 6 {
		t.Errorf("Checkpoint() after a gap = %d, want 6", got)
	}
	mustApply(t, s, []kernel.Recorded{r[3], r[4]}) // now below the checkpoint: skipped
	page, _ := s.ProjectFeed(proj, 0, 500)
	if diff := cmp.Diff([]uint64{1, 2, 3, 6}, seqs(page)); diff != "" {
		t.Errorf("feed after gap mismatch (-want +got):\n%s", diff)
	}
	if err := s.Apply(nil); err != nil {
		t.Errorf("Apply(nil) = %v, want nil", err)
	}
}

func TestRestartKeepsEverything(t *testing.T) {
	l := scenario(2, 600)
	half := len(l.recs) / 2
	path := filepath.Join(t.TempDir(), "p.db")
	s, err := Open(path, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, l.recs[:half])
	dump := mustDump(t, s)
	turns, _ := s.Turns(proj, TurnFilter{}, 500)
	feed, _ := s.ProjectFeed(proj, 10, 50)
	agents, _ := s.Agents(proj, AgentFilter{}, 500, l.now())
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := s.Apply(l.recs[half:]); !errors.Is(err, ErrClosed) {
		t.Errorf("Apply after Close = %v, want ErrClosed", err)
	}

	s, err = Open(path, testConfig())
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if got := s.Checkpoint(); got != l.recs[half-1].Seq {
		t.Errorf("Checkpoint() after reopen = %d, want %d", got, l.recs[half-1].Seq)
	}
	if diff := cmp.Diff(dump, mustDump(t, s)); diff != "" {
		t.Errorf("reopened store differs (-before +after):\n%s", diff)
	}
	turns2, _ := s.Turns(proj, TurnFilter{}, 500)
	feed2, _ := s.ProjectFeed(proj, 10, 50)
	agents2, _ := s.Agents(proj, AgentFilter{}, 500, l.now())
	if diff := cmp.Diff(turns, turns2); diff != "" {
		t.Errorf("Turns after reopen (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(feed, feed2); diff != "" {
		t.Errorf("ProjectFeed after reopen (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(agents, agents2); diff != "" {
		t.Errorf("Agents after reopen (-before +after):\n%s", diff)
	}
	// Resuming from the checkpoint ends where one uninterrupted fold ends.
	mustApply(t, s, l.since(s.Checkpoint()))
	if diff := cmp.Diff(mustDump(t, applied(t, l)), mustDump(t, s)); diff != "" {
		t.Errorf("resumed store differs from one fold (-one +resumed):\n%s", diff)
	}
}

func TestOpenErrors(t *testing.T) {
	cfg := testConfig()
	cfg.PresenceWindow = 0
	if _, err := Open(filepath.Join(t.TempDir(), "x.db"), cfg); err == nil {
		t.Errorf("Open with zero presence window = nil error, want one")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing-dir", "x.db"), testConfig()); err == nil {
		t.Errorf("Open in a missing directory = nil error, want one")
	}
	// A second process (here: a second Open) waits for the lock, then fails.
	_, path := openStore(t)
	cfg = testConfig()
	cfg.OpenTimeout = 50 * time.Millisecond
	if s, err := Open(path, cfg); err == nil {
		s.Close()
		t.Errorf("second Open of a locked file = nil error, want a timeout")
	}
}

func TestOpenRefusesOtherSchema(t *testing.T) {
	s, path := openStore(t)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktMeta).Put(keySchema, putU64(SchemaVersion+1))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(path, testConfig()); !errors.Is(err, ErrSchema) {
		if err == nil {
			s.Close()
		}
		t.Errorf("Open(file of schema %d) = %v, want ErrSchema", SchemaVersion+1, err)
	}
}

// TestOpenRefusesLayout1: a file of layout 1, which does not store Turns as
// kernel state, is refused with a message that says to run turnledger replay.
func TestOpenRefusesLayout1(t *testing.T) {
	s, path := openStore(t)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktMeta).Put(keySchema, putU64(1))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(path, testConfig())
	if err == nil {
		s.Close()
		t.Fatalf("Open(file of layout 1) = nil error, want ErrSchema")
	}
	if !errors.Is(err, ErrSchema) {
		t.Errorf("Open(file of layout 1) = %v, want ErrSchema", err)
	}
	for _, want := range []string{"layout 1", fmt.Sprintf("layout %d", SchemaVersion), "turnledger replay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(file of layout 1) = %q, want a message naming %q", err, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
	bad := Config{PresenceWindow: -1, OpenTimeout: -1, RetryInterval: 0}
	err := bad.Validate()
	if err == nil {
		t.Fatalf("Validate(%+v) = nil, want 5 problems", bad)
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 5 { // and MaxPageBytes 0
		t.Errorf("Validate(%+v) reports %d problems, want 5: %v", bad, n, err)
	}
}

func TestWaitFor(t *testing.T) {
	l := newEvents()
	for range 5 {
		l.register("w", "r", 1)
	}
	s, _ := openStore(t)
	done := make(chan error, 1)
	go func() { done <- s.WaitFor(context.Background(), 5) }()
	mustApply(t, s, l.recs[:3])
	select {
	case err := <-done:
		t.Fatalf("WaitFor(5) returned %v at checkpoint 3", err)
	default:
	}
	mustApply(t, s, l.recs[3:])
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WaitFor(5) = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitFor(5) did not return after the checkpoint reached 5")
	}
	// Already reached: at once.
	if err := s.WaitFor(context.Background(), 2); err != nil {
		t.Errorf("WaitFor(2) at checkpoint 5 = %v", err)
	}
	// The context ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- s.WaitFor(ctx, 99) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("WaitFor(99) after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitFor(99) ignored its context")
	}
	// Close wakes waiters.
	go func() { done <- s.WaitFor(context.Background(), 99) }()
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("WaitFor(99) after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitFor(99) not woken by Close")
	}
}

func TestProjectorFollowsAndRecovers(t *testing.T) {
	l := scenario(3, 500)
	src := newMemLedger(37)
	src.append(l.recs[:100]...)
	cfg := testConfig()
	cfg.RetryInterval = 10 * time.Millisecond
	now := t0.Add(time.Hour)
	cfg.Now = func() time.Time { return now }
	s, _ := openWith(t, cfg)
	p := NewProjector(s, src)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }()

	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := s.WaitFor(wctx, l.recs[99].Seq); err != nil {
		t.Fatalf("WaitFor(%d) = %v", l.recs[99].Seq, err)
	}
	// A failing source is recorded, retried, and recovered from.
	src.failOnce(errors.New("nats: connection lost"))
	src.append(l.recs[100:]...)
	if err := s.WaitFor(wctx, l.seq); err != nil {
		t.Fatalf("WaitFor(%d) = %v", l.seq, err)
	}
	if diff := cmp.Diff(mustDump(t, applied(t, l)), mustDump(t, s)); diff != "" {
		t.Errorf("followed store differs from one fold (-one +followed):\n%s", diff)
	}
	want := Status{Checkpoint: l.seq, LastError: "nats: connection lost", LastErrorAt: &now}
	if diff := cmp.Diff(want, p.Status()); diff != "" {
		t.Errorf("Status() mismatch (-want +got):\n%s", diff)
	}
	cancel()
	if err := <-runDone; !errors.Is(err, context.Canceled) {
		t.Errorf("Run() after cancel = %v, want context.Canceled", err)
	}
}

// failingSource always fails.
type failingSource struct{ err error }

func (f failingSource) Follow(context.Context, uint64, func([]kernel.Recorded) error) error {
	return f.err
}

func TestProjectorRecordsErrors(t *testing.T) {
	cfg := testConfig()
	cfg.RetryInterval = time.Millisecond
	now := t0
	cfg.Now = func() time.Time { return now }
	s, _ := openWith(t, cfg)
	p := NewProjector(s, failingSource{errors.New("ledger unreachable")})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }()
	checkfor.NoError(t, 5*time.Second, func() error {
		if st := p.Status(); !st.Failing {
			return errors.New("not failing yet")
		}
		return nil
	})
	want := Status{Failing: true, LastError: "ledger unreachable", LastErrorAt: &now}
	if diff := cmp.Diff(want, p.Status()); diff != "" {
		t.Errorf("Status() mismatch (-want +got):\n%s", diff)
	}
	cancel()
	if err := <-runDone; !errors.Is(err, context.Canceled) {
		t.Errorf("Run() after cancel = %v, want context.Canceled", err)
	}
}

func TestRebuildMatchesLiveStore(t *testing.T) {
	l := scenario(4, 3000)
	live := applied(t, l)
	src := newMemLedger(128)
	src.append(l.recs...)

	dir := t.TempDir()
	path := filepath.Join(dir, "rebuilt.db")
	// Transactions of 4 source batches: the rebuild folds several, one
	// while it reads the next.
	defer func(n int) { rebuildTxEvents = n }(rebuildTxEvents)
	rebuildTxEvents = 4 * 128
	var calls int
	var last [2]uint64
	err := Rebuild(context.Background(), path, src, func(applied, head uint64) {
		calls++
		if applied < last[0] {
			t.Errorf("progress went back: %d after %d", applied, last[0])
		}
		last = [2]uint64{applied, head}
	})
	if err != nil {
		t.Fatalf("Rebuild = %v", err)
	}
	if want := ((len(l.recs)+127)/128 + 3) / 4; calls != want || last != [2]uint64{l.seq, l.seq} {
		t.Errorf("progress: %d calls ending at %v, want %d calls ending at [%d %d]", calls, last, want, l.seq, l.seq)
	}
	// Events appended after the rebuild started are not in it.
	src.append(l.add(kernel.EvAgentHeartbeat, proj, kernel.AggAgent, "a0", admin(), &kernel.AgentHeartbeat{}))

	rebuilt, err := Open(path, testConfig())
	if err != nil {
		t.Fatalf("Open(rebuilt) = %v", err)
	}
	defer rebuilt.Close()
	if diff := cmp.Diff(mustDump(t, live), mustDump(t, rebuilt)); diff != "" {
		t.Errorf("rebuilt store differs from the live one (-live +rebuilt):\n%s", diff)
	}

	if err := Rebuild(context.Background(), path, src, nil); err == nil {
		t.Errorf("Rebuild onto an existing file = nil, want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := filepath.Join(dir, "cancelled.db")
	if err := Rebuild(ctx, gone, src, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Rebuild with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed Rebuild left its file: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := Rebuild(context.Background(), empty, newMemLedger(10), nil); err != nil {
		t.Errorf("Rebuild of an empty ledger = %v", err)
	}
}

// TestIndexesAgreeWithSnapshots folds long random scenarios and checks every
// derived index against the Turn snapshots themselves: the state index, the
// target index, active claims and the queued counts of the offers.
func TestIndexesAgreeWithSnapshots(t *testing.T) {
	for seed := uint64(10); seed < 16; seed++ {
		l := scenario(seed, 1200)
		s := applied(t, l)
		all, err := s.Turns(proj, TurnFilter{}, MaxLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) == 0 || len(all) == MaxLimit {
			t.Fatalf("seed %d: %d Turns, want between 1 and %d", seed, len(all), MaxLimit-1)
		}
		claims := map[string]int{}
		queued := map[[2]string]int{}
		for _, v := range all {
			if v.State == StateClaimed {
				claims[v.Claim.AgentID]++
			}
			if v.State == StateQueued {
				queued[[2]string{v.TargetAgent.AgentID, v.TurnKind}]++
			}
		}
		filterIn := func(keep func(TurnView) bool) []TurnView {
			out := []TurnView{}
			for _, v := range all {
				if keep(v) {
					out = append(out, v)
				}
			}
			return out
		}
		for _, st := range []string{StateQueued, StateClaimed, StateSuspended, StateFinished} {
			got, _ := s.Turns(proj, TurnFilter{State: st}, MaxLimit)
			if diff := cmp.Diff(filterIn(func(v TurnView) bool { return v.State == st }), got); diff != "" {
				t.Errorf("seed %d: Turns(state=%s) disagrees with the snapshots (-want +got):\n%s", seed, st, diff)
			}
		}
		agents, _ := s.Agents(proj, AgentFilter{}, MaxLimit, l.now())
		for _, a := range agents {
			if a.ActiveClaims != claims[a.AgentID] {
				t.Errorf("seed %d: Agent(%s).ActiveClaims = %d, want %d", seed, a.AgentID, a.ActiveClaims, claims[a.AgentID])
			}
			got, _ := s.Turns(proj, TurnFilter{TargetAgentID: a.AgentID}, MaxLimit)
			if diff := cmp.Diff(filterIn(func(v TurnView) bool { return v.TargetAgent.AgentID == a.AgentID }), got); diff != "" {
				t.Errorf("seed %d: Turns(target=%s) disagrees (-want +got):\n%s", seed, a.AgentID, diff)
			}
			got, _ = s.Turns(proj, TurnFilter{VisibleTo: a.AgentID}, MaxLimit)
			involved := func(v TurnView) bool {
				return v.TargetAgent.AgentID == a.AgentID || v.RequestedBy.AgentID == a.AgentID
			}
			visible := filterIn(func(v TurnView) bool {
				root, _ := s.Turn(proj, v.RootTurnID)
				return involved(v) || involved(root)
			})
			if diff := cmp.Diff(visible, got); diff != "" {
				t.Errorf("seed %d: Turns(visible to %s) disagrees (-want +got):\n%s", seed, a.AgentID, diff)
			}
		}
		offers, _ := s.TurnOffers(proj, OfferFilter{}, MaxLimit, l.now())
		for _, o := range offers {
			if want := queued[[2]string{o.AgentID, o.TurnKind}]; o.Queued != want {
				t.Errorf("seed %d: offer (%s, %s).Queued = %d, want %d", seed, o.AgentID, o.TurnKind, o.Queued, want)
			}
		}
	}
}

// TestFoldsDecodedEvents folds events that went through the kernel's codec
// (data as the pointers UnmarshalEvent returns) and finds the same store as
// folding the events built in memory.
func TestFoldsDecodedEvents(t *testing.T) {
	l := scenario(5, 800)
	decoded := make([]kernel.Recorded, len(l.recs))
	for i, r := range l.recs {
		b, err := kernel.MarshalEvent(r.Event)
		if err != nil {
			t.Fatalf("MarshalEvent(%d %s) = %v", r.Seq, r.Event.Type, err)
		}
		e, err := kernel.UnmarshalEvent(b)
		if err != nil {
			t.Fatalf("UnmarshalEvent(%s) = %v", b, err)
		}
		decoded[i] = kernel.Recorded{Seq: r.Seq, Event: e}
	}
	d, _ := openStore(t)
	mustApply(t, d, decoded)
	if diff := cmp.Diff(mustDump(t, applied(t, l)), mustDump(t, d)); diff != "" {
		t.Errorf("decoded events fold differently (-built +decoded):\n%s", diff)
	}
}

func TestInstall(t *testing.T) {
	l := scenario(6, 200)
	s, live := openStore(t)
	mustApply(t, s, l.recs[:10])
	s.Close()
	src := newMemLedger(50)
	src.append(l.recs...)
	rebuilt := live + ".new"
	if err := Rebuild(context.Background(), rebuilt, src, nil); err != nil {
		t.Fatalf("Rebuild = %v", err)
	}
	if err := Install(rebuilt, live); err != nil {
		t.Fatalf("Install = %v", err)
	}
	s, err := Open(live, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Checkpoint(); got != l.seq {
		t.Errorf("Checkpoint() after Install = %d, want %d", got, l.seq)
	}
	if _, err := os.Stat(rebuilt); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rebuilt file still at %s: %v", rebuilt, err)
	}
}
