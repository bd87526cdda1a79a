package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// TestPipelinedCommandsOfOneProject: on an embedded server with no listener
// the engine sends a command's append and lets the project's next command
// decide before the answer comes. Commands at once on one project are each
// answered once stored and durable, every Turn claimed once, and the state
// the engine ends with is the one folded from the ledger.
func TestPipelinedCommandsOfOneProject(t *testing.T) {
	e, l, _ := pipelinedEngine(t, true)
	register(t, e, "req", 1)
	register(t, e, "worker", 64)
	const n = 64
	var wg sync.WaitGroup
	claimed := make([]string, n)
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := dispatch(e, fmt.Sprintf("k%d", k))
			if err != nil {
				t.Errorf("dispatch %d: %v", k, err)
				return
			}
			if d.Seq > l.DurableSeq() {
				t.Errorf("dispatch %d answered at ledger_seq %d before it was durable (%d)", k, d.Seq, l.DurableSeq())
			}
			c, _, err := e.Claim(context.Background(), "p1", admin, "worker", nil)
			if err != nil || c == nil {
				t.Errorf("claim %d: %+v, %v", k, c, err)
				return
			}
			claimed[k] = c.TurnID
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for k, id := range claimed {
		if id != "" && seen[id] {
			t.Errorf("claim %d won Turn %s a second time", k, id)
		}
		seen[id] = true
	}
	sameAsTheLedger(t, e, l)
}

// TestARefusedPipelinedAppendIsAnsweredAndTheStateFoldedAgain: when another
// writer appends to the stream behind the Store's back, the append the
// engine sent next is refused. Its command is answered Unavailable with
// nothing stored; the next command decides on the state folded again from
// the ledger, and succeeds.
func TestARefusedPipelinedAppendIsAnsweredAndTheStateFoldedAgain(t *testing.T) {
	e, l, emb := pipelinedEngine(t, false)
	register(t, e, "req", 1)
	register(t, e, "worker", 4)
	if _, err := dispatch(e, "k1"); err != nil {
		t.Fatal(err)
	}

	appendBehindItsBack(t, emb, "p2")

	before := projectEvents(t, l)
	if _, err := dispatch(e, "k2"); kernel.ErrorKind(err) != kernel.Unavailable {
		t.Fatalf("the dispatch sent after another writer's append = %v, want %s", err, kernel.Unavailable)
	}
	if got := projectEvents(t, l); got != before {
		t.Fatalf("the refused dispatch left %d events of p1, want the %d before it", got, before)
	}
	for _, key := range []string{"k2", "k3"} {
		if _, err := dispatch(e, key); err != nil {
			t.Fatalf("dispatch %s after the refusal: %v", key, err)
		}
	}
	if got := projectEvents(t, l); got != before+2 {
		t.Errorf("p1 holds %d events, want %d", got, before+2)
	}
	sameAsTheLedger(t, e, l)
}

// appendBehindItsBack appends an event of project to the stream of emb
// through another writer, on a connection of its own (opened with
// ledger.Open, so the server does not know of it): the next pipelined
// append of the Store already open is refused.
func appendBehindItsBack(t *testing.T, emb *ledger.Embedded, project string) {
	t.Helper()
	nc, err := emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	other, err := ledger.Open(t.Context(), nc, ledger.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Append(t.Context(), project, 0, kernel.Event{
		Type: kernel.EvAgentHeartbeat, V: 1, ProjectID: project, Aggregate: kernel.AggAgent, ID: "w",
		At: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC), Actor: kernel.Actor{Kind: "admin"}, Data: &kernel.AgentHeartbeat{},
	}); err != nil {
		t.Fatal(err)
	}
}

// pipelinedEngine is an engine over the Store of a new embedded server with
// file storage and no listener (serve's embedded ledger, which pipelines),
// committing in groups when groupCommit.
func pipelinedEngine(t *testing.T, groupCommit bool) (*engine.Engine, *ledger.Store, *ledger.Embedded) {
	t.Helper()
	emb := startEmbedded(t, groupCommit)
	_, l, err := emb.Open(t.Context(), ledger.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !l.Pipelined() {
		t.Fatal("the Store of an embedded server with no listener does not pipeline")
	}
	e, err := engine.New(l, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return e, l, emb
}

// projectEvents counts the events of project p1 on the ledger.
func projectEvents(t *testing.T, l *ledger.Store) int {
	t.Helper()
	n := 0
	if _, err := l.ReadProject(context.Background(), "p1", 0, func(kernel.Recorded) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// sameAsTheLedger checks that e's state of p1 is the one a new engine folds
// from the ledger.
func sameAsTheLedger(t *testing.T, e *engine.Engine, l *ledger.Store) {
	t.Helper()
	fresh, err := engine.New(l, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	snap := func(e *engine.Engine) []byte {
		var b []byte
		if err := e.View(context.Background(), "p1", func(p *kernel.Project) error {
			var err error
			b, err = engine.EncodeSnapshot(p)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if a, b := snap(e), snap(fresh); !bytes.Equal(a, b) {
		t.Errorf("the engine's state of p1 differs from the one folded from the ledger (%d vs %d bytes)", len(a), len(b))
	}
}

// TestTheSoleWriterAuthenticatesWithoutALookAtTheLedger: where the engine's
// ledger is its stream's only writer, a request's authentication uses the
// engine's state as it is (every event on the ledger was sent by it) and
// asks the ledger nothing; once a second Store opens on the stream, a
// credential revoked through it is refused on the first engine's very next
// request.
func TestTheSoleWriterAuthenticatesWithoutALookAtTheLedger(t *testing.T) {
	_, l, emb := pipelinedEngine(t, true)
	counted := &countingLedger{Store: l}
	e, err := engine.New(counted, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	register(t, e, "req", 1)
	register(t, e, "worker", 1)
	cred, err := e.IssueCredential(t.Context(), "p1", admin, "worker")
	if err != nil {
		t.Fatal(err)
	}
	before := counted.lastSeqs.Load()
	for range 10 {
		if _, err := e.Authenticate(t.Context(), "p1", "worker", cred.Token); err != nil {
			t.Fatalf("Authenticate = %v", err)
		}
	}
	if n := counted.lastSeqs.Load() - before; n != 0 {
		t.Errorf("10 authentications of the sole writer looked up the last ledger_seq %d times, want 0", n)
	}

	// A second writer: another Store on the stream, with an engine of its own.
	_, l2, err := emb.Open(t.Context(), ledger.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l.Pipelined() {
		t.Fatal("the first Store still pipelines beside a second one")
	}
	e2, err := engine.New(l2, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e2.Execute(t.Context(), "p1", kernel.RevokeCredential{Common: admin, AgentID: "worker", CredentialID: cred.CredentialID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Authenticate(t.Context(), "p1", "worker", cred.Token); kernel.ErrorKind(err) != kernel.Unauthorized {
		t.Fatalf("Authenticate after the revocation through the second Store = %v, want %s", err, kernel.Unauthorized)
	}
}
