package ledger

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

// openPipelined opens a Store on a new embedded server with no listener
// (memory storage): the only writer of its stream.
func openPipelined(t *testing.T) (*Embedded, *Store) {
	t.Helper()
	e := startEmbedded(t, DefaultEmbeddedConfig(t.TempDir()))
	lcfg := DefaultConfig()
	lcfg.Storage = MemoryStorage
	s := openEmbedded(t, e, lcfg)
	if !s.Pipelined() {
		t.Fatal("a Store of an embedded server with no listener does not pipeline")
	}
	return e, s
}

type sentEv struct {
	seq      uint64
	answered <-chan struct{}
	result   func() error
}

func send(t *testing.T, s *Store, project string, expectLast uint64, id string) sentEv {
	t.Helper()
	ev := heartbeat(id)
	ev.ProjectID = project
	seq, answered, result, err := s.AppendAsync(context.Background(), project, expectLast, ev)
	if err != nil {
		t.Fatalf("AppendAsync(%s after %d) = %v", project, expectLast, err)
	}
	return sentEv{seq, answered, result}
}

func (a sentEv) wait() error { <-a.answered; return a.result() }

// TestPipelinedAppendsGetTheLedgerSeqGuessed: the first append of a Store
// is answered before AppendAsync returns (the head is not known yet); the
// next ones are sent with the ledger_seq they get, one after another
// across projects, each expecting its project's last as decided, and are
// stored there.
func TestPipelinedAppendsGetTheLedgerSeqGuessed(t *testing.T) {
	_, s := openPipelined(t)
	first := send(t, s, "p1", 0, "a0")
	select {
	case <-first.answered:
	default:
		t.Fatal("the first append of a Store was not answered when AppendAsync returned")
	}
	if err := first.result(); err != nil {
		t.Fatal(err)
	}
	last := map[string]uint64{"p1": first.seq}
	var sent []sentEv
	for i := range 20 {
		p := []string{"p1", "p2"}[i%2]
		a := send(t, s, p, last[p], "a1")
		if want := first.seq + uint64(i) + 1; a.seq != want {
			t.Fatalf("append %d sent as ledger_seq %d, want %d", i, a.seq, want)
		}
		last[p] = a.seq
		sent = append(sent, a)
	}
	for i, a := range sent {
		if err := a.wait(); err != nil {
			t.Fatalf("append %d at %d = %v", i, a.seq, err)
		}
	}
	var got []uint64
	for _, p := range []string{"p1", "p2"} {
		if _, err := s.ReadProject(context.Background(), p, 0, func(r kernel.Recorded) error { got = append(got, r.Seq); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 21 || got[0] != first.seq {
		t.Errorf("the ledger holds %v, want the 21 ledger_seqs sent", got)
	}
}

// TestARefusedPipelinedAppendRefusesTheOnesAfterIt: an append refused (its
// project's expectation broken) stores nothing, nor does any append sent
// after it, whatever its project; the Store then appends in sequence until
// it knows the stream's head again, and pipelines after that.
func TestARefusedPipelinedAppendRefusesTheOnesAfterIt(t *testing.T) {
	_, s := openPipelined(t)
	first := send(t, s, "p1", 0, "a0")
	if err := first.wait(); err != nil {
		t.Fatal(err)
	}
	ok := send(t, s, "p1", first.seq, "a1")
	refused := send(t, s, "p1", first.seq, "a2") // decided on a state without ok's event
	after := send(t, s, "p2", 0, "a3")           // right about p2, wrong about the stream
	if err := ok.wait(); err != nil {
		t.Fatalf("the append before the refusal = %v, want stored", err)
	}
	for name, a := range map[string]sentEv{"refused": refused, "after": after} {
		if err := a.wait(); !errors.Is(err, ErrConflict) {
			t.Errorf("%s append = %v, want a conflict", name, err)
		}
	}
	if _, err := s.Event(context.Background(), refused.seq); err == nil {
		t.Errorf("ledger_seq %d holds an event after the refusal", refused.seq)
	}

	// In sequence (answered at once), then pipelined again.
	again := send(t, s, "p2", 0, "a4")
	select {
	case <-again.answered:
	default:
		t.Fatal("the append after a refusal was not answered in sequence")
	}
	if err := again.result(); err != nil || again.seq != ok.seq+1 {
		t.Fatalf("the append after the refusal = ledger_seq %d, %v; want %d", again.seq, err, ok.seq+1)
	}
	next := send(t, s, "p2", again.seq, "a5")
	if next.seq != again.seq+1 {
		t.Errorf("the next append sent as %d, want %d", next.seq, again.seq+1)
	}
	if err := next.wait(); err != nil {
		t.Fatal(err)
	}
	var got []string
	if _, err := s.ReadProject(context.Background(), "p2", 0, func(r kernel.Recorded) error { got = append(got, r.Event.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a4", "a5"}, got); diff != "" {
		t.Errorf("project p2 holds (-want +got):\n%s", diff)
	}
}

// TestASecondStoreOnTheStreamStopsThePipeline: two Stores writing one
// stream over two connections cannot guess each other's ledger_seqs, so the
// second turns the first one's pipeline off; a Store of a server that
// listens on a port (other processes may write) never pipelines.
func TestASecondStoreOnTheStreamStopsThePipeline(t *testing.T) {
	e, s := openPipelined(t)
	lcfg := DefaultConfig()
	lcfg.Storage = MemoryStorage
	_, s2, err := e.Open(context.Background(), lcfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pipelined() || s2.Pipelined() {
		t.Errorf("two Stores on one stream: pipelined %v, %v; want neither", s.Pipelined(), s2.Pipelined())
	}
	a := send(t, s, "p1", 0, "a0")
	b := send(t, s2, "p1", a.seq, "a1")
	for _, x := range []sentEv{a, b} {
		select {
		case <-x.answered:
		default:
			t.Error("an append of a Store that does not pipeline was not answered when AppendAsync returned")
		}
		if err := x.result(); err != nil {
			t.Error(err)
		}
	}

	cfg := DefaultEmbeddedConfig(t.TempDir())
	cfg.Port = -1 // a port the kernel hands out
	if s3 := openEmbedded(t, startEmbedded(t, cfg), lcfg); s3.Pipelined() {
		t.Error("a Store of a server listening on a port pipelines")
	}
}

// TestTheSoleWriterKnowsTheHead: a Store that is its stream's only writer
// answers the stream's head without asking once it has read it or had an
// append answered, and keeps it in step with its appends, in sequence and
// pipelined; the head it knows is the one the server reports. Once a second
// Store writes the stream, it no longer claims to know it.
func TestTheSoleWriterKnowsTheHead(t *testing.T) {
	ctx := context.Background()
	e, s := openPipelined(t)
	if h, ok := s.KnownHead(); ok {
		t.Fatalf("KnownHead before any read or append = %d, true; want false", h)
	}
	if h, err := s.Head(ctx); err != nil || h != 0 {
		t.Fatalf("Head of an empty stream = %d, %v", h, err)
	}
	if h, ok := s.KnownHead(); !ok || h != 0 {
		t.Fatalf("KnownHead after reading an empty stream's head = %d, %v; want 0, true", h, ok)
	}
	first := send(t, s, "p1", 0, "a0") // in sequence: the pipeline learns the head from it
	if err := first.wait(); err != nil {
		t.Fatal(err)
	}
	var last sentEv
	for i := range 5 {
		last = send(t, s, "p1", first.seq+uint64(i), "a"+string(rune('1'+i)))
	}
	if err := last.wait(); err != nil {
		t.Fatal(err)
	}
	got, ok := s.KnownHead()
	want, err := s.headOnServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || got != want || got != last.seq {
		t.Errorf("KnownHead after six appends = %d, %v; the server's head is %d, the last append's ledger_seq %d", got, ok, want, last.seq)
	}

	lcfg := DefaultConfig()
	lcfg.Storage = MemoryStorage
	_, s2, err := e.Open(ctx, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Append(ctx, "p1", last.seq, heartbeat("b0")); err != nil {
		t.Fatal(err)
	}
	if h, ok := s.KnownHead(); ok {
		t.Errorf("KnownHead once a second Store writes the stream = %d, true; want false", h)
	}
}

// headOnServer is the stream's last ledger_seq as the server reports it.
func (s *Store) headOnServer(ctx context.Context) (uint64, error) {
	info, err := s.info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}
