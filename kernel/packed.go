package kernel

import "sort"

// Finished Turns are packed.
//
// A finished Turn is most of a long ledger's write model and never changes
// again, and decisions read little of it: its state, its dispatch's parties,
// keys and root, its last turn_seq. Once slim (snapshot.go) it is kept as
// the bytes of the snapshot's binary part (snapbin.go), about 250 B instead
// of a Turn's 650 B of heap, and unpacked into a fresh Turn when a decision
// asks for it. Project.Turns holds the Turns not finished (and a finished
// one that is not exactly slim); Project.Turn finds either.

// Turn returns the project's Turn with the id, or nil. A finished Turn comes
// back unpacked, as a copy: changing it changes nothing.
func (p *Project) Turn(id string) *Turn {
	if t := p.Turns[id]; t != nil {
		return t
	}
	if b, ok := p.done[id]; ok {
		return p.unpack(b)
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
	all := make([]idOrder, 0, len(p.Turns)+len(p.done))
	for id, t := range p.Turns {
		all = append(all, idOrder{id, t.Order})
	}
	for id, b := range p.done {
		all = append(all, idOrder{id, p.unpack(b).Order})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].order < all[j].order })
	ids := make([]string, len(all))
	for i, x := range all {
		ids[i] = x.id
	}
	return ids
}

func (p *Project) unpack(b []byte) *Turn {
	r := slimReader{b: b}
	t := r.turn(p)
	if r.err != nil {
		return nil
	}
	return t
}

// keep stores t where it belongs: packed when it is finished and slim,
// else as it is.
func (p *Project) keep(t *Turn) {
	if slimShaped(t) {
		delete(p.Turns, t.ID)
		if p.done == nil {
			p.done = map[string][]byte{}
		}
		p.done[t.ID] = appendSlim(nil, t)
		return
	}
	delete(p.done, t.ID)
	p.Turns[t.ID] = t
}
