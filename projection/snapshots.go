package projection

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The engine's snapshots of write models live in the bucket "snapshots":
// (project, "seq") → the 8-byte ledger_seq it was taken at, and (project,
// "data") → the engine's encoding. They are not a projection: Dump leaves
// them out, Rebuild does not make them (the engine folds a project without
// one and saves a new one), and the bucket is added to a file of layout 2
// when it opens, without changing anything else of it.

var (
	snapSeqPart  = "seq"
	snapDataPart = "data"
)

// LoadSnapshot calls fn with the project's snapshot and its ledger_seq (0
// and nil when there is none). data is valid only while fn runs: a large
// snapshot is read from the file into memory that is garbage after it
// (snapread.go), a small one is the file's mapped bytes.
func (s *Store) LoadSnapshot(project string, fn func(seq uint64, data []byte) error) error {
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktSnapshots)
		seq, data := b.Get(key(project, snapSeqPart)), b.Get(key(project, snapDataPart))
		if len(seq) != 8 || data == nil {
			return fn(0, nil)
		}
		data, err := fileBytes(tx, data)
		if err != nil {
			return err
		}
		return fn(getU64(seq), data)
	})
	if err != nil {
		return fmt.Errorf("projection: load snapshot: %w", err)
	}
	return nil
}

// SaveSnapshot replaces the project's snapshot.
func (s *Store) SaveSnapshot(project string, seq uint64, data []byte) error {
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktSnapshots)
		if err := b.Put(key(project, snapDataPart), data); err != nil {
			return err
		}
		return b.Put(key(project, snapSeqPart), putU64(seq))
	})
	if err != nil {
		return fmt.Errorf("projection: save snapshot: %w", err)
	}
	return nil
}
