package projection

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/turnledger/turnledger/kernel"
)

// folder applies events inside one write transaction. It opens a bucket
// when an event first needs it (bbolt caches it for the transaction): most
// events touch about half of the buckets, and opening one allocates.
type folder struct {
	tx *bolt.Tx

	// turnCache holds the Turn records read or written in this transaction;
	// they are encoded once, by flush, however many events of the batch
	// change them.
	turnCache map[string]*turnRecord
	recent    *recentTurns // records committed by earlier transactions (turncache.go)
	changed   []string     // the keys of the Turns changed since views was last called

	// writes are the writes of the buckets the fold never reads, applied
	// in key order by flush (writes.go).
	writes [nWriteBuckets][]write
	cache  [nCachedBuckets]map[string]*cachedU64

	// item is the feed item of the event being folded when it was encoded
	// beforehand (a rebuild encodes them on other cores), else nil.
	item []byte
}

func newFolder(tx *bolt.Tx, recent *recentTurns) *folder {
	for _, name := range appendOnly {
		tx.Bucket(name).FillPercent = appendFill
	}
	return &folder{tx: tx, turnCache: map[string]*turnRecord{}, recent: recent}
}

// appendOnly are the buckets whose new keys land at the end of the range
// of a prefix that stays put, few prefixes taking keys at once: the feeds
// and the dispatch index (keys that end in a ledger_seq), and the Turns
// (keyed by a Turn id, which sorts by the time the Turn was dispatched:
// kernel's newTurnID). A split page then never gets another key, so bbolt's
// default fill of 0.5 would leave it half empty for good; they are filled
// to appendFill instead (bbolt keeps the setting for the transaction, as it
// keeps the bucket). The rest keep the default: buckets that lose keys
// (turns_by_state), and those where many prefixes grow at once (a Turn's
// records and feed, the target index), where a split at 0.95 in the middle
// of the range leaves pages emptier than the default does.
var appendOnly = [][]byte{bktFeed, bktAgentFeed, bktByDispatch, bktTurns}

const appendFill = 0.95

// turn returns the cached record of a Turn, reading it when needed; nil when
// there is none.
func (f *folder) turn(tk []byte) (*turnRecord, error) {
	if rec, ok := f.turnCache[string(tk)]; ok {
		return rec, nil
	}
	if rec, ok := f.recent.take(string(tk)); ok {
		f.turnCache[string(tk)] = rec
		return rec, nil
	}
	var rec turnRecord
	found, err := getJSON(f.tx.Bucket(bktTurns), tk, &rec)
	if err != nil || !found {
		return nil, err
	}
	f.turnCache[string(tk)] = &rec
	return &rec, nil
}

// flush writes the Turn records changed in this transaction and the
// deferred writes (writes.go).
func (f *folder) flush() error {
	if err := f.flushWrites(); err != nil {
		return err
	}
	for k, rec := range f.turnCache {
		buf, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := f.tx.Bucket(bktTurns).Put([]byte(k), buf); err != nil {
			return err
		}
	}
	return nil
}

// views returns, by key, the Turns changed since it was last called, as
// answers show them. A view shares nothing a later fold changes in place:
// its pointers are its own, and the JSON it holds is never written to.
func (f *folder) views() map[string]TurnView {
	out := make(map[string]TurnView, len(f.changed))
	for _, k := range f.changed {
		if _, ok := out[k]; ok {
			continue
		}
		out[k] = ViewOf(splitKey([]byte(k))[0], &f.turnCache[k].Turn) // k is key(project, Turn id)
	}
	f.changed = f.changed[:0]
	return out
}

// fold applies one event. Its data is first made the pointer its type
// names (kernel.TypedData), the form the kernel's state machines read; data
// of another type is an error and fails the batch.
func (f *folder) fold(r kernel.Recorded) error {
	var err error
	if r.Event, err = kernel.TypedData(r.Event); err != nil {
		return err
	}
	e := r.Event
	p := e.ProjectID
	item := f.item
	if item == nil {
		if item, err = feedItem(r); err != nil {
			return err
		}
	}
	if err := f.put(wFeed, seqKey(r.Seq, p), item); err != nil {
		return err
	}
	if e.Actor.Kind == kernel.ActorAgent && e.Actor.AgentID != "" {
		if err := f.see(p, e.Actor.AgentID, e.At); err != nil {
			return err
		}
	}
	switch e.Aggregate {
	case kernel.AggTurn:
		return f.foldTurn(r)
	case kernel.AggAgent:
		if err := f.put(wAgentFeed, seqKey(r.Seq, p, e.ID), nil); err != nil {
			return err
		}
		return f.foldAgent(r)
	case kernel.AggCredential, kernel.AggInvite:
		if err := f.foldAgent(r); err != nil { // a registration it carries
			return err
		}
		return f.foldCredential(r)
	}
	return nil // other aggregates are in the project feed only
}

// see records that an agent was seen at t (the latest time wins).
func (f *folder) see(p, agent string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	c := f.cached(cSeen, key(p, agent))
	if n := uint64(t.UnixNano()); !c.present || c.n < n {
		c.n, c.present, c.dirty = n, true, true
	}
	return nil
}
