package monitor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Error statuses.
const (
	StatusActive   = "active"
	StatusResolved = "resolved"
)

// Error is an incident of one query: opened by a failing check, counting
// the failures that follow, until someone resolves it.
type Error struct {
	ID      uint64 `json:"id"`
	QueryID string `json:"query_id"`
	Status  string `json:"status"`
	// Reason is the latest failure's reason; FirstReason the one that opened it.
	Reason      string `json:"reason"`
	FirstReason string `json:"first_reason"`
	// Count is the number of failed runs counted on this error.
	Count        int        `json:"count"`
	OpenedAt     time.Time  `json:"opened_at"`
	LastSeenAt   time.Time  `json:"last_seen_at"`
	LastPassedAt *time.Time `json:"last_passed_at"`
	ResolvedAt   *time.Time `json:"resolved_at"`
	Note         string     `json:"note,omitempty"`
}

// Run is one execution of a query, as kept in the history.
type Run struct {
	ID         uint64    `json:"id"`
	QueryID    string    `json:"query_id"`
	Trigger    string    `json:"trigger"` // "schedule" or "manual"
	StartedAt  time.Time `json:"started_at"`
	DurationMS float64   `json:"duration_ms"`
	Passed     bool      `json:"passed"`
	Reason     string    `json:"reason"`
	RowCount   int       `json:"row_count"`
	// ErrorID is the error this failed run opened or counted on.
	ErrorID     uint64 `json:"error_id,omitempty"`
	ErrorOpened bool   `json:"error_opened,omitempty"`
}

// Triggers of a run.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
)

var (
	errNotFound        = errors.New("not found")
	errAlreadyResolved = errors.New("already resolved")
)

var (
	bucketErrors  = []byte("errors")   // be64(id) -> Error
	bucketActive  = []byte("active")   // query id -> be64(error id)
	bucketRuns    = []byte("runs")     // be64(started unix ns) be64(run id) -> Run
	bucketQueries = []byte("queries")  // query id -> queryState
	bucketByQuery = []byte("by_query") // query id -> (run key -> nothing): each query's runs
)

// queryState is what the scheduler needs to pick up after a restart.
type queryState struct {
	LastRun         *Run      `json:"last_run,omitempty"`
	LastScheduledAt time.Time `json:"last_scheduled_at"`
}

// store keeps errors and run history in one bbolt file.
type store struct{ db *bolt.DB }

// retention is how long runs are kept: the widest statistics window, plus a day.
const retention = (MaxStatsDays + 1) * 24 * time.Hour

func openStore(path string) (*store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 500 * time.Millisecond})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open %s: the file is locked by another process (is another monitor running?)", path)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketErrors, bucketActive, bucketRuns, bucketQueries, bucketByQuery} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

func be64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func runKey(at time.Time, id uint64) []byte {
	return binary.BigEndian.AppendUint64(be64(uint64(at.UnixNano())), id)
}

func getJSON(b *bolt.Bucket, key []byte, dst any) (bool, error) {
	v := b.Get(key)
	if v == nil {
		return false, nil
	}
	return true, json.Unmarshal(v, dst)
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// record stores a finished run and its effect on the query's error in one
// transaction: a failure opens an error or counts on the active one; a pass
// notes that the check passes again. It returns the stored run, the error it
// touched (nil on a pass with no active error) and whether that error is new.
func (s *store) record(run Run, now time.Time) (Run, *Error, bool, error) {
	var touched *Error
	opened := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		errs, active, runs, qs := tx.Bucket(bucketErrors), tx.Bucket(bucketActive), tx.Bucket(bucketRuns), tx.Bucket(bucketQueries)
		var cur *Error
		if id := active.Get([]byte(run.QueryID)); id != nil {
			var e Error
			if _, err := getJSON(errs, id, &e); err != nil {
				return err
			}
			cur = &e
		}
		switch {
		case !run.Passed && cur != nil:
			cur.Count++
			cur.Reason = run.Reason
			cur.LastSeenAt = now
			cur.LastPassedAt = nil
		case !run.Passed:
			id, err := errs.NextSequence()
			if err != nil {
				return err
			}
			cur = &Error{ID: id, QueryID: run.QueryID, Status: StatusActive, Reason: run.Reason, FirstReason: run.Reason,
				Count: 1, OpenedAt: now, LastSeenAt: now}
			opened = true
			if err := active.Put([]byte(run.QueryID), be64(id)); err != nil {
				return err
			}
		case cur != nil:
			t := now
			cur.LastPassedAt = &t
		}
		if cur != nil {
			if err := putJSON(errs, be64(cur.ID), cur); err != nil {
				return err
			}
			touched = cur
			if !run.Passed {
				run.ErrorID, run.ErrorOpened = cur.ID, opened
			}
		}
		id, err := runs.NextSequence()
		if err != nil {
			return err
		}
		run.ID = id
		key := runKey(run.StartedAt, id)
		if err := putJSON(runs, key, run); err != nil {
			return err
		}
		idx, err := tx.Bucket(bucketByQuery).CreateBucketIfNotExists([]byte(run.QueryID))
		if err != nil {
			return err
		}
		if err := idx.Put(key, nil); err != nil {
			return err
		}
		var st queryState
		if _, err := getJSON(qs, []byte(run.QueryID), &st); err != nil {
			return err
		}
		st.LastRun = &run
		if run.Trigger == TriggerSchedule {
			st.LastScheduledAt = run.StartedAt
		}
		if err := putJSON(qs, []byte(run.QueryID), st); err != nil {
			return err
		}
		// Drop runs older than the retention window, oldest first.
		cutoff := runKey(now.Add(-retention), 0)
		c := runs.Cursor()
		var old []Run
		for k, v := c.First(); k != nil && string(k) < string(cutoff); k, v = c.Next() {
			var r Run
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			old = append(old, r)
		}
		for _, r := range old {
			key := runKey(r.StartedAt, r.ID)
			if err := runs.Delete(key); err != nil {
				return err
			}
			if idx := tx.Bucket(bucketByQuery).Bucket([]byte(r.QueryID)); idx != nil {
				if err := idx.Delete(key); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return run, touched, opened, err
}

// resolve moves an active error to resolved.
func (s *store) resolve(id uint64, now time.Time, note string) (Error, error) {
	var e Error
	err := s.db.Update(func(tx *bolt.Tx) error {
		errs := tx.Bucket(bucketErrors)
		found, err := getJSON(errs, be64(id), &e)
		if err != nil {
			return err
		}
		if !found {
			return errNotFound
		}
		if e.Status == StatusResolved {
			return errAlreadyResolved
		}
		t := now
		e.Status, e.ResolvedAt, e.Note = StatusResolved, &t, note
		if err := tx.Bucket(bucketActive).Delete([]byte(e.QueryID)); err != nil {
			return err
		}
		return putJSON(errs, be64(id), e)
	})
	return e, err
}

func (s *store) getError(id uint64) (Error, error) {
	var e Error
	err := s.db.View(func(tx *bolt.Tx) error {
		found, err := getJSON(tx.Bucket(bucketErrors), be64(id), &e)
		if err == nil && !found {
			err = errNotFound
		}
		return err
	})
	return e, err
}

// errors lists every error kept, oldest first.
func (s *store) errors() ([]Error, error) {
	out := []Error{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketErrors).ForEach(func(_, v []byte) error {
			var e Error
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// runs lists the runs started in [from, to), oldest first; with queryID
// set, only that query's.
func (s *store) runs(from, to time.Time, queryID string) ([]Run, error) {
	out := []Run{}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRuns).Cursor()
		end := string(runKey(to, 0))
		for k, v := c.Seek(runKey(from, 0)); k != nil && string(k) < end; k, v = c.Next() {
			var r Run
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if queryID == "" || r.QueryID == queryID {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, err
}

// recentRuns returns a query's latest n runs, newest first.
func (s *store) recentRuns(queryID string, n int) ([]Run, error) {
	out := []Run{}
	err := s.db.View(func(tx *bolt.Tx) error {
		idx := tx.Bucket(bucketByQuery).Bucket([]byte(queryID))
		if idx == nil {
			return nil
		}
		runs := tx.Bucket(bucketRuns)
		c := idx.Cursor()
		for k, _ := c.Last(); k != nil && len(out) < n; k, _ = c.Prev() {
			var r Run
			if found, err := getJSON(runs, k, &r); err != nil || !found {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

func (s *store) queryStates() (map[string]queryState, error) {
	out := map[string]queryState{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketQueries).ForEach(func(k, v []byte) error {
			var st queryState
			if err := json.Unmarshal(v, &st); err != nil {
				return err
			}
			out[string(k)] = st
			return nil
		})
	})
	return out, err
}
