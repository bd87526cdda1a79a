package kernel

import "sort"

// FinishedTurns keeps the finished Turns of a project. A finished Turn is
// most of a long ledger's write model; it never changes again (a later event
// of it is folded like any other and put back) and decisions read little of
// it: its state and outcome, its dispatch's parties, keys, depth and root,
// its attempts and last turn_seq. So a store may keep only that, compactly:
// the engine's packs it into bytes (engine/packed.go). Get returns a copy;
// changing it changes nothing until it is Put back.
type FinishedTurns interface {
	Get(id string) *Turn
	Put(t *Turn)
	Len() int
	// Each calls fn with every Turn the store keeps, in no order.
	Each(fn func(t *Turn))
}

// finishedMap keeps finished Turns as they are: the store of a Project that
// was given none.
type finishedMap map[string]*Turn

func (m finishedMap) Get(id string) *Turn {
	if t, ok := m[id]; ok {
		c := *t
		return &c
	}
	return nil
}
func (m finishedMap) Put(t *Turn) { c := *t; m[t.ID] = &c }
func (m finishedMap) Len() int    { return len(m) }
func (m finishedMap) Each(fn func(t *Turn)) {
	for _, t := range m {
		fn(t)
	}
}

// Turn returns the project's Turn with the id, or nil. A finished Turn comes
// back from the store as a copy: changing it changes nothing.
func (p *Project) Turn(id string) *Turn {
	if t := p.Turns[id]; t != nil {
		return t
	}
	if p.Finished != nil {
		return p.Finished.Get(id)
	}
	return nil
}

// TurnIDs returns the ids of every Turn of the project, finished or not, in
// order of dispatch.
func (p *Project) TurnIDs() []string {
	type idOrder struct {
		id    string
		order uint64
	}
	all := make([]idOrder, 0, len(p.Turns))
	for id, t := range p.Turns {
		all = append(all, idOrder{id, t.Order})
	}
	if p.Finished != nil {
		p.Finished.Each(func(t *Turn) { all = append(all, idOrder{t.ID, t.Order}) })
	}
	sort.Slice(all, func(i, j int) bool { return all[i].order < all[j].order })
	ids := make([]string, len(all))
	for i, x := range all {
		ids[i] = x.id
	}
	return ids
}

// keep stores t where it belongs: in the store of finished Turns once it is
// finished, else in Turns. A store that finds finished Turns by their
// dispatch keys takes t's key out of DispatchKeys.
func (p *Project) keep(t *Turn) {
	if t.State == StateFinished {
		delete(p.Turns, t.ID)
		if p.Finished == nil {
			p.Finished = finishedMap{}
		}
		p.Finished.Put(t)
		if _, finds := p.Finished.(DispatchKeyFinder); finds && t.Dispatch.DispatchKey != "" {
			k := DispatchKeyOf(t.Dispatch.RequestedBy.AgentID, t.Dispatch.DispatchKey)
			if p.DispatchKeys[k] == t.ID {
				delete(p.DispatchKeys, k)
			}
		}
		return
	}
	p.Turns[t.ID] = t
}

// DispatchKeyFinder is a store of finished Turns that also finds them by
// their dispatch keys, so that the project keeps in DispatchKeys only the
// keys of the Turns not finished (a key and a Turn id for each of a long
// ledger's finished Turns would be as large as the Turns packed).
type DispatchKeyFinder interface {
	// Dispatched returns the id and the dispatch's ledger_seq (Turn.Order)
	// of the finished Turn the requester dispatched with the dispatch key,
	// the last one dispatched when there are several.
	Dispatched(requester, dispatchKey string) (id string, order uint64, ok bool)
}

// DispatchedAs returns the Turn the requester dispatched with the dispatch
// key (the last one dispatched, should there be several), finished or not.
func (p *Project) DispatchedAs(requester, dispatchKey string) (string, bool) {
	id, ok := p.DispatchKeys[DispatchKeyOf(requester, dispatchKey)]
	if f, finds := p.Finished.(DispatchKeyFinder); finds {
		if done, order, found := f.Dispatched(requester, dispatchKey); found {
			if t := p.Turns[id]; !ok || t == nil || order > t.Order {
				return done, true
			}
		}
	}
	return id, ok
}
