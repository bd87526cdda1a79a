package projection

import (
	"sync"

	"github.com/turnledger/turnledger/kernel"
)

// Watches: long-poll claims and push feeds wait on a notification raised
// when Apply commits a batch, never on a polling loop.
//
// A watch is a channel closed at the first commit after the watch was taken
// that changes what it watches, or when the store closes. Take the watch,
// then read, then wait on the channel: a commit between the read and the
// wait has already closed it, so no change is missed. A channel is made only
// while someone waits on its key and dropped at the commit that closes it
// (or when its last watcher stops), so idle waiters cost no CPU and no
// memory beyond the channel, and a commit nobody watches costs one map look-up.
//
// What wakes what:
//   - a project watch: any event of the project;
//   - an agent watch: an event of the agent itself (registration, drain,
//     resume, …) and the events of a Turn it is the target of that can
//     make a Turn claimable for it or free some of its capacity: dispatched,
//     resumed, suspended, finished, stopped, claim expired. (Claims,
//     renewals, records and stop requests cannot, and are the most
//     frequent: they cost no look-up.)

// notifier holds the channels of the keys being watched.
type notifier struct {
	mu     sync.Mutex
	chans  map[string]*watch
	agents int // watches of agent keys, to skip the Turn look-ups when none
	closed bool
}

type watch struct {
	ch    chan struct{}
	n     int // watchers still waiting on ch
	agent bool
}

// closedCh is returned by a watch taken after the store closed.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func projectWatchKey(project string) string { return string(key(project)) }

func agentWatchKey(project, agent string) string { return string(key(project, agent)) + "a" }

// watching reports whether anyone waits on a watch.
func (n *notifier) watching() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.chans) > 0
}

func (n *notifier) watch(k string, agent bool) (<-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return closedCh, func() {}
	}
	if n.chans == nil {
		n.chans = map[string]*watch{}
	}
	w := n.chans[k]
	if w == nil {
		w = &watch{ch: make(chan struct{}), agent: agent}
		n.chans[k] = w
		if agent {
			n.agents++
		}
	}
	w.n++
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			w.n--
			if w.n == 0 && n.chans[k] == w {
				n.drop(k, w)
			}
		})
	}
}

// drop removes a watch from the map (the lock held).
func (n *notifier) drop(k string, w *watch) {
	delete(n.chans, k)
	if w.agent {
		n.agents--
	}
}

// raise closes the channels of every key a committed batch changed. Turn
// events are mapped to their target agent by reading the committed Turn
// (Store.Turn, once per Turn of the batch), only when some agent is being
// watched.
func (n *notifier) raise(s *Store, batch []kernel.Recorded) {
	n.mu.Lock()
	if len(n.chans) == 0 {
		n.mu.Unlock()
		return
	}
	wantAgents := n.agents > 0
	n.mu.Unlock()

	keys := map[string]bool{}
	seen := map[[2]string]bool{}
	for _, r := range batch {
		e := r.Event
		keys[projectWatchKey(e.ProjectID)] = true
		if !wantAgents {
			continue
		}
		switch e.Aggregate {
		case kernel.AggAgent:
			keys[agentWatchKey(e.ProjectID, e.ID)] = true
		case kernel.AggTurn:
			if !kernel.FreesWork(e.Type) {
				continue
			}
			t := [2]string{e.ProjectID, e.ID}
			if seen[t] {
				continue
			}
			seen[t] = true
			if v, err := s.Turn(t[0], t[1]); err == nil && v.TargetAgent.AgentID != "" {
				keys[agentWatchKey(t[0], v.TargetAgent.AgentID)] = true
			}
		}
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	for k := range keys {
		if w := n.chans[k]; w != nil {
			close(w.ch)
			n.drop(k, w)
		}
	}
}

// close wakes every watch and makes later ones return at once.
func (n *notifier) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	for k, w := range n.chans {
		close(w.ch)
		n.drop(k, w)
	}
}

// WatchProject returns a channel closed at the next commit of a batch with
// an event of the project (once that batch is readable), or when the store
// closes; call stop when done waiting. Take the watch before reading, so
// that a commit after the read is not missed.
func (s *Store) WatchProject(project string) (changed <-chan struct{}, stop func()) {
	return s.notes.watch(projectWatchKey(project), false)
}

// WatchAgent returns a channel closed at the next commit of a batch with an
// event of the agent or of a Turn it is the target of (so a Turn may have
// become claimable for it, or a claim of its own ended), or when the store
// closes; call stop when done waiting.
func (s *Store) WatchAgent(project, agent string) (changed <-chan struct{}, stop func()) {
	return s.notes.watch(agentWatchKey(project, agent), true)
}

// Closed reports whether the store is closed: a watch woken by Close should
// not wait again.
func (s *Store) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
