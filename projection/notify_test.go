package projection

import (
	"testing"

	"github.com/turnledger/turnledger/kernel"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWatchWakesOnCommit: a commit closes the watches of what it changed,
// and only those.
func TestWatchWakesOnCommit(t *testing.T) {
	s, _ := openStore(t)
	l := newEvents()
	mustApply(t, s, []kernel.Recorded{l.register("a", "worker", 2, "sum"), l.register("b", "worker", 2, "sum")})

	agentA, stopA := s.WatchAgent(proj, "a")
	defer stopA()
	agentB, stopB := s.WatchAgent(proj, "b")
	defer stopB()
	project, stopP := s.WatchProject(proj)
	defer stopP()
	other, stopO := s.WatchProject("other")
	defer stopO()

	// A Turn for a, dispatched by b: wakes a (the target) and the project,
	// not b (only the requester) nor another project.
	mustApply(t, s, []kernel.Recorded{l.dispatch("t1", "a", "b", "sum")})
	if !isClosed(agentA) || !isClosed(project) {
		t.Errorf("after dispatch to a: agent a woken %v, project woken %v; want both", isClosed(agentA), isClosed(project))
	}
	if isClosed(agentB) || isClosed(other) {
		t.Errorf("after dispatch to a: agent b woken %v, other project woken %v; want neither", isClosed(agentB), isClosed(other))
	}

	// A claim and a record of a's Turn free nothing: no wake-up. Its
	// finish frees capacity: a is woken.
	agentA2, stopA2 := s.WatchAgent(proj, "a")
	defer stopA2()
	mustApply(t, s, []kernel.Recorded{l.claim("t1", "a", "c1"), l.record("t1", "a", "c1", 1, "note", `{}`)})
	if isClosed(agentA2) {
		t.Error("a claim and a record of a's Turn woke a")
	}
	mustApply(t, s, []kernel.Recorded{l.finish("t1", "a", "c1", "succeeded", "", 1)})
	if !isClosed(agentA2) {
		t.Error("the finish of a's Turn did not wake a")
	}

	// An agent event wakes that agent.
	mustApply(t, s, []kernel.Recorded{l.add(kernel.EvAgentDrained, proj, kernel.AggAgent, "b", admin(), &kernel.AgentDrained{})})
	if !isClosed(agentB) {
		t.Error("an event of agent b did not wake b")
	}

	// Re-applying events at or below the checkpoint is a no-op, yet an extra
	// wake-up is harmless; what matters is that stop drops the channel.
	stopO()
	if n := len(s.notes.chans); n != 0 {
		t.Errorf("after every watcher stopped or was woken, %d channels are kept, want 0", n)
	}
}

// TestWatchClose: closing the store wakes every watch, and a watch taken
// after it returns at once.
func TestWatchClose(t *testing.T) {
	s, _ := openStore(t)
	w, stop := s.WatchAgent(proj, "a")
	defer stop()
	s.Close()
	if !isClosed(w) {
		t.Error("Close did not wake a watch")
	}
	if w2, stop2 := s.WatchProject(proj); !isClosed(w2) {
		t.Error("a watch taken after Close is not closed")
	} else {
		stop2()
	}
	if !s.Closed() {
		t.Error("Closed() = false after Close")
	}
}
