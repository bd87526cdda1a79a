package projection

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The engine's snapshots of write models live in the bucket "snapshots"
// (project → 8-byte ledger_seq, then the engine's encoding). They are not a
// projection: Dump leaves them out, Rebuild does not make them (the engine
// folds a project without one and saves a new one), and the bucket is added
// to a file of layout 2 when it opens, without changing anything else of it.

// LoadSnapshot returns the project's snapshot and its ledger_seq (0 and nil
// when there is none). The data is a copy: it outlives the transaction.
func (s *Store) LoadSnapshot(project string) (seq uint64, data []byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bktSnapshots).Get(key(project))
		if len(v) < 8 {
			return nil
		}
		seq, data = getU64(v[:8]), append([]byte(nil), v[8:]...)
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("projection: load snapshot: %w", err)
	}
	return seq, data, nil
}

// SaveSnapshot replaces the project's snapshot.
func (s *Store) SaveSnapshot(project string, seq uint64, data []byte) error {
	v := make([]byte, 0, 8+len(data))
	v = append(append(v, putU64(seq)...), data...)
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktSnapshots).Put(key(project), v)
	})
	if err != nil {
		return fmt.Errorf("projection: save snapshot: %w", err)
	}
	return nil
}
