package projection

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Commits without fsync, and what a crash of the machine costs.
//
// The projections are derived from the ledger: what a crash can cost them is
// a rebuild, never an event. bbolt writes a commit's pages and then its meta
// page, each with an fsync, so that a crash of the machine never leaves a
// meta page pointing at pages that did not reach the disk. Those two fsyncs
// are most of a fold's time under load (the projector is a single writer),
// and they protect only against a crash of the machine: when just the
// process dies, every write it made is in the kernel's page cache, in
// order, and the file is as consistent as bbolt made it.
//
// So with Config.Boot set, a Store does not fsync its commits. Instead, on
// open it writes the machine's boot id under meta "unsynced_boot" and syncs
// that once, before any commit; Close syncs the file and removes the mark.
// A file found on open with the mark of another boot was being written when
// the machine went down: its pages may be torn or missing, which bbolt
// cannot always tell (it keeps no checksum of data pages). Open refuses such
// a file with ErrDamaged, and OpenHealing moves it aside and the projector
// rebuilds it from the ledger. A mark of the same boot means only the
// process died: the file is sound and resumes from its checkpoint.

// bootIDFile is where Linux tells the id of the current boot.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// BootID returns the id of the machine's current boot, or "" where the
// system does not tell it (then a Store must fsync every commit).
func BootID() string {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// markUnsynced checks the file's mark of an unsynced boot against boot (the
// current one, or BootID() when boot is "") and, when boot is set, marks the
// file as written without fsync under it, durably.
func markUnsynced(db *bolt.DB, boot string) error {
	current := boot
	if current == "" {
		current = BootID()
	}
	err := db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bktMeta)
		if meta == nil {
			if boot == "" {
				return nil
			}
			var err error
			if meta, err = tx.CreateBucketIfNotExists(bktMeta); err != nil {
				return err
			}
		}
		if prev := meta.Get(keyUnsynced); prev != nil && (current == "" || !bytes.Equal(prev, []byte(current))) {
			return fmt.Errorf("%w: the machine restarted (boot %s, now %s) while the file was written without fsync, so its last commits may be torn: it is rebuilt from the ledger", ErrDamaged, prev, orUnknown(current))
		}
		if boot == "" {
			return nil
		}
		return meta.Put(keyUnsynced, []byte(boot))
	})
	if err != nil {
		return err
	}
	if boot != "" {
		return db.Sync() // the mark is on disk before any commit is written
	}
	return nil
}

// markSynced syncs every commit to disk and then removes the mark, durably.
// A file found damaged keeps its mark: it is not written to, and Check finds
// the damage on the next open.
func (s *Store) markSynced() error {
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("projection: sync: %w", err)
	}
	err := s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktMeta).Delete(keyUnsynced)
	})
	if errors.Is(err, ErrDamaged) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("projection: mark synced: %w", err)
	}
	return s.db.Sync()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
