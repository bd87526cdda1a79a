package projection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/turnledger/turnledger/kernel"
)

// Retention: a horizon below which the feeds hold nothing, and Turn trees
// retired from the read models.
//
// The horizon (meta "horizon", 8 bytes big-endian) is the first ledger_seq
// the feeds still hold: a feed read after a ledger_seq below horizon - 1
// would silently miss events, so it is a *GoneError instead. It only moves
// up, and only up to the checkpoint + 1 (the projections never drop what
// they have not folded). Retire sets it first and then removes the feed
// entries below it in transactions of a bounded size, so that the projector
// waits for at most one of them at a time; a crash in between leaves entries
// that the next run removes, and no read ever sees them (the horizon is
// checked first).
//
// A Turn tree is retired when every Turn of it is finished, finished before
// Retirement.FinishedBefore, and its last event is below the horizon (so its
// events are in the archive). Its rows, indexes, context and Turn feed go;
// what stays is one row per Turn in the bucket "retired", keyed (project,
// turn): its finish time, outcome, the time it was retired and its last view
// (input and final payload dropped), so that a read of it says it was retired and when (a 404
// with a *RetiredError), and a repeated dispatch with its dispatch_key (the
// engine keeps the key) is answered with the Turn as it was. The retired
// rows, the horizon and the list of projects whose feeds were trimmed
// ("horizon_projects", so that Projects still lists a project whose every
// event is below the horizon) are the only buckets Retire adds; they are
// made on the first run.

var (
	bktRetired         = []byte("retired")
	bktHorizonProjects = []byte("horizon_projects")
	keyHorizon         = []byte("horizon")
)

// GoneError is a feed read whose cursor lies below the horizon: the events
// after it and below the horizon are only in the ledger's archive.
type GoneError struct {
	// Horizon is the first ledger_seq the feeds hold.
	Horizon uint64
}

// Unwrap is the kernel's Gone error with the same message (410 on every
// face).
func (e *GoneError) Unwrap() error { return &kernel.Error{Kind: kernel.Gone, Message: e.Error()} }

func (e *GoneError) Error() string {
	return fmt.Sprintf("the events before ledger_seq %d are no longer in the feeds (retention): read on from after_ledger_seq=%d, or find the older ones in the archive (turnledger archive cat)", e.Horizon, e.Horizon-1)
}

// RetiredError is a read of a Turn that was retired. It unwraps to a
// kernel.NotFound error with the same message (404 on every face).
type RetiredError struct {
	TurnID string
	RetiredTurn
}

func (e *RetiredError) Error() string {
	fin := ""
	if e.FinishedAt != nil {
		fin = " (it finished " + e.Outcome + " at " + e.FinishedAt.UTC().Format(time.RFC3339) + ")"
	}
	return fmt.Sprintf("turn %s was retired at %s%s; its events are in the ledger's archive", e.TurnID, e.RetiredAt.UTC().Format(time.RFC3339), fin)
}

func (e *RetiredError) Unwrap() error {
	return &kernel.Error{Kind: kernel.NotFound, Message: e.Error()}
}

// RetiredTurn is what stays of a retired Turn.
type RetiredTurn struct {
	FinishedAt *time.Time
	Outcome    string
	RetiredAt  time.Time
	// LedgerSeq is the Turn's last event.
	LedgerSeq uint64
	// View is the Turn's last view, without its input and final payload.
	View TurnView
}

// retiredRow is a retired Turn's row: what its last view needs but its
// input and final payload (the bulk of a Turn, in the archive), with short
// names and times in Unix nanoseconds, so that the index stays small (a few
// hundred bytes a Turn).
type retiredRow struct {
	Finished int64  `json:"f"`
	Outcome  string `json:"o"`
	Retired  int64  `json:"r"`
	Seq      uint64 `json:"q"`
	Created  int64  `json:"c"`
	Updated  int64  `json:"u"`
	Kind     string `json:"k"`
	Target   string `json:"t"`
	By       string `json:"b"`
	Key      string `json:"d,omitempty"`
	kernel.Authority
	Root      string   `json:"rt,omitempty"` // when not the Turn itself
	Depth     int      `json:"dp,omitempty"`
	Attempts  int      `json:"at,omitempty"`
	TurnSeq   uint64   `json:"ts,omitempty"`
	Role      *string  `json:"fr,omitempty"`
	Tags      []string `json:"tg,omitempty"`
	RetryOf   string   `json:"ro,omitempty"`
	Stop      bool     `json:"sr,omitempty"`
	StopAt    int64    `json:"sa,omitempty"`
	NotBefore int64    `json:"nb,omitempty"`
	kernel.Schedule
}

func unixNano(t *time.Time) int64 {
	if t == nil || t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func retiredRowOf(t *kernel.Turn, now time.Time) retiredRow {
	d := &t.Dispatch
	r := retiredRow{Finished: unixNano(t.FinishedAt), Outcome: t.Outcome, Retired: now.UnixNano(), Seq: t.Seq,
		Created: unixNano(&t.CreatedAt), Updated: unixNano(&t.UpdatedAt), Kind: d.TurnKind, Target: d.TargetAgent.AgentID,
		By: d.RequestedBy.AgentID, Key: d.DispatchKey, Authority: d.Authority, Depth: d.Depth, Attempts: t.Attempts,
		TurnSeq: t.TurnSeq, Role: t.FinalRecordRole, Tags: d.Tags, RetryOf: d.RetryOf, Stop: t.StopRequested,
		StopAt: unixNano(t.StopRequestedAt), NotBefore: unixNano(t.NotBefore), Schedule: d.Schedule}
	r.Authority.ParentClaim = ""
	if d.RootTurnID != t.ID {
		r.Root = d.RootTurnID
	}
	return r
}

// retired rebuilds what stays of the Turn id of project from its row.
func (r retiredRow) retired(project, id string) RetiredTurn {
	t := kernel.Turn{ID: id, State: kernel.StateFinished, Outcome: r.Outcome, StopRequested: r.Stop, Attempts: r.Attempts,
		TurnSeq: r.TurnSeq, FinalRecordRole: r.Role, CreatedAt: fromNano(r.Created), UpdatedAt: fromNano(r.Updated), Seq: r.Seq,
		Dispatch: kernel.TurnDispatched{TargetAgent: kernel.AgentRef{ProjectID: project, AgentID: r.Target},
			RequestedBy: kernel.AgentRef{ProjectID: project, AgentID: r.By}, Input: json.RawMessage("null"), TurnKind: r.Kind,
			DispatchKey: r.Key, Authority: r.Authority, RootTurnID: r.Root, Depth: r.Depth, Schedule: r.Schedule,
			RetryOf: r.RetryOf, Tags: r.Tags}}
	if t.Dispatch.RootTurnID == "" {
		t.Dispatch.RootTurnID = id
	}
	if r.StopAt != 0 {
		t.StopRequestedAt = ptr(fromNano(r.StopAt))
	}
	if r.NotBefore != 0 {
		t.NotBefore = ptr(fromNano(r.NotBefore))
	}
	rt := RetiredTurn{Outcome: r.Outcome, RetiredAt: fromNano(r.Retired), LedgerSeq: r.Seq}
	if r.Finished != 0 {
		f := fromNano(r.Finished)
		t.FinishedAt, rt.FinishedAt = &f, &f
	}
	rt.View = ViewOf(project, &t)
	return rt
}

// Retirement says what Retire removes.
type Retirement struct {
	// Horizon is the first ledger_seq the feeds keep (clamped to the
	// checkpoint + 1; never lowered).
	Horizon uint64
	// FinishedBefore: Turn trees all finished before it may be retired
	// (zero: none is).
	FinishedBefore time.Time
	// Now is recorded as the retirement time.
	Now time.Time
	// ChunkKeys bounds the keys one transaction deletes (default 2,000).
	ChunkKeys int
}

// RetireResult is what a Retire did.
type RetireResult struct {
	Horizon      uint64 `json:"horizon_ledger_seq"`
	FeedKeys     int    `json:"feed_keys_removed"`
	TurnsRetired int    `json:"turns_retired"`
}

// Horizon returns the first ledger_seq the feeds hold (0 when none was
// set: every event is there).
func (s *Store) Horizon() (uint64, error) {
	var h uint64
	err := s.view(func(tx *bolt.Tx) error {
		h = getU64(tx.Bucket(bktMeta).Get(keyHorizon))
		return nil
	})
	return h, err
}

// gone is the horizon check of a feed read after ledger_seq after.
func gone(tx *bolt.Tx, after uint64) error {
	h := getU64(tx.Bucket(bktMeta).Get(keyHorizon))
	if h > 1 && after != ^uint64(0) && after < h-1 {
		return &GoneError{Horizon: h}
	}
	return nil
}

// retiredOr turns err, when it is ErrNotFound for a Turn that was retired,
// into its *RetiredError.
func retiredOr(tx *bolt.Tx, project, turnID string, err error) error {
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	if rt, ok := loadRetired(tx, project, turnID); ok {
		return &RetiredError{TurnID: turnID, RetiredTurn: rt}
	}
	return err
}

func loadRetired(tx *bolt.Tx, project, turnID string) (RetiredTurn, bool) {
	b := tx.Bucket(bktRetired)
	if b == nil {
		return RetiredTurn{}, false
	}
	var r retiredRow
	if ok, err := getJSON(b, key(project, turnID), &r); !ok || err != nil {
		return RetiredTurn{}, false
	}
	return r.retired(project, turnID), true
}

// turnOrRetired is Turn, answering a retired Turn's last view.
func (s *Store) turnOrRetired(project, turnID string) (TurnView, error) {
	v, err := s.Turn(project, turnID)
	var re *RetiredError
	if errors.As(err, &re) {
		return re.View, nil
	}
	return v, err
}

// Retire moves the horizon up to r.Horizon, removes the feed entries below
// it, and retires the Turn trees r allows, in transactions of at most
// r.ChunkKeys deleted keys each, between the projector's commits.
func (s *Store) Retire(r Retirement) (RetireResult, error) {
	if r.ChunkKeys <= 0 {
		r.ChunkKeys = 2_000 // a few milliseconds of the projector's time
	}
	var res RetireResult
	// 1. The horizon, first: from here on no read sees below it.
	err := s.retireTx(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bktMeta)
		h := max(getU64(meta.Get(keyHorizon)), min(r.Horizon, getU64(meta.Get(keyCheckpoint))+1))
		res.Horizon = h
		if h <= 1 {
			return nil
		}
		hp, err := tx.CreateBucketIfNotExists(bktHorizonProjects)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bktRetired); err != nil {
			return err
		}
		// The projects that lose feed entries: those with one below h.
		feed := tx.Bucket(bktFeed)
		for _, p := range projectsOf(feed) {
			if k, _ := feed.Cursor().Seek(key(p)); k == nil || tailSeq(k) >= h {
				continue
			}
			if err := hp.Put(key(p), nil); err != nil {
				return err
			}
		}
		return meta.Put(keyHorizon, putU64(h))
	})
	if err != nil || res.Horizon <= 1 {
		return res, err
	}
	// 2. The feed entries below it.
	for _, b := range [][]byte{bktTurnFeed, bktAgentFeed, bktFeed} {
		for from := []byte{}; from != nil; {
			var n int
			err := s.retireTx(func(tx *bolt.Tx) error {
				var err error
				n, from, err = trimBelow(tx.Bucket(b), from, res.Horizon, r.ChunkKeys)
				return err
			})
			res.FeedKeys += n
			if err != nil {
				return res, err
			}
		}
	}
	// 3. The Turn trees, a bounded number of keys at a time.
	if r.FinishedBefore.IsZero() {
		return res, nil
	}
	var projects []string
	if err := s.view(func(tx *bolt.Tx) error { projects = projectsOf(tx.Bucket(bktByState)); return nil }); err != nil {
		return res, err
	}
	for _, p := range projects {
		for from := uint64(0); ; {
			var n int
			var done bool
			err := s.retireTx(func(tx *bolt.Tx) error {
				var err error
				n, from, done, err = s.retireTrees(tx, p, from, res.Horizon, r, r.ChunkKeys)
				return err
			})
			res.TurnsRetired += n
			if err != nil {
				return res, err
			}
			if done {
				break
			}
		}
	}
	return res, nil
}

// retireTx runs fn in a write transaction of its own, after the
// projector's open transaction is committed, holding the fold back while it
// runs.
func (s *Store) retireTx(fn func(tx *bolt.Tx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.commitLocked(); err != nil {
		return err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return s.update(fn)
}

// trimBelow deletes, from the keys at or after from, those of b whose
// trailing ledger_seq is below horizon, at most max of them; it returns how
// many it deleted and where to go on (nil: done). Keys are (parts...,
// ledger_seq): within a group of equal parts they are in ledger_seq order,
// so a group is left at its first key at or above horizon.
func trimBelow(b *bolt.Bucket, from []byte, horizon uint64, limit int) (int, []byte, error) {
	c := b.Cursor()
	var dead [][]byte
	k, _ := c.Seek(from)
	for k != nil {
		if len(k) < 8 {
			k, _ = c.Next()
			continue
		}
		if tailSeq(k) < horizon {
			if len(dead) == limit {
				return deleteKeys(b, dead, bytes.Clone(k))
			}
			dead = append(dead, bytes.Clone(k))
			k, _ = c.Next()
			continue
		}
		// Past this group: its parts followed by more than any sequence.
		next := append(bytes.Clone(k[:len(k)-8]), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
		k, _ = c.Seek(next)
	}
	return deleteKeys(b, dead, nil)
}

func deleteKeys(b *bolt.Bucket, keys [][]byte, next []byte) (int, []byte, error) {
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return 0, nil, err
		}
	}
	return len(keys), next, nil
}

// projectsOf lists the projects of a bucket whose keys begin with the
// project.
func projectsOf(b *bolt.Bucket) []string {
	var out []string
	if b == nil {
		return out
	}
	c := b.Cursor()
	for k, _ := c.First(); k != nil; {
		var project string
		for i := 0; i+1 < len(k); i++ {
			if k[i] == 0 && k[i+1] == 0 {
				project = string(unescape(k[:i]))
				break
			}
			if k[i] == 0 {
				i++
			}
		}
		out = append(out, project)
		next := key(project)
		next[len(next)-1] = 0x01 // just past every key of this project
		k, _ = c.Seek(next)
	}
	return out
}

// retireTrees retires the finished root Turns of project (and their trees)
// found in the finished-state index from dispatch_seq from on, until about
// limit keys are deleted; it returns how many Turns it retired, where to go
// on, and whether it is done.
func (s *Store) retireTrees(tx *bolt.Tx, project string, from, horizon uint64, r Retirement, limit int) (int, uint64, bool, error) {
	turns := tx.Bucket(bktTurns)
	prefix := key(project, kernel.StateFinished)
	c := tx.Bucket(bktByState).Cursor()
	retired, deleted := 0, 0
	// Collected first: the state index is one the deletes change.
	type cand struct {
		seq uint64
		id  string
	}
	var cands []cand
	for k, v := c.Seek(appendSeq(bytes.Clone(prefix), from)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		cands = append(cands, cand{tailSeq(k), string(v)})
		if len(cands) >= limit {
			break
		}
	}
	for i, cd := range cands {
		rec, err := loadTurn(turns, project, cd.id)
		if errors.Is(err, ErrNotFound) {
			continue // retired with its root earlier in this run
		} else if err != nil {
			return retired, 0, false, err
		}
		if rec.Turn.RootTurnID() != cd.id {
			continue // retired with its root, or not at all
		}
		tree, ok, err := wholeTree(tx, project, rec, horizon, r.FinishedBefore)
		if err != nil {
			return retired, 0, false, err
		}
		if !ok {
			continue
		}
		for _, t := range tree {
			n, err := s.retireTurn(tx, project, t, r.Now)
			if err != nil {
				return retired, 0, false, err
			}
			deleted += n
			retired++
		}
		if deleted >= limit && i+1 < len(cands) {
			return retired, cands[i+1].seq, false, nil
		}
	}
	if len(cands) < limit {
		return retired, 0, true, nil
	}
	return retired, cands[len(cands)-1].seq + 1, false, nil
}

// wholeTree returns the Turns of the tree under root when every one of them
// is finished before finishedBefore with its last event below horizon.
func wholeTree(tx *bolt.Tx, project string, root turnRecord, horizon uint64, finishedBefore time.Time) ([]turnRecord, bool, error) {
	turns, children := tx.Bucket(bktTurns), tx.Bucket(bktChildren)
	old := func(t *kernel.Turn) bool {
		return t.State == kernel.StateFinished && t.FinishedAt != nil && t.FinishedAt.Before(finishedBefore) && t.Seq < horizon
	}
	if !old(&root.Turn) {
		return nil, false, nil
	}
	tree := []turnRecord{root}
	for i := 0; i < len(tree); i++ {
		prefix := key(project, tree[i].Turn.ID)
		c := children.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Next() {
			rec, err := loadTurn(turns, project, string(v))
			if errors.Is(err, ErrNotFound) {
				continue
			} else if err != nil {
				return nil, false, err
			}
			if !old(&rec.Turn) {
				return nil, false, nil
			}
			tree = append(tree, rec)
		}
	}
	return tree, true, nil
}

// retireTurn deletes a Turn's row, indexes, context and Turn feed, and
// keeps its retired row. It returns the keys it deleted.
func (s *Store) retireTurn(tx *bolt.Tx, project string, rec turnRecord, now time.Time) (int, error) {
	t := &rec.Turn
	id, order := t.ID, t.Order
	n := 0
	del := func(bkt []byte, k []byte) error {
		n++
		return tx.Bucket(bkt).Delete(k)
	}
	delPrefix := func(bkt []byte, prefix []byte) error {
		b := tx.Bucket(bkt)
		var dead [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			dead = append(dead, bytes.Clone(k))
		}
		m, _, err := deleteKeys(b, dead, nil)
		n += m
		return err
	}
	errs := []error{
		del(bktByDispatch, seqKey(order, project)),
		del(bktByTarget, seqKey(order, project, t.Dispatch.TargetAgent.AgentID)),
		del(bktByState, seqKey(order, project, t.State)),
		delPrefix(bktContext, key(project, id)),
		delPrefix(bktTurnFeed, key(project, id)),
	}
	if parent := t.Dispatch.Authority.ParentTurnID; parent != "" {
		errs = append(errs, del(bktChildren, seqKey(order, project, parent)))
	}
	for _, tag := range t.Dispatch.Tags {
		errs = append(errs, del(bktByTag, seqKey(order, project, tag)))
	}
	for _, a := range rec.Readers {
		errs = append(errs, del(bktByAgent, seqKey(order, project, a)))
	}
	if err := errors.Join(errs...); err != nil {
		return n, err
	}
	if err := putJSON(tx.Bucket(bktRetired), key(project, id), retiredRowOf(t, now)); err != nil {
		return n, err
	}
	k := key(project, id)
	s.recent.take(string(k)) // the fold must not write it back from its cache
	s.mu.Lock()
	delete(s.overlay, string(k)) // nor an answer show it as it was (overlay.go)
	delete(s.before, string(k))
	s.mu.Unlock()
	return n + 1, tx.Bucket(bktTurns).Delete(k)
}

// CarryRetirement gives s (a file rebuilt from the archive and the stream)
// the retirement of the projection file at live: its horizon and its
// retired Turns, whose rows it keeps as they are, so that a replay gives
// the projections the live file had. The live file is opened read-only.
func (s *Store) CarryRetirement(live string) error {
	db, err := bolt.Open(live, 0o600, &bolt.Options{ReadOnly: true, Timeout: s.cfg.OpenTimeout})
	if err != nil {
		return fmt.Errorf("projection: carry retirement: open %s: %w", live, err)
	}
	var horizon uint64
	rows := map[string][]byte{}
	err = func() (err error) {
		defer s.caught(&err)
		return db.View(func(tx *bolt.Tx) error {
			horizon = getU64(tx.Bucket(bktMeta).Get(keyHorizon))
			if b := tx.Bucket(bktRetired); b != nil {
				return b.ForEach(func(k, v []byte) error {
					rows[string(k)] = bytes.Clone(v)
					return nil
				})
			}
			return nil
		})
	}()
	db.Close()
	if err != nil {
		return fmt.Errorf("projection: carry retirement: %w", err)
	}
	if horizon <= 1 && len(rows) == 0 {
		return nil
	}
	err = s.retireTx(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bktRetired)
		if err != nil {
			return err
		}
		for k, v := range rows {
			parts := keyParts([]byte(k))
			if len(parts) != 2 {
				return fmt.Errorf("a retired row of key %q", k)
			}
			rec, err := loadTurn(tx.Bucket(bktTurns), parts[0], parts[1])
			if err == nil {
				if _, err := s.retireTurn(tx, parts[0], rec, time.Time{}); err != nil {
					return err
				}
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("projection: carry retirement: %w", err)
	}
	_, err = s.Retire(Retirement{Horizon: horizon})
	return err
}

// keyParts decodes a key of string parts.
func keyParts(k []byte) []string {
	var parts []string
	var cur []byte
	for i := 0; i < len(k); i++ {
		if k[i] == 0 && i+1 < len(k) {
			if k[i+1] == 0 {
				parts = append(parts, string(cur))
				cur = nil
			} else {
				cur = append(cur, 0)
			}
			i++
			continue
		}
		cur = append(cur, k[i])
	}
	return parts
}
