package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/checkfor"
)

// A call that arrives while a look-up is in flight gets the answer of a
// look-up that started after it: an event written before the call is never
// missed, however the look-ups are shared.
func TestLastSeqProbeNeverAnswersFromAnEarlierLookUp(t *testing.T) {
	var (
		q       lastSeqProbe
		head    atomic.Uint64 // the "ledger's" last ledger_seq
		fetches atomic.Int32
		release = make(chan struct{})
	)
	head.Store(1)
	fetch := func(context.Context) (uint64, error) {
		n := fetches.Add(1)
		v := head.Load()
		if n == 1 {
			<-release // the first look-up has read 1 and is still in flight
		}
		return v, nil
	}
	q.fetch = fetch
	first := make(chan uint64)
	go func() {
		v, _ := q.get(context.Background())
		first <- v
	}()
	checkfor.Until(t, 5*time.Second, "the first look-up to start", func() bool { return fetches.Load() == 1 })

	head.Store(2) // an event acknowledged before the next calls arrive
	var wg sync.WaitGroup
	got := make([]uint64, 3)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = q.get(context.Background())
		}()
	}
	checkfor.Until(t, 5*time.Second, "a look-up to be queued", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.next != nil
	})
	close(release)
	wg.Wait()
	if v := <-first; v != 1 {
		t.Errorf("first call = %d, want 1", v)
	}
	for i, v := range got {
		if v != 2 {
			t.Errorf("call %d after the write = %d, want 2", i, v)
		}
	}
	if n := fetches.Load(); n < 2 || n > 4 {
		t.Errorf("look-ups = %d, want 2 to 4", n)
	}
}

// The request whose call runs a shared look-up may go away; the others still
// get the answer.
func TestLastSeqProbeOutlivesTheCallerThatRunsIt(t *testing.T) {
	var q lastSeqProbe
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	fetch := func(ctx context.Context) (uint64, error) {
		started <- struct{}{}
		<-release
		return 7, ctx.Err()
	}
	q.fetch = fetch
	go q.get(context.Background()) // in flight: the next call queues behind it
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error)
	go func() { // queues the next look-up, run on its behalf
		_, err := q.get(ctx)
		gone <- err
	}()
	checkfor.Until(t, 5*time.Second, "a look-up to be queued", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.next != nil
	})
	other := make(chan uint64)
	go func() {
		v, err := q.get(context.Background())
		if err != nil {
			t.Errorf("get = %v", err)
		}
		other <- v
	}()
	cancel()
	if err := <-gone; err == nil {
		t.Errorf("get with a cancelled context = nil error, want one")
	}
	close(release)
	if v := <-other; v != 7 {
		t.Errorf("get = %d, want 7", v)
	}
}

// A command that took the project's lock after a request arrived and
// appended answers the request (the ledger took its append on the condition
// of the project's last ledger_seq, so nothing acknowledged before is
// above it), without the request waiting for a probe; one numbered before
// the request arrived does not.
func TestLastSeqProbeTakesTheAnswerOfALaterAppend(t *testing.T) {
	var q lastSeqProbe
	release := make(chan struct{})
	var fetches atomic.Int32
	fetch := func(context.Context) (uint64, error) {
		fetches.Add(1)
		<-release // every probe hangs until the end of the test
		return 1, nil
	}
	q.fetch = fetch
	defer close(release)
	early := q.appending() // a command that took the lock before the requests arrive

	first := make(chan uint64, 1)
	go func() { // runs the first probe, which hangs
		v, _ := q.get(context.Background())
		first <- v
	}()
	checkfor.Until(t, 5*time.Second, "the first probe to start", func() bool { return fetches.Load() == 1 })
	second := make(chan uint64, 1)
	go func() { // arrives while the probe is in flight: waits for the next look-up
		v, _ := q.get(context.Background())
		second <- v
	}()
	checkfor.Until(t, 5*time.Second, "the second request to wait", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.next != nil
	})

	q.appended(early, 5) // started before both: answers neither
	select {
	case v := <-first:
		t.Fatalf("first request answered %d by an append that started before it", v)
	case v := <-second:
		t.Fatalf("second request answered %d by an append that started before it", v)
	case <-time.After(50 * time.Millisecond):
	}

	later := q.appending()
	q.appended(later, 9) // started after both arrived
	for name, ch := range map[string]chan uint64{"first": first, "second": second} {
		select {
		case v := <-ch:
			if v != 9 {
				t.Errorf("%s request = %d, want 9 from the later append", name, v)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s request still waits for its probe after a later append", name)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("probes = %d, want only the first (the append answered the second request)", n)
	}
}

// While a command of the project holds or waits for its lock, a request
// does not start a probe: the command's append answers it. A command that
// leaves without appending starts the probe, even while another command is
// still there, so a stream of commands that append nothing never leaves a
// request waiting.
func TestLastSeqProbeLeavesTheAnswerToTheProjectsCommands(t *testing.T) {
	var q lastSeqProbe
	var fetches atomic.Int32
	fetch := func(context.Context) (uint64, error) {
		fetches.Add(1)
		return 4, nil
	}
	q.fetch = fetch
	ask := func() chan uint64 {
		ch := make(chan uint64, 1)
		go func() {
			v, _ := q.get(context.Background())
			ch <- v
		}()
		checkfor.Until(t, 5*time.Second, "the request to wait", func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return q.next != nil || len(ch) > 0
		})
		return ch
	}
	want := func(ch chan uint64, v uint64, why string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != v {
				t.Errorf("%s: request = %d, want %d", why, got, v)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the request still waits", why)
		}
	}

	// A command appends after the request arrived: its answer, no probe.
	q.writing()
	ch := ask()
	k := q.appending()
	q.appended(k, 9)
	q.written(true)
	want(ch, 9, "a command appended after it arrived")
	if n := fetches.Load(); n != 0 {
		t.Errorf("probes = %d while a command was there to answer, want 0", n)
	}

	// Two commands; the first appends nothing: it starts the probe.
	q.writing()
	q.writing()
	ch = ask()
	q.written(false)
	want(ch, 4, "a command left without appending")
	if n := fetches.Load(); n != 1 {
		t.Errorf("probes = %d, want 1", n)
	}
	q.written(true)

	// The last command leaves, having appended before the request arrived:
	// the probe starts then.
	q.writing()
	k = q.appending()
	ch = ask()
	q.appended(k, 7) // started before the request: not its answer
	q.written(true)
	want(ch, 4, "the last command left")
}
