package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// heldLedger is a real Store whose next append of project p1 (pipelined or
// in sequence) stops inside the ledger until release is closed; it notes
// every append's entry and return, by project.
type heldLedger struct {
	*ledger.Store
	hold    chan struct{} // closed once p1's held append has entered
	release chan struct{}

	mu    sync.Mutex
	armed bool
	notes []string
}

func holdP1(l *ledger.Store) *heldLedger {
	return &heldLedger{Store: l, hold: make(chan struct{}), release: make(chan struct{}), armed: true}
}

func (h *heldLedger) enter(project string) {
	h.mu.Lock()
	h.notes = append(h.notes, "enter "+project)
	held := project == "p1" && h.armed
	if held {
		h.armed = false
	}
	h.mu.Unlock()
	if held {
		close(h.hold)
		<-h.release
	}
}

func (h *heldLedger) leave(project string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, "leave "+project)
}

func (h *heldLedger) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.notes...)
}

func (h *heldLedger) Append(ctx context.Context, project string, expectLast uint64, e kernel.Event) (uint64, error) {
	h.enter(project)
	defer h.leave(project)
	return h.Store.Append(ctx, project, expectLast, e)
}

func (h *heldLedger) AppendAsync(ctx context.Context, project string, expectLast uint64, e kernel.Event) (uint64, <-chan struct{}, func() error, error) {
	h.enter(project)
	defer h.leave(project)
	return h.Store.AppendAsync(ctx, project, expectLast, e)
}

func registerIn(ctx context.Context, e *engine.Engine, project, id string) error {
	_, err := e.Execute(ctx, project, kernel.RegisterAgent{Common: admin, Spec: kernel.AgentSpec{
		AgentID: id, Role: "worker", Enabled: true, AcceptsWork: true, Capacity: 1, PublicMetadata: json.RawMessage(`{}`),
	}, Provenance: kernel.Provenance{Kind: "test"}})
	return err
}

// TestPipelinedProjectsDecideAndSendOneAtATime: where the ledger pipelines,
// every project's appends are one sequence on the stream, and commands of
// several projects decide and send one at a time. While a command of p1 is
// between its decision and its send, reads of other projects go on (of p2,
// and of p3, which the engine has not loaded yet and loads meanwhile), and
// a command of p2 waits for it.
func TestPipelinedProjectsDecideAndSendOneAtATime(t *testing.T) {
	emb := startEmbedded(t, true)
	_, l, err := emb.Open(t.Context(), ledger.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	// p3's history, written by another engine on the same Store.
	before, err := engine.New(l, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"p1", "p2", "p3"} {
		if err := registerIn(t.Context(), before, p, "w"); err != nil {
			t.Fatal(err)
		}
	}
	h := holdP1(l)
	e, err := engine.New(h, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.View(t.Context(), "p2", func(*kernel.Project) error { return nil }); err != nil {
		t.Fatal(err) // p2 loaded before the hold
	}

	errs := make(chan error, 2)
	go func() { errs <- registerIn(t.Context(), e, "p1", "a") }()
	<-h.hold

	for _, p := range []string{"p2", "p3"} {
		agents := 0
		if err := e.View(t.Context(), p, func(p *kernel.Project) error { agents = len(p.Agents); return nil }); err != nil {
			t.Fatalf("read %s while p1's command was held: %v", p, err)
		}
		if agents != 1 {
			t.Errorf("%s read while p1's command was held shows %d agents, want 1", p, agents)
		}
	}
	// p2's command, started now, must not reach the ledger before p1's
	// send has returned. (A fresh read of p2 would now wait for the answer
	// of p2's append, as reads take the answer of their project's next
	// append while a command of it is on its way: lastseq.go.)
	go func() { errs <- registerIn(t.Context(), e, "p2", "b") }()
	time.Sleep(100 * time.Millisecond)
	close(h.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"enter p1", "leave p1", "enter p2", "leave p2"}
	if diff := cmp.Diff(want, h.seen()); diff != "" {
		t.Errorf("appends of p1 and p2 (-want +got):\n%s", diff)
	}
}

// TestProjectsInSequenceNeverWaitForEachOther: where the ledger appends in
// sequence (a server other writers share), a command of p2 is answered
// while a command of p1 waits for the ledger.
func TestProjectsInSequenceNeverWaitForEachOther(t *testing.T) {
	cfg := ledger.DefaultConfig()
	cfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(t.Context(), natstest.Connect(t, natstest.Start(t)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.Pipelined() {
		t.Fatal("a Store opened on a server's connection pipelines")
	}
	h := holdP1(l)
	e, err := engine.New(h, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	p1 := make(chan error, 1)
	go func() { p1 <- registerIn(t.Context(), e, "p1", "a") }()
	<-h.hold
	if err := registerIn(t.Context(), e, "p2", "b"); err != nil {
		t.Fatalf("p2's command while p1's waited for the ledger: %v", err)
	}
	close(h.release)
	if err := <-p1; err != nil {
		t.Fatal(err)
	}
	want := []string{"enter p1", "enter p2", "leave p2", "leave p1"}
	if diff := cmp.Diff(want, h.seen()); diff != "" {
		t.Errorf("appends of p1 and p2 (-want +got):\n%s", diff)
	}
}
