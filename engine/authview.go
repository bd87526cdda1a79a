package engine

import (
	"sync/atomic"

	"github.com/turnledger/turnledger/kernel"
)

// authView is what Authenticate reads of a project, published by the
// engine after every change of the project's state, so that authentication
// takes no lock: it is not queued behind the project's appends.
//
// The view is a Project holding copies of the credentials and agents (all
// Authenticate looks at); it is replaced only when an event changed agents
// or credentials. folded is the ledger_seq the view is current for at least:
// the engine stores the view first and folded second, so a reader that
// loads folded and then the view gets a view as of folded or later.
type authView struct {
	p       *kernel.Project
	changes uint64 // Project.authChanges when the view was made
}

type authState struct {
	folded atomic.Uint64
	view   atomic.Pointer[authView]
}

// publish makes the view current for p (the project's write lock held).
func (a *authState) publish(p *kernel.Project) {
	if v := a.view.Load(); v == nil || v.changes != p.AuthChanges() {
		q := &kernel.Project{ID: p.ID, Seq: p.Seq, Agents: make(map[string]*kernel.Agent, len(p.Agents)), Credentials: make(map[string]*kernel.Credential, len(p.Credentials))}
		for id, ag := range p.Agents {
			c := *ag
			q.Agents[id] = &c
		}
		for id, cr := range p.Credentials {
			c := *cr
			q.Credentials[id] = &c
		}
		a.view.Store(&authView{p: q, changes: p.AuthChanges()})
	}
	a.folded.Store(p.Seq)
}

// current returns the view if it holds every event up to ledger_seq last.
func (a *authState) current(last uint64) (*kernel.Project, bool) {
	f := a.folded.Load()
	if f == 0 || f < last {
		return nil, false
	}
	v := a.view.Load()
	if v == nil {
		return nil, false
	}
	return v.p, true
}
