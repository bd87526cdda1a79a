package projection

import (
	"bytes"
	"cmp"
	"slices"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Writes the fold defers to the commit, in key order.
//
// bbolt splits a node only when its transaction commits, so a leaf that
// takes keys in the middle of its range grows, for the whole transaction,
// by every key it gets, and each insert moves every key after it: a
// transaction of thousands of events (a rebuild folds 8k at a time) spends
// most of its fold shifting the leaves of the indexes many Turns or agents
// grow at once (a Turn's feed, an agent's feed, the target index). Put in
// key order, each key lands after the keys put before it, and only the keys
// the leaf held before the transaction are moved.
//
// So the puts and deletes of the buckets the fold only writes, and never
// reads, are kept until flush and applied there sorted by key; those of one
// key keep their order (a put, then a delete of the same key, then...), so
// the file ends as it would have with every write made at once. Buckets the
// fold reads (turns, agents, credentials, counters, presence) are written at
// once.
type writeBucket int

const (
	wFeed writeBucket = iota
	wTurnFeed
	wAgentFeed
	wContext
	wByDispatch
	wByTarget
	wByTag
	wByAgent
	wChildren
	wByState
	nWriteBuckets
)

// writeBuckets names the bucket of each writeBucket.
var writeBuckets = [nWriteBuckets][]byte{
	wFeed: bktFeed, wTurnFeed: bktTurnFeed, wAgentFeed: bktAgentFeed, wContext: bktContext,
	wByDispatch: bktByDispatch, wByTarget: bktByTarget, wByTag: bktByTag, wByAgent: bktByAgent,
	wChildren: bktChildren, wByState: bktByState,
}

// write is a deferred put (or delete, when del) of one key, the n-th write
// of its bucket in this transaction.
type write struct {
	k, v []byte
	n    int
	del  bool
}

// put defers a put of v at k into b. bbolt's refusals of a key or value are
// checked now, so that the event that made the write is the one refused.
func (f *folder) put(b writeBucket, k, v []byte) error {
	switch {
	case len(k) == 0:
		return bolterrors.ErrKeyRequired
	case len(k) > bolt.MaxKeySize:
		return bolterrors.ErrKeyTooLarge
	case int64(len(v)) > bolt.MaxValueSize:
		return bolterrors.ErrValueTooLarge
	}
	f.writes[b] = append(f.writes[b], write{k: k, v: v, n: len(f.writes[b])})
	return nil
}

// del defers a delete of k from b.
func (f *folder) del(b writeBucket, k []byte) {
	f.writes[b] = append(f.writes[b], write{k: k, n: len(f.writes[b]), del: true})
}

// flushWrites applies the deferred writes, each bucket's sorted by key (the
// writes of one key in the order they were made, of which only the last
// matters), and the cached values.
func (f *folder) flushWrites() error {
	if err := f.flushCached(); err != nil {
		return err
	}
	for b, ws := range f.writes {
		if len(ws) == 0 {
			continue
		}
		// Most buckets take their keys in order already (the feed, the
		// dispatch index): checking is cheaper than sorting.
		if !slices.IsSortedFunc(ws, compareWrites) {
			slices.SortFunc(ws, compareWrites)
		}
		bk := f.tx.Bucket(writeBuckets[b])
		for i, w := range ws {
			if i+1 < len(ws) && bytes.Equal(ws[i+1].k, w.k) {
				continue // the last write of a key is the one that stays
			}
			var err error
			if w.del {
				err = bk.Delete(w.k)
			} else {
				err = bk.Put(w.k, w.v)
			}
			if err != nil {
				return err
			}
		}
		f.writes[b] = nil
	}
	return nil
}

// compareWrites orders writes by key, those of one key in the order made.
func compareWrites(x, y write) int {
	if c := bytes.Compare(x.k, y.k); c != 0 {
		return c
	}
	return cmp.Compare(x.n, y.n)
}

// Values the fold reads and changes at almost every event: the counters of
// queued Turns and active claims, and when agents were last seen. Each is
// read from the file once a transaction, changed in memory, and written
// once by flush.
type cachedBucket int

const (
	cQueued cachedBucket = iota
	cClaims
	cSeen
	nCachedBuckets
)

var cachedBuckets = [nCachedBuckets][]byte{cQueued: bktQueued, cClaims: bktClaims, cSeen: bktSeen}

// cachedU64 is an 8-byte value: n, whether the file holds the key
// (present), and whether it changed in this transaction (dirty).
type cachedU64 struct {
	n              uint64
	present, dirty bool
}

// cached returns the cached value at k of b, reading it on first use.
func (f *folder) cached(b cachedBucket, k []byte) *cachedU64 {
	m := f.cache[b]
	if m == nil {
		m = map[string]*cachedU64{}
		f.cache[b] = m
	}
	c, ok := m[string(k)]
	if !ok {
		v := f.tx.Bucket(cachedBuckets[b]).Get(k)
		c = &cachedU64{n: getU64(v), present: v != nil}
		m[string(k)] = c
	}
	return c
}

// addCount adds d to the counter at k of b; a counter at zero is deleted.
func (f *folder) addCount(b cachedBucket, k []byte, d int) {
	c := f.cached(b, k)
	n := int64(c.n) + int64(d)
	c.n, c.present, c.dirty = uint64(max(n, 0)), n > 0, true
}

// flushCached writes the cached values that changed, in key order.
func (f *folder) flushCached() error {
	for b, m := range f.cache {
		keys := make([]string, 0, len(m))
		for k, c := range m {
			if c.dirty {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		bk := f.tx.Bucket(cachedBuckets[b])
		for _, k := range keys {
			var err error
			if c := m[k]; c.present {
				err = bk.Put([]byte(k), putU64(c.n))
			} else {
				err = bk.Delete([]byte(k))
			}
			if err != nil {
				return err
			}
		}
		f.cache[b] = nil
	}
	return nil
}
