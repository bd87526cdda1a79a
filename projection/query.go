package projection

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/turnledger/turnledger/kernel"
)

// pageBudget counts the stored bytes of a page's items against
// Config.MaxPageBytes.
type pageBudget struct{ max, used, items int }

func (s *Store) pageBudget() pageBudget { return pageBudget{max: s.cfg.MaxPageBytes} }

// full reports whether an item of n bytes no longer fits; otherwise it
// counts it. The first item always fits, so that no cursor can get stuck.
func (b *pageBudget) full(n int) bool {
	if b.items > 0 && b.used+n > b.max {
		return true
	}
	b.used += n
	b.items++
	return false
}

func clampLimit(limit int) int {
	return min(max(limit, 1), MaxLimit)
}

// Turn returns the snapshot of a Turn, or ErrNotFound.
func (s *Store) Turn(project, turnID string) (TurnView, error) {
	var v TurnView
	err := s.view(func(tx *bolt.Tx) error {
		rec, err := loadTurn(tx.Bucket(bktTurns), project, turnID)
		v = rec.View
		return retiredOr(tx, project, turnID, err)
	})
	return v, err
}

func loadTurn(b *bolt.Bucket, project, turnID string) (turnRecord, error) {
	rec, _, err := loadTurnSized(b, project, turnID)
	return rec, err
}

// loadTurnSized is loadTurn that also returns the stored size of the Turn's
// row, which is what a page's byte budget counts.
func loadTurnSized(b *bolt.Bucket, project, turnID string) (turnRecord, int, error) {
	var rec turnRecord
	row := b.Get(key(project, turnID))
	err := ErrNotFound
	if row != nil {
		err = json.Unmarshal(row, &rec)
	}
	rec.View = ViewOf(project, &rec.Turn)
	return rec, len(row), err
}

// Context returns the semantic records of a Turn after turn_seq
// afterTurnSeq, in turn_seq order, at most limit of them. ErrNotFound when
// the Turn is unknown.
func (s *Store) Context(project, turnID string, afterTurnSeq uint64, limit int) (ContextPage, error) {
	limit = clampLimit(limit)
	page := ContextPage{Items: []ContextItem{}, NextAfterTurnSeq: afterTurnSeq}
	err := s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bktTurns).Get(key(project, turnID)) == nil {
			return retiredOr(tx, project, turnID, ErrNotFound)
		}
		if afterTurnSeq == ^uint64(0) {
			return nil
		}
		prefix := key(project, turnID)
		c := tx.Bucket(bktContext).Cursor()
		budget := s.pageBudget()
		for k, v := c.Seek(seqKey(afterTurnSeq+1, project, turnID)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(page.Items) == limit || budget.full(len(v)) {
				page.HasMore = true
				break
			}
			var it ContextItem
			if err := json.Unmarshal(v, &it); err != nil {
				return err
			}
			page.Items = append(page.Items, it)
			page.NextAfterTurnSeq = it.TurnSeq
		}
		return nil
	})
	return page, err
}

// Turns lists the Turns of a project that match f, oldest dispatch first, at
// most limit of them.
func (s *Store) Turns(project string, f TurnFilter, limit int) ([]TurnView, error) {
	pg, err := s.TurnsPage(project, f, limit)
	return pg.Items, err
}

// TurnsPage lists the Turns that match f in dispatch order (newest first
// with f.NewestFirst), after the cursor f.AfterSeq. The index chosen (target agent, visibility, state, or all) is
// walked from the cursor; other filters are applied while walking, and the
// walk stops after examining scanBudget(limit) Turns, so a page costs
// O(limit) however many Turns a filter skips. It also stops before a
// matching Turn whose stored row would take the page past
// Config.MaxPageBytes (inputs and final payloads can be large), so that the
// next page starts with it. A page can then hold fewer items than the limit
// with HasMore set: follow NextAfterSeq.
func (s *Store) TurnsPage(project string, f TurnFilter, limit int) (TurnsPage, error) {
	limit = clampLimit(limit)
	pg := TurnsPage{Items: []TurnView{}, NextAfterSeq: f.AfterSeq}
	err := s.view(func(tx *bolt.Tx) error {
		turns := tx.Bucket(bktTurns)
		var c *bolt.Cursor
		var prefix []byte
		switch {
		case len(f.Tags) > 0:
			// The first tag's index: the walk never meets a Turn without it.
			c, prefix = tx.Bucket(bktByTag).Cursor(), key(project, f.Tags[0])
		case f.TargetAgentID != "":
			c, prefix = tx.Bucket(bktByTarget).Cursor(), key(project, f.TargetAgentID)
		case f.VisibleTo != "":
			c, prefix = tx.Bucket(bktByAgent).Cursor(), key(project, f.VisibleTo)
		case f.State != "":
			c, prefix = tx.Bucket(bktByState).Cursor(), key(project, f.State)
		default:
			c, prefix = tx.Bucket(bktByDispatch).Cursor(), key(project)
		}
		var k, id []byte
		next := c.Next
		switch {
		case f.NewestFirst:
			// Back from the first key at or past the bound: the Turns
			// dispatched before the cursor, or the newest of all.
			bound := f.AfterSeq
			if bound == 0 {
				bound = ^uint64(0)
			}
			if k, _ = c.Seek(appendSeq(append([]byte(nil), prefix...), bound)); k == nil {
				k, id = c.Last()
			} else {
				k, id = c.Prev()
			}
			next = c.Prev
		case f.AfterSeq == ^uint64(0):
			return nil
		case f.AfterSeq > 0:
			k, id = c.Seek(appendSeq(append([]byte(nil), prefix...), f.AfterSeq+1))
		default:
			k, id = c.Seek(prefix)
		}
		scan, pageBytes := scanBudget(limit), s.pageBudget()
		for ; k != nil && bytes.HasPrefix(k, prefix); k, id = next() {
			if len(pg.Items) == limit || scan == 0 {
				pg.HasMore = true
				return nil
			}
			scan--
			rec, size, err := loadTurnSized(turns, project, string(id))
			if err != nil {
				return err
			}
			if f.match(rec) {
				if pageBytes.full(size) {
					pg.HasMore = true // the cursor stays before this Turn
					return nil
				}
				pg.Items = append(pg.Items, rec.View)
			}
			pg.NextAfterSeq = tailSeq(k)
		}
		return nil
	})
	return pg, err
}

// TurnIDs returns the ids of the project's Turns that begin with prefix,
// newest dispatch first, at most limit of them (clamped as a page's limit);
// with visibleTo set, only the Turns that agent may read (the index by
// reader, as TurnsPage's VisibleTo). It reads the index, never a Turn's
// row, and examines at most
// idScanBudget entries of it: more reports that it stopped before the
// index's end, so that other Turns may match. What a completion of a Turn
// id offers (mcpapi).
func (s *Store) TurnIDs(project, visibleTo, prefix string, limit int) (ids []string, more bool, err error) {
	limit = clampLimit(limit)
	ids = []string{}
	err = s.view(func(tx *bolt.Tx) error {
		b, from := tx.Bucket(bktByDispatch), key(project)
		if visibleTo != "" {
			b, from = tx.Bucket(bktByAgent), key(project, visibleTo)
		}
		c, want := b.Cursor(), []byte(prefix)
		// Back from the first key past the index's part: the newest first.
		k, id := c.Seek(appendSeq(append([]byte(nil), from...), ^uint64(0)))
		if k == nil {
			k, id = c.Last()
		} else {
			k, id = c.Prev()
		}
		for scan := idScanBudget; k != nil && bytes.HasPrefix(k, from); k, id = c.Prev() {
			if len(ids) == limit || scan == 0 {
				more = true
				return nil
			}
			scan--
			if bytes.HasPrefix(id, want) {
				ids = append(ids, string(id))
			}
		}
		return nil
	})
	return ids, more, err
}

// idScanBudget is how many index entries TurnIDs examines at most: keys
// only, no row is read, so a walk of this many costs about a millisecond.
const idScanBudget = 10_000

// scanBudget is how many Turns a page examines at most.
func scanBudget(limit int) int { return 10*limit + 100 }

func (f TurnFilter) match(rec turnRecord) bool {
	v := rec.View
	switch {
	case f.TargetAgentID != "" && v.TargetAgent.AgentID != f.TargetAgentID,
		f.TurnKind != "" && v.TurnKind != f.TurnKind,
		f.State != "" && v.State != f.State,
		f.Outcome != "" && (v.Outcome == nil || *v.Outcome != f.Outcome),
		f.StopRequestedOnly && !v.StopRequested,
		f.Priority != 0 && v.Priority != f.Priority,
		f.AwaitingInputOnly && v.AwaitingInput == nil,
		!hasTags(v.Tags, f.Tags),
		f.ContextID != "" && (v.ContextID == nil || *v.ContextID != f.ContextID),
		!visible(rec, f.VisibleTo):
		return false
	}
	return true
}

// Lineage returns the ancestors of a Turn from its root down, the Turn
// itself, then its descendants breadth first in dispatch order, at most limit
// items. ErrNotFound when the Turn is unknown. With visibleTo set, only the
// Turns that agent may read (kernel.TurnReaders, as for the Turn list) are
// listed; the walk still goes through the others, so a Turn the agent may
// read under one it may not is listed.
func (s *Store) Lineage(project, turnID string, limit int, visibleTo string) ([]LineageItem, error) {
	limit = clampLimit(limit)
	out := []LineageItem{}
	err := s.view(func(tx *bolt.Tx) error {
		turns := tx.Bucket(bktTurns)
		self, err := loadTurn(turns, project, turnID)
		if err != nil {
			return retiredOr(tx, project, turnID, err)
		}
		var ancestors []LineageItem
		seen := map[string]bool{turnID: true}
		for cur := self.View; cur.Parent != nil && !seen[cur.Parent.TurnID]; {
			seen[cur.Parent.TurnID] = true
			rec, err := loadTurn(turns, project, cur.Parent.TurnID)
			if errors.Is(err, ErrNotFound) {
				break
			} else if err != nil {
				return err
			}
			if visible(rec, visibleTo) {
				ancestors = append(ancestors, lineageItem(rec.View, RelationAncestor))
			}
			cur = rec.View
		}
		slices.Reverse(ancestors)
		out = append(out, ancestors...)
		out = append(out, lineageItem(self.View, RelationSelf))
		c := tx.Bucket(bktChildren).Cursor()
		budget := scanBudget(limit) // descendants examined at most, listed or not
		for queue := []string{turnID}; len(queue) > 0 && len(out) < limit && budget > 0; queue = queue[1:] {
			prefix := key(project, queue[0])
			for k, id := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit && budget > 0; k, id = c.Next() {
				budget--
				child := string(id)
				if seen[child] {
					continue
				}
				seen[child] = true
				rec, err := loadTurn(turns, project, child)
				if err != nil {
					return err
				}
				if visible(rec, visibleTo) {
					out = append(out, lineageItem(rec.View, RelationDescendant))
				}
				queue = append(queue, child)
			}
		}
		return nil
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// visible reports whether the agent visibleTo may read the Turn of rec ("":
// any caller the route already let through).
func visible(rec turnRecord, visibleTo string) bool {
	return visibleTo == "" || slices.Contains(rec.Readers, visibleTo)
}

func lineageItem(v TurnView, rel string) LineageItem {
	it := LineageItem{TurnID: v.TurnID, Depth: v.Depth, Relation: rel, State: v.State, Outcome: v.Outcome, TurnKind: v.TurnKind, TargetAgent: v.TargetAgent}
	if v.Parent != nil {
		it.ParentTurnID = ptr(v.Parent.TurnID)
	}
	return it
}

// ProjectFeed returns the events of a project after ledger_seq after, at
// most limit of them.
func (s *Store) ProjectFeed(project string, after uint64, limit int) (FeedPage, error) {
	return s.decodedFeed(FeedOfProject, project, "", after, limit)
}

// TurnFeed returns the events of one Turn after ledger_seq after.
// ErrNotFound when the Turn is unknown.
func (s *Store) TurnFeed(project, turnID string, after uint64, limit int) (FeedPage, error) {
	return s.decodedFeed(FeedOfTurn, project, turnID, after, limit)
}

// AgentFeed returns the events that concern an agent after ledger_seq after:
// its agent events, its credential and invite events, and the events of the
// Turns it is the target or the requester of. ErrNotFound when the agent is
// not registered.
func (s *Store) AgentFeed(project, agentID string, after uint64, limit int) (FeedPage, error) {
	return s.decodedFeed(FeedOfAgent, project, agentID, after, limit)
}

// FeedKind names one of the three feeds: a project's, a Turn's, an agent's.
type FeedKind int

const (
	FeedOfProject FeedKind = iota // every event of the project (id unused)
	FeedOfTurn                    // the events of the Turn id
	FeedOfAgent                   // the events that concern the agent id
)

// RawFeedPage is a page of a feed with its items as stored: each the JSON
// of a FeedItem, byte for byte what json.Marshal gives for the item the
// feed methods decode (TestRawFeedIsTheEncodedFeed). A page served over
// HTTP is written from it without decoding and encoding every item again.
type RawFeedPage struct {
	Items              []json.RawMessage
	NextAfterLedgerSeq uint64
	HasMore            bool
	// Joined is the items one after the other with a comma between two, the
	// inside of the JSON array of them: Items are slices of it. A page is
	// written to a connection in one piece from it.
	Joined []byte
}

// Release hands the page's buffer back for a later page to reuse: after it,
// neither Items nor Joined may be used. Not calling it is fine (the buffer
// is then left to the garbage collector).
func (p *RawFeedPage) Release() {
	if cap(p.Joined) > 0 && cap(p.Joined) <= maxPooledPage {
		b := p.Joined[:0]
		feedBufs.Put(&b)
	}
	p.Items, p.Joined = nil, nil
}

// feedBufs keeps the buffers of released pages. A page of 100 events is
// tens of KiB, the largest allocation of a feed read: without reuse, a
// reader following the feed makes the garbage collector run every few
// thousand pages, and each run slows the pages read meanwhile.
var feedBufs sync.Pool

// maxPooledPage is the largest buffer kept for reuse: pages of large events
// (up to Config.MaxPageBytes) are left to the garbage collector rather
// than held.
const maxPooledPage = 512 << 10

// feedItemStart is how every stored feed item begins (json.Marshal of a
// FeedItem, whose first field is LedgerSeq).
var feedItemStart = []byte(`{"ledger_seq":`)

// RawFeed is ProjectFeed, TurnFeed or AgentFeed (kind, with id the Turn or
// the agent) with the items left as stored. The items share one buffer of
// their own (never the file's pages), which Release hands back.
func (s *Store) RawFeed(kind FeedKind, project, id string, after uint64, limit int) (RawFeedPage, error) {
	var buf []byte
	if b, ok := feedBufs.Get().(*[]byte); ok {
		buf = *b
	}
	ends := make([]int, 0, clampLimit(limit))
	next, more, err := s.scanFeed(kind, project, id, after, limit, func(seq uint64, v []byte) error {
		// The shape of every stored item (feedItem), checked for the price
		// of a look at both ends: what is not one is never sent on.
		if !bytes.HasPrefix(v, feedItemStart) || v[len(v)-1] != '}' {
			return fmt.Errorf("projection: the stored feed item at ledger_seq %d is not a feed item", seq)
		}
		if buf == nil { // room for a page of items of this one's size
			buf = make([]byte, 0, min((len(v)+1)*clampLimit(limit), s.cfg.MaxPageBytes+len(v)))
		}
		if len(ends) > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, v...)
		ends = append(ends, len(buf))
		return nil
	})
	page := RawFeedPage{Items: make([]json.RawMessage, 0, len(ends)), NextAfterLedgerSeq: next, HasMore: more, Joined: buf}
	for i, end := range ends {
		begin := 0
		if i > 0 {
			begin = ends[i-1] + 1 // after the comma
		}
		page.Items = append(page.Items, buf[begin:end:end])
	}
	return page, err
}

func (s *Store) decodedFeed(kind FeedKind, project, id string, after uint64, limit int) (FeedPage, error) {
	page := FeedPage{Items: []FeedItem{}}
	var dec feedDecoder
	next, more, err := s.scanFeed(kind, project, id, after, limit, func(_ uint64, v []byte) error {
		page.Items = append(page.Items, FeedItem{})
		return dec.decode(v, &page.Items[len(page.Items)-1])
	})
	page.NextAfterLedgerSeq, page.HasMore = next, more
	return page, err
}

// scanFeed calls add with the stored items of a page of a feed and their
// ledger_seq, in order, within one read transaction (v is valid only during
// the call), and returns the page's cursor and whether items follow. The
// project feed is the bucket feed; a Turn's and an agent's are indexes whose
// keys are (project, id, ledger_seq), and id must exist in the Turns or the
// agents.
func (s *Store) scanFeed(kind FeedKind, project, id string, after uint64, limit int, add func(seq uint64, v []byte) error) (next uint64, more bool, err error) {
	var index, owner []byte
	parts := []string{project}
	switch kind {
	case FeedOfTurn:
		index, owner, parts = bktTurnFeed, bktTurns, append(parts, id)
	case FeedOfAgent:
		index, owner, parts = bktAgentFeed, bktAgents, append(parts, id)
	}
	limit = clampLimit(limit)
	next = after
	prefix := key(parts...)
	err = s.view(func(tx *bolt.Tx) error {
		feed := tx.Bucket(bktFeed)
		if owner != nil && tx.Bucket(owner).Get(prefix) == nil {
			return retiredOr(tx, project, id, ErrNotFound)
		}
		if err := gone(tx, after); err != nil {
			return err
		}
		if after == ^uint64(0) {
			return nil
		}
		c := feed.Cursor()
		var fk []byte // (project, ledger_seq) of an index entry, reused
		if index != nil {
			c = tx.Bucket(index).Cursor()
			fk = key(project)
		}
		pk := len(fk)
		budget := s.pageBudget()
		n := 0
		for k, v := c.Seek(seqKey(after+1, parts...)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if n == limit {
				more = true
				break
			}
			seq := tailSeq(k)
			if index != nil {
				fk = appendSeq(fk[:pk], seq)
				v = feed.Get(fk)
			}
			if budget.full(len(v)) {
				more = true
				break
			}
			if err := add(seq, v); err != nil {
				return err
			}
			n++
			next = seq
		}
		return nil
	})
	return next, more, err
}

// agentReader reads agents and their derived fields in one transaction.
type agentReader struct {
	agents, seen, claims *bolt.Bucket
	window               time.Duration
	now                  time.Time
}

func (s *Store) agentReader(tx *bolt.Tx, now time.Time) agentReader {
	return agentReader{agents: tx.Bucket(bktAgents), seen: tx.Bucket(bktSeen), claims: tx.Bucket(bktClaims), window: s.cfg.PresenceWindow, now: now}
}

func (r agentReader) get(project, agentID string) (AgentView, error) {
	var a kernel.Agent
	found, err := getJSON(r.agents, key(project, agentID), &a)
	if err != nil {
		return AgentView{}, err
	}
	if !found {
		return AgentView{}, ErrNotFound
	}
	return r.view(project, &a), nil
}

// Agent returns the truth snapshot of an agent, or ErrNotFound.
func (s *Store) Agent(project, agentID string, now time.Time) (AgentView, error) {
	var v AgentView
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		v, err = s.agentReader(tx, now).get(project, agentID)
		return err
	})
	return v, err
}

// Agents lists the agents of a project that match f, by agent_id, at most
// limit of them.
func (s *Store) Agents(project string, f AgentFilter, limit int, now time.Time) ([]AgentView, error) {
	limit = clampLimit(limit)
	out := []AgentView{}
	err := s.view(func(tx *bolt.Tx) error {
		r := s.agentReader(tx, now)
		if f.AgentID != "" {
			v, err := r.get(project, f.AgentID)
			if errors.Is(err, ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
			if f.match(v) {
				out = append(out, v)
			}
			return nil
		}
		prefix := key(project)
		c := r.agents.Cursor()
		for k, b := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, b = c.Next() {
			var a kernel.Agent
			if err := json.Unmarshal(b, &a); err != nil {
				return err
			}
			if v := r.view(project, &a); f.match(v) {
				out = append(out, v)
			}
		}
		return nil
	})
	return out, err
}

func (f AgentFilter) match(v AgentView) bool {
	switch {
	case f.AgentID != "" && v.AgentID != f.AgentID,
		f.EnabledOnly && !v.Enabled,
		f.AcceptsWorkOnly && !kernel.AcceptingWork(v.AcceptsWork, v.Drained),
		f.Role != "" && v.Role != f.Role,
		f.Capability != "" && !slices.Contains(v.Capabilities, f.Capability):
		return false
	}
	return true
}

// TurnOffers lists the canonical Turn offers of a project that match f,
// sorted by (turn_kind, agent_id), at most limit of them. See the package
// doc for the definition.
func (s *Store) TurnOffers(project string, f OfferFilter, limit int, now time.Time) ([]TurnOffer, error) {
	limit = clampLimit(limit)
	out := []TurnOffer{}
	err := s.view(func(tx *bolt.Tx) error {
		r := s.agentReader(tx, now)
		queued := tx.Bucket(bktQueued)
		prefix := key(project)
		if f.TurnKind != "" {
			prefix = key(project, f.TurnKind)
		}
		agents := map[string]AgentView{}
		c := tx.Bucket(bktOffers).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Next() {
			parts := splitKey(k)
			if len(parts) != 3 {
				continue
			}
			kind, agentID := parts[1], parts[2]
			if f.AgentID != "" && agentID != f.AgentID {
				continue
			}
			v, ok := agents[agentID]
			if !ok {
				var err error
				if v, err = r.get(project, agentID); errors.Is(err, ErrNotFound) {
					continue
				} else if err != nil {
					return err
				}
				agents[agentID] = v
			}
			if f.EnabledOnly && !v.Enabled || f.AcceptsWorkOnly && !kernel.AcceptingWork(v.AcceptsWork, v.Drained) {
				continue
			}
			out = append(out, TurnOffer{
				AgentID: agentID, TurnKind: kind, Role: v.Role, Enabled: v.Enabled,
				AcceptsWork: v.AcceptsWork, Drained: v.Drained, Admitting: v.Admitting,
				Capacity: v.Capacity, FreeCapacity: v.FreeCapacity,
				Queued:   int(getU64(queued.Get(key(project, agentID, kind)))),
				Presence: v.Presence,
			})
		}
		return nil
	})
	return out, err
}

// splitKey decodes a key made of string parts only.
func splitKey(k []byte) []string {
	var parts []string
	var cur []byte
	for i := 0; i < len(k); i++ {
		if k[i] != 0 {
			cur = append(cur, k[i])
			continue
		}
		if i+1 >= len(k) {
			return nil
		}
		i++
		if k[i] == 0xFF {
			cur = append(cur, 0)
			continue
		}
		parts = append(parts, string(cur))
		cur = nil
	}
	return parts
}

// Credentials lists the credentials of an agent in issue order, with their
// status at now. ErrNotFound when the agent is not registered.
func (s *Store) Credentials(project, agentID string, now time.Time) ([]CredentialView, error) {
	out := []CredentialView{}
	var recs []kernel.Credential
	err := s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bktAgents).Get(key(project, agentID)) == nil {
			return ErrNotFound
		}
		prefix := key(project, agentID)
		c := tx.Bucket(bktCreds).Cursor()
		for k, b := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, b = c.Next() {
			var rec kernel.Credential
			if err := json.Unmarshal(b, &rec); err != nil {
				return err
			}
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(recs, func(a, b kernel.Credential) int { return cmp.Compare(a.IssuedSeq, b.IssuedSeq) })
	for i := range recs {
		out = append(out, credentialView(project, &recs[i], now))
	}
	return out, nil
}

// hasTags reports whether have holds every tag of want.
func hasTags(have, want []string) bool {
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}
