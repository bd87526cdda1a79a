package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// runWorker runs w until the test ends (or stop is called); stop cancels
// Run's context at once and returns a function that waits for Run and
// reports its error.
func runWorker(t *testing.T, w *client.Worker) (stop func() (wait func() error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	wait := func() error {
		once.Do(func() { err = <-done })
		return err
	}
	stop = func() func() error {
		cancel()
		return wait
	}
	t.Cleanup(func() { stop()() })
	return stop
}

func outcome(t *testing.T, c *client.Client, project, turn string) string {
	t.Helper()
	tv, err := c.GetTurn(context.Background(), project, turn)
	if err != nil || tv.Outcome == nil {
		return ""
	}
	return *tv.Outcome
}

// TestWorkerRunsTurnsWithinCapacity: a worker finishes every Turn with the
// handler's result and a record appended through the job, never running more
// than the agent's capacity at once.
func TestWorkerRunsTurnsWithinCapacity(t *testing.T) {
	s := startServer(t, 0)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 2)

	var running, most atomic.Int32
	release := make(chan struct{})
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet}, func(ctx context.Context, job *client.Job) (client.Result, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if _, err := job.Append(ctx, "progress", map[string]any{"turn": job.Turn.TurnID}); err != nil {
			return client.Result{}, err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return client.Result{}, ctx.Err()
		}
		return client.Result{FinalPayload: map[string]any{"summary": "done " + job.Turn.DispatchKey}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, worker)
	var turns []string
	for i := range 5 {
		turns = append(turns, dispatch(t, boss, "p", "boss", "w", fmt.Sprintf("k%d", i)).TurnID)
	}
	checkfor.Until(t, 10*time.Second, "two handlers running", func() bool { return running.Load() == 2 })
	close(release)
	for _, id := range turns {
		checkfor.Until(t, 20*time.Second, "Turn "+id+" to finish", func() bool { return outcome(t, w, "p", id) == "succeeded" })
		cp, err := w.TurnContext(context.Background(), "p", id, 0, 10)
		if err != nil || len(cp.Items) != 2 || cp.Items[0].Role != "progress" || cp.Items[1].Role != "final" {
			t.Errorf("context of %s = %+v, %v; want a progress record and the final one", id, cp, err)
		}
	}
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d handlers ran at once, want 2 (the capacity)", m)
	}
	if err := stop()(); err != nil {
		t.Errorf("Run = %v after a shutdown, want nil", err)
	}
}

// TestWorkerFailureAndStop: a handler error finishes the Turn as failed; a
// stop request cancels the handler's context and finishes it as stopped.
func TestWorkerFailureAndStop(t *testing.T) {
	s := startServer(t, 0)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch", "management")
	w := s.agent(t, "p", "w", 1)
	started := make(chan string, 4)
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet}, func(ctx context.Context, job *client.Job) (client.Result, error) {
		started <- job.Turn.TurnID
		switch job.Turn.DispatchKey {
		case "fail":
			return client.Result{}, errors.New("boom")
		case "panic":
			panic("handler bug")
		}
		// Work until stopped, appending so that the stop is seen.
		for ctx.Err() == nil {
			if _, err := job.Append(ctx, "tick", map[string]any{}); err != nil && ctx.Err() == nil {
				return client.Result{}, err
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		if !job.StopRequested() {
			return client.Result{}, errors.New("cancelled without a stop request")
		}
		return client.Result{}, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, worker)
	failing := dispatch(t, boss, "p", "boss", "w", "fail")
	checkfor.Until(t, 20*time.Second, "the failing Turn to finish as failed", func() bool { return outcome(t, w, "p", failing.TurnID) == "failed" })
	panicking := dispatch(t, boss, "p", "boss", "w", "panic")
	checkfor.Until(t, 20*time.Second, "the panicking Turn to finish as failed", func() bool { return outcome(t, w, "p", panicking.TurnID) == "failed" })
	if tv, err := w.GetTurn(context.Background(), "p", panicking.TurnID); err != nil || !strings.Contains(string(tv.FinalPayload), "handler panicked: handler bug") {
		t.Errorf("final payload of the panicking Turn = %s, %v; want the panic", tv.FinalPayload, err)
	}
	long := dispatch(t, boss, "p", "boss", "w", "long")
	for id := range started {
		if id == long.TurnID {
			break
		}
	}
	if _, err := boss.StopTurn(context.Background(), "p", long.TurnID, client.AgentRef{ProjectID: "p", AgentID: "boss"}); err != nil {
		t.Fatal(err)
	}
	checkfor.Until(t, 20*time.Second, "the stopped Turn to finish as stopped", func() bool { return outcome(t, w, "p", long.TurnID) == "stopped" })
}

// TestWorkerRenewsAndShutsDownGracefully: with a 1s claim TTL a handler that
// works past it keeps its claim (the worker renews it); a shutdown stops
// claiming but lets the running handler finish its Turn.
func TestWorkerRenewsAndShutsDownGracefully(t *testing.T) {
	s := startServer(t, time.Second)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, Wait: 5 * time.Second}, func(ctx context.Context, job *client.Job) (client.Result, error) {
		started <- struct{}{}
		select {
		case <-release:
			return client.Result{Outcome: "succeeded"}, nil
		case <-ctx.Done():
			return client.Result{}, context.Cause(ctx)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, worker)
	tv := dispatch(t, boss, "p", "boss", "w", "k")
	<-started
	// Three renewals: the claim has lived past three TTLs.
	checkfor.Until(t, 20*time.Second, "three renewals of the claim", func() bool {
		f, err := w.TurnFeed(context.Background(), "p", tv.TurnID, client.FeedQuery{})
		n := 0
		for _, it := range f.Items {
			if it.Type == "turn.claim_renewed" {
				n++
			}
		}
		return err == nil && n >= 3
	})
	stopped := make(chan error, 1)
	wait := stop()
	go func() { stopped <- wait() }()
	// A Turn dispatched during the shutdown is not claimed by this worker.
	other := dispatch(t, boss, "p", "boss", "w", "after")
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) while a handler was still running", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if got := outcome(t, w, "p", tv.TurnID); got != "succeeded" {
		t.Errorf("the Turn running during shutdown finished as %q, want succeeded", got)
	}
	if tv2, err := w.GetTurn(context.Background(), "p", other.TurnID); err != nil || tv2.State != "queued" {
		t.Errorf("a Turn dispatched during shutdown is %+v, %v; want queued", tv2, err)
	}
}

// TestWorkerReportsPresence: a running worker, idle, shows its agent online.
func TestWorkerReportsPresence(t *testing.T) {
	s := startServer(t, 0)
	w := s.agent(t, "p", "w", 1)
	if a, err := w.GetAgent(context.Background(), "p", "w"); err != nil || a.Presence != "never" {
		t.Fatalf("presence before the worker = %+v, %v; want never", a, err)
	}
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet}, func(ctx context.Context, job *client.Job) (client.Result, error) {
		return client.Result{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, worker)
	checkfor.Until(t, 10*time.Second, "the agent to show online", func() bool {
		a, err := w.GetAgent(context.Background(), "p", "w")
		return err == nil && a.Presence == "online"
	})
}

// TestWorkerHandsItsClaimsBackOnShutdown: a handler still running when the
// shutdown's grace ends is cancelled, and its claim handed back at once:
// the Turn is queued again, its attempt not counted, long before the claim
// would have expired.
func TestWorkerHandsItsClaimsBackOnShutdown(t *testing.T) {
	s := startServer(t, time.Minute)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)
	started := make(chan struct{}, 1)
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, Wait: time.Second, ShutdownGrace: 10 * time.Millisecond}, func(ctx context.Context, job *client.Job) (client.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return client.Result{}, context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, worker)
	tv := dispatch(t, boss, "p", "boss", "w", "k")
	<-started
	if err := stop()(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	got, err := w.GetTurn(context.Background(), "p", tv.TurnID)
	if err != nil || got.State != "queued" || got.Attempts != 0 || got.Claim != nil {
		t.Fatalf("the Turn after the shutdown = %+v, %v; want queued again, 0 attempts", got, err)
	}
	f, err := w.TurnFeed(context.Background(), "p", tv.TurnID, client.FeedQuery{})
	if err != nil || f.Items[len(f.Items)-1].Type != "turn.claim_released" {
		t.Errorf("the Turn's feed ends with %v, want turn.claim_released", f.Items)
	}
}

// TestWorkerLogsEachClaimAndFinish: at info level, one line per claim and
// one per finish, with the Turn's id.
func TestWorkerLogsEachClaimAndFinish(t *testing.T) {
	s := startServer(t, 0)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)
	var buf syncBuffer
	worker, err := w.NewWorker(client.WorkerConfig{Logger: slog.New(slog.NewTextHandler(&buf, nil)), Wait: time.Second},
		func(ctx context.Context, job *client.Job) (client.Result, error) {
			return client.Result{Outcome: "succeeded"}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, worker)
	tv := dispatch(t, boss, "p", "boss", "w", "k")
	checkfor.Until(t, 10*time.Second, "the Turn to finish", func() bool { return outcome(t, w, "p", tv.TurnID) == "succeeded" })
	checkfor.Until(t, 10*time.Second, "the finish to be logged", func() bool { return strings.Contains(buf.String(), "finished") })
	out := buf.String()
	for _, want := range []string{"turnledger worker: claimed", "turnledger worker: finished", "turn_id=" + tv.TurnID, "outcome=succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("the worker's log lacks %q:\n%s", want, out)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerRunsAHundredTurnsOnceEach: a hundred Turns through a worker of
// eight handlers at once finish, each exactly once, never more than eight
// running together (the shared table of clients/situations.md).
func TestWorkerRunsAHundredTurnsOnceEach(t *testing.T) {
	s := startServer(t, 0)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 8)
	var mu sync.Mutex
	runs := map[string]int{}
	var running, most atomic.Int32
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, Wait: time.Second}, func(ctx context.Context, job *client.Job) (client.Result, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		runs[job.Turn.TurnID]++
		mu.Unlock()
		return client.Result{Outcome: "succeeded"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, worker)
	var ids []string
	for i := range 100 {
		ids = append(ids, dispatch(t, boss, "p", "boss", "w", fmt.Sprintf("k%d", i)).TurnID)
	}
	checkfor.Until(t, 60*time.Second, "a hundred Turns to finish", func() bool {
		pg, err := boss.ListTurns(context.Background(), "p", client.TurnQuery{State: "finished", Limit: 200})
		return err == nil && len(pg.Items) == 100
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if runs[id] != 1 {
			t.Errorf("turn %s ran %d times, want once", id, runs[id])
		}
	}
	if m := most.Load(); m > 8 {
		t.Errorf("%d handlers ran at once, want at most 8", m)
	}
}
