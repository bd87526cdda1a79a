package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// TestWithIdempotencyKeyAnswersTheFirstResult: a call retried with the same
// key gets the first answer (the same credential and token); a new key is a
// new call.
func TestWithIdempotencyKeyAnswersTheFirstResult(t *testing.T) {
	s := startServer(t, 0)
	s.agent(t, "p", "w", 1)
	adm := s.admin(t)
	ctx := client.WithIdempotencyKey(context.Background(), client.NewIdempotencyKey())
	first, err := adm.IssueCredential(ctx, "p", "w")
	if err != nil {
		t.Fatal(err)
	}
	again, err := adm.IssueCredential(ctx, "p", "w")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("IssueCredential retried with the same key differs (-first +retry):\n%s", diff)
	}
	other, err := adm.IssueCredential(client.WithIdempotencyKey(context.Background(), client.NewIdempotencyKey()), "p", "w")
	if err != nil {
		t.Fatal(err)
	}
	if other.Credential.CredentialID == first.Credential.CredentialID || other.Token == first.Token {
		t.Errorf("a new key issued credential %s again, want a new one", first.Credential.CredentialID)
	}
}

// loser is a transport that loses the answer of the first request of each
// route it is told to: the request reaches the server and is applied, but the
// caller gets a network error. It records the Idempotency-Key of every
// request to those routes.
type loser struct {
	suffixes []string

	mu   sync.Mutex
	keys map[string][]string // route suffix → the keys sent, in order
}

func (l *loser) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	for _, suf := range l.suffixes {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, suf) {
			continue
		}
		l.mu.Lock()
		l.keys[suf] = append(l.keys[suf], r.Header.Get(client.IdempotencyHeader))
		first := len(l.keys[suf]) == 1
		l.mu.Unlock()
		if first && err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil, errors.New("test: the answer was lost")
		}
	}
	return resp, err
}

func (l *loser) sent(suffix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys[suffix]...)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestWorkerRetriesLostAnswersWithTheSameKey: the answers of a worker's
// record and finish are lost once each; the worker sends each again with the
// same Idempotency-Key and gets the first answer, so the record is on the
// ledger once and the Turn is finished without a fencing error.
func TestWorkerRetriesLostAnswersWithTheSameKey(t *testing.T) {
	s := startServer(t, 0)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	l := &loser{suffixes: []string{"/semantic-records", ":finish"}, keys: map[string][]string{}}
	w := s.agentWith(t, "p", "w", 1, &http.Client{Transport: l})
	var logs lockedBuffer
	worker, err := w.NewWorker(client.WorkerConfig{RetryDelay: 10 * time.Millisecond, PresenceInterval: -1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		func(ctx context.Context, job *client.Job) (client.Result, error) {
			if _, err := job.Append(ctx, "progress", map[string]any{"step": 1}); err != nil {
				return client.Result{}, err
			}
			return client.Result{FinalPayload: map[string]any{"summary": "done"}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, worker)
	tv := dispatch(t, boss, "p", "boss", "w", "k1")
	checkfor.Until(t, 10*time.Second, "the Turn finished", func() bool { return outcome(t, boss, "p", tv.TurnID) != "" })
	if err := stop()(); err != nil { // waits for the handler and its finish
		t.Fatalf("Run = %v", err)
	}
	if got := outcome(t, boss, "p", tv.TurnID); got != "succeeded" {
		t.Errorf("outcome = %q, want succeeded (worker log: %s)", got, logs.String())
	}
	for _, suf := range l.suffixes {
		keys := l.sent(suf)
		if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
			t.Errorf("%s sent with keys %q, want twice with one key", suf, keys)
		}
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the worker warned: %s", logs.String())
	}
	feed, err := boss.TurnFeed(context.Background(), "p", tv.TurnID, client.FeedQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, it := range feed.Items {
		types = append(types, it.Type)
	}
	want := []string{"turn.dispatched", "turn.claimed", "turn.record_appended", "turn.finished"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("the Turn's events (-want +got):\n%s", diff)
	}
}
