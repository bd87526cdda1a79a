package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/testclock"
)

// claimTransport sees every claim request on its way to the real server.
// fail, when it returns a response or an error for the n-th claim request
// (from 0), answers in the server's place; lose drops the answer of the
// first claim that won a Turn, after the server decided it: the client sees
// a broken connection.
type claimTransport struct {
	fail func(n int) (*http.Response, error)
	lose bool

	mu    sync.Mutex
	keys  []string    // the Idempotency-Key of every claim request, in order
	at    []time.Time // when each was sent
	lost  []byte      // the answer lost
	calls int
}

func (ct *claimTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/claims:claim") {
		return http.DefaultTransport.RoundTrip(req)
	}
	ct.mu.Lock()
	n := ct.calls
	ct.calls++
	ct.keys = append(ct.keys, req.Header.Get(client.IdempotencyHeader))
	ct.at = append(ct.at, time.Now())
	ct.mu.Unlock()
	if ct.fail != nil {
		if resp, err := ct.fail(n); resp != nil || err != nil {
			if resp != nil {
				resp.Request = req
			}
			return resp, err
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !ct.lose {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.lost == nil && resp.StatusCode == 200 && string(bytes.TrimSpace(body)) != "null" {
		ct.lost = body
		return nil, errors.New("test: the connection broke before the answer arrived")
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (ct *claimTransport) seen() (keys []string, at []time.Time, lost []byte) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return append([]string(nil), ct.keys...), append([]time.Time(nil), ct.at...), ct.lost
}

// startRun runs w.Run in the background; the channel gets what it returns.
// The test's end stops it.
func startRun(t *testing.T, w *client.Worker) (stop context.CancelFunc, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ch <- w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return cancel, ch
}

func claimedEvents(t *testing.T, c *client.Client, project, turn string) int {
	t.Helper()
	f, err := c.TurnFeed(context.Background(), project, turn, client.FeedQuery{Limit: 100})
	if err != nil {
		t.Fatalf("TurnFeed(%s) = %v", turn, err)
	}
	n := 0
	for _, it := range f.Items {
		if it.Type == "turn.claimed" {
			n++
		}
	}
	return n
}

// TestWorkerRetriesALostClaimWithItsKey: the server claims a Turn but its
// answer is lost on the way; the worker's retry carries the same
// Idempotency-Key and gets the same claim (the same Turn and token), not a
// second Turn; the claim after it is a new one, with a new key.
func TestWorkerRetriesALostClaimWithItsKey(t *testing.T) {
	s := startServer(t, 0)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	ct := &claimTransport{lose: true}
	w := s.agentWith(t, "p", "w", 2, &http.Client{Transport: ct})
	first := dispatch(t, boss, "p", "boss", "w", "first")
	second := dispatch(t, boss, "p", "boss", "w", "second")

	jobs := make(chan client.ClaimToken, 4)
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, RetryDelay: 10 * time.Millisecond, Wait: time.Second},
		func(ctx context.Context, job *client.Job) (client.Result, error) {
			jobs <- job.Claim
			return client.Result{}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, worker)
	// The agent's capacity is 2: the jobs of both Turns run at once and
	// may start in either order.
	var got client.ClaimToken
	deadline := time.After(20 * time.Second)
	for got.TurnID != first.TurnID {
		select {
		case got = <-jobs:
		case <-deadline:
			t.Fatal("the worker did not run the first Turn")
		}
	}
	keys, _, lost := ct.seen()
	if lost == nil {
		t.Fatal("no claim answer was lost")
	}
	if !bytes.Contains(lost, []byte(`"token":"`+got.Token+`"`)) {
		t.Errorf("the job of Turn %s holds claim %+v; want the lost one: %s", first.TurnID, got, lost)
	}
	if len(keys) < 2 || keys[0] == "" || keys[1] != keys[0] {
		t.Errorf("claim Idempotency-Keys = %q; want the lost claim's retry to carry its key", keys)
	}
	for _, id := range []string{first.TurnID, second.TurnID} {
		checkfor.Until(t, 20*time.Second, "Turn "+id+" to finish", func() bool { return outcome(t, boss, "p", id) == "succeeded" })
		if n := claimedEvents(t, boss, "p", id); n != 1 {
			t.Errorf("Turn %s was claimed %d times, want once", id, n)
		}
	}
	if keys, _, _ = ct.seen(); len(keys) < 3 || keys[2] == keys[0] {
		t.Errorf("claim Idempotency-Keys = %q; want a new key for the claim after an answer", keys)
	}
}

// TestWorkerRetriesPassingClaimErrors: a 503 with Retry-After, a broken
// connection and a 500 do not stop the worker: each claim is sent again, with
// the same Idempotency-Key, after RetryDelay or, for the 503, after the
// Retry-After the service asked for; then the worker runs the Turn.
func TestWorkerRetriesPassingClaimErrors(t *testing.T) {
	s := startServer(t, 0)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	answer := func(status int, name string, header http.Header) *http.Response {
		if header == nil {
			header = http.Header{}
		}
		header.Set("Content-Type", "application/json")
		return &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(strings.NewReader(`{"error":"` + name + `","message":"test"}`))}
	}
	ct := &claimTransport{fail: func(n int) (*http.Response, error) {
		switch n {
		case 0:
			return answer(503, "ServiceUnavailableError", http.Header{"Retry-After": {"1"}}), nil
		case 1:
			return nil, errors.New("test: connection refused")
		case 2:
			return answer(500, "InternalError", nil), nil
		}
		return nil, nil
	}}
	w := s.agentWith(t, "p", "w", 1, &http.Client{Transport: ct})
	tv := dispatch(t, boss, "p", "boss", "w", "k")
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, RetryDelay: 10 * time.Millisecond, Wait: time.Second},
		func(ctx context.Context, job *client.Job) (client.Result, error) { return client.Result{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	_, done := startRun(t, worker)
	checkfor.Until(t, 20*time.Second, "the Turn to finish", func() bool { return outcome(t, boss, "p", tv.TurnID) == "succeeded" })
	select {
	case err := <-done:
		t.Fatalf("Run returned %v after passing claim errors, want it running", err)
	default:
	}
	keys, at, _ := ct.seen()
	if len(keys) < 4 || keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] || keys[3] != keys[0] {
		t.Errorf("claim Idempotency-Keys = %q; want one key for the claim and its three retries", keys)
	}
	if len(at) >= 2 && at[1].Sub(at[0]) < time.Second {
		t.Errorf("the claim after a 503 with Retry-After: 1 was sent again after %v, want at least 1s", at[1].Sub(at[0]))
	}
}

// TestWorkerStopsWhenItsCredentialIsRevoked: a claim refused for good (401:
// the credential was revoked while the worker waited) ends Run with that
// refusal instead of retrying it forever.
func TestWorkerStopsWhenItsCredentialIsRevoked(t *testing.T) {
	s := startServer(t, 0)
	adm := s.admin(t)
	w := s.agent(t, "p", "w", 1)
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, RetryDelay: 10 * time.Millisecond, Wait: 200 * time.Millisecond},
		func(ctx context.Context, job *client.Job) (client.Result, error) { return client.Result{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	_, done := startRun(t, worker)
	checkfor.Until(t, 10*time.Second, "the worker to wait for work", func() bool { n, _ := s.api.Waiting(); return n >= 1 })
	creds, err := adm.ListCredentials(context.Background(), "p", "w")
	if err != nil || len(creds.Items) != 1 {
		t.Fatalf("ListCredentials = %+v, %v; want one credential", creds, err)
	}
	if err := adm.RevokeCredential(context.Background(), "p", "w", creds.Items[0].CredentialID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != http.StatusUnauthorized || !errors.Is(err, client.ErrUnauthorized) {
			t.Errorf("Run after the credential was revoked = %v, want a *client.Error with status 401", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run still runs after its credential was revoked")
	}
}

// TestWorkerCancelsTheHandlerWhenItsClaimIsLost: the clock moves past the
// claim's expiry and the claim is released (reconciled), or the Turn held by
// the expired claim is stopped; the worker's next renewal is refused and the
// handler's context is cancelled with ErrClaimLost. The worker does not
// finish the Turn with the lost claim.
func TestWorkerCancelsTheHandlerWhenItsClaimIsLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lose    func(t *testing.T, boss *client.Client, adm *client.Client, turn string)
		outcome string // the Turn's outcome in the end
	}{
		{"expired and released", func(t *testing.T, _ *client.Client, adm *client.Client, turn string) {
			res, err := adm.ReconcileExpiredClaims(context.Background(), "p")
			if err != nil || len(res.ReleasedTurnIDs) != 1 || res.ReleasedTurnIDs[0] != turn {
				t.Fatalf("ReconcileExpiredClaims = %+v, %v; want Turn %s released", res, err, turn)
			}
		}, "succeeded"}, // claimed again, and finished by the next run
		{"stopped after it expired", func(t *testing.T, boss *client.Client, _ *client.Client, turn string) {
			if _, err := boss.StopTurn(context.Background(), "p", turn, client.AgentRef{ProjectID: "p", AgentID: "boss"}); err != nil {
				t.Fatal(err)
			}
		}, "stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &testclock.Offset{}
			s := startServerWith(t, serverConfig{ClaimTTL: 3 * time.Second, Now: clk.Now})
			boss := s.agent(t, "p", "boss", 1, "turns:dispatch", "management")
			w := s.agent(t, "p", "w", 1)
			started := make(chan struct{}, 1)
			causes := make(chan error, 1)
			var runs atomic.Int32
			worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, RetryDelay: 10 * time.Millisecond, Wait: time.Second},
				func(ctx context.Context, job *client.Job) (client.Result, error) {
					if runs.Add(1) > 1 {
						return client.Result{}, nil
					}
					started <- struct{}{}
					<-ctx.Done()
					causes <- context.Cause(ctx)
					return client.Result{}, ctx.Err()
				})
			if err != nil {
				t.Fatal(err)
			}
			startRun(t, worker)
			tv := dispatch(t, boss, "p", "boss", "w", "k")
			select {
			case <-started:
			case <-time.After(20 * time.Second):
				t.Fatal("the handler did not start")
			}
			clk.Advance(time.Hour) // the claim has expired
			tc.lose(t, boss, s.admin(t), tv.TurnID)
			select {
			case cause := <-causes:
				if !errors.Is(cause, client.ErrClaimLost) {
					t.Errorf("the handler's context was cancelled with %v, want ErrClaimLost", cause)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the handler's context was not cancelled after its claim was lost")
			}
			checkfor.Until(t, 20*time.Second, "the Turn's outcome "+tc.outcome, func() bool { return outcome(t, boss, "p", tv.TurnID) == tc.outcome })
		})
	}
}

// TestWorkerShutdownGraceCancelsARunningHandler: a handler still running when
// the shutdown grace ends has its context cancelled with ErrShutdown; Run
// returns once it has returned, and the Turn is left to its claim's expiry.
func TestWorkerShutdownGraceCancelsARunningHandler(t *testing.T) {
	s := startServer(t, 0)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)
	const grace = 200 * time.Millisecond
	started := make(chan struct{}, 1)
	var cause atomic.Value
	var returned atomic.Bool
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, ShutdownGrace: grace, Wait: time.Second},
		func(ctx context.Context, job *client.Job) (client.Result, error) {
			started <- struct{}{}
			<-ctx.Done()
			cause.Store(context.Cause(ctx))
			returned.Store(true)
			return client.Result{}, ctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	stop, done := startRun(t, worker)
	tv := dispatch(t, boss, "p", "boss", "w", "k")
	<-started
	stopAt := time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v after a shutdown, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the shutdown grace")
	}
	if waited := time.Since(stopAt); waited < grace {
		t.Errorf("Run returned %v after the stop, before the %v grace ended", waited, grace)
	}
	if !returned.Load() {
		t.Error("Run returned before the handler did")
	}
	if c, _ := cause.Load().(error); !errors.Is(c, client.ErrShutdown) {
		t.Errorf("the handler's context was cancelled with %v, want ErrShutdown", c)
	}
	if got, err := boss.GetTurn(context.Background(), "p", tv.TurnID); err != nil || got.State != "queued" {
		t.Errorf("the Turn after the shutdown = %+v, %v; want it queued again (its claim handed back)", got, err)
	}
}
