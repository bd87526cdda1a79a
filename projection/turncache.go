package projection

import "sync"

// recentTurns keeps the decoded records of Turns written by recent batches,
// as committed, so that the next event of a Turn (a Turn gets its events a
// few batches apart: dispatched, claimed, recorded, finished) does not
// decode its JSON row again: decoding Turn rows would otherwise be the
// largest part of a fold of a Turn's lifecycle.
//
// A folder takes a record out (it then owns it and changes it in place) and
// gives every record of its batch back only once the batch's transaction
// has committed, so the cache never holds what the file does not (the
// records of a failed batch are dropped). It is
// bounded: when full it is emptied, and records are read from the file again.
type recentTurns struct {
	mu   sync.Mutex
	recs map[string]*turnRecord
}

// maxRecentTurns bounds the records kept: many times the Turns live at once
// under the bench's load (64 agents: at most a few hundred Turns between
// their first and last event), and a few MiB at most.
const maxRecentTurns = 1024

// take removes and returns the committed record of a Turn, if kept.
func (c *recentTurns) take(k string) (*turnRecord, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.recs[k]
	if ok {
		delete(c.recs, k)
	}
	return rec, ok
}

// committed keeps the records of a batch whose transaction committed.
func (c *recentTurns) committed(recs map[string]*turnRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recs == nil || len(c.recs)+len(recs) > maxRecentTurns {
		c.recs = make(map[string]*turnRecord, maxRecentTurns)
	}
	for k, rec := range recs {
		c.recs[k] = rec
	}
}
