package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// streamConfig is the stream Open creates when there is none; atomic
// allows atomic batch publish (AppendBatch), on servers that have it.
func streamConfig(cfg Config, atomic bool) jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if cfg.Storage == MemoryStorage {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "turnledger events",
		Subjects:    []string{cfg.Prefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew, // never drop an event silently, should limits ever be set
		Storage:     storage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.DuplicateWindow,
		DenyDelete:  true, // the ledger is append-only
		// Purged only below an archived horizon (purge.go), when allowed.
		DenyPurge:   !cfg.AllowPurge,
		AllowDirect: false, // direct get cannot take a wildcard last-by-subject; LastSeq needs it
		// AppendBatch: the events of one command that changes several
		// Turns are stored all or none.
		AllowAtomicPublish: atomic,
	}
}

// openStream returns the stream named in cfg, creating it when there is
// none (allowing atomic batches where the server has them: AppendBatch). It
// never updates an existing stream: an operator (or another instance) chose
// its replicas and storage, and changing them on start would move the data
// of a running ledger under its other users. A stream the ledger cannot work
// on is an error that says what to change; one without atomic batches works,
// and AppendBatch on it says how to allow them.
func openStream(ctx context.Context, js jetstream.JetStream, cfg Config, atomic bool) (jetstream.Stream, error) {
	var st jetstream.Stream
	get := func() error {
		return retry(ctx, cfg, "stream info", func(ctx context.Context, _ bool) error {
			var err error
			st, err = js.Stream(ctx, cfg.Stream)
			return err
		})
	}
	err := get()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateStream(ctx, streamConfig(cfg, atomic))
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = get() // another instance created it first, differently
		} else if err != nil {
			return nil, fmt.Errorf("ledger: create stream %s (%d replicas, %s storage): %w", cfg.Stream, cfg.Replicas, cfg.Storage, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: stream %s: %w", cfg.Stream, err)
	}
	if err := usable(st.CachedInfo().Config, cfg); err != nil {
		return nil, err
	}
	return st, nil
}

// usable reports why the ledger cannot work on an existing stream of
// configuration c, joined, or nil.
func usable(c jetstream.StreamConfig, cfg Config) error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ledger: the existing stream %s "+format, append([]any{c.Name}, args...)...))
	}
	want := cfg.Prefix + ".>"
	covered := false
	for _, subj := range c.Subjects {
		covered = covered || subjectCovers(subj, want)
	}
	if !covered {
		fail("has subjects %q, none of which takes %q: add %q to its subjects or choose another stream name", c.Subjects, want, want)
	}
	if c.Retention != jetstream.LimitsPolicy {
		fail("has %s retention, which deletes events once consumed: the ledger needs limits retention (recreate the stream)", c.Retention)
	}
	if c.MaxAge > 0 || c.MaxMsgsPerSubject > 0 || (c.Discard == jetstream.DiscardOld && (c.MaxMsgs > 0 || c.MaxBytes > 0)) {
		fail("has limits (max age %v, max messages per subject %d, max messages %d, max bytes %d with discard %s) that would drop events: remove them", c.MaxAge, c.MaxMsgsPerSubject, c.MaxMsgs, c.MaxBytes, c.Discard)
	}
	if c.AllowDirect || c.MirrorDirect {
		fail("allows direct get, which cannot answer the ledger's per-project look-ups: turn it off (nats stream edit %s --no-allow-direct)", c.Name)
	}
	if c.Mirror != nil {
		fail("is a mirror, which takes no appends")
	}
	if c.Sealed {
		fail("is sealed, which takes no appends")
	}
	return errors.Join(errs...)
}

// subjectCovers reports whether every subject that matches want also
// matches the stream subject pattern subj.
func subjectCovers(subj, want string) bool {
	s, w := strings.Split(subj, "."), strings.Split(want, ".")
	for i, tok := range w {
		if i >= len(s) {
			return false
		}
		switch {
		case s[i] == ">":
			return true
		case tok == ">" || tok == "*":
			if s[i] != "*" || tok == ">" {
				return false
			}
		case s[i] != "*" && s[i] != tok:
			return false
		}
	}
	return len(s) == len(w)
}

// info is the stream's info, retried while JetStream is unavailable.
func (s *Store) info(ctx context.Context) (*jetstream.StreamInfo, error) {
	var info *jetstream.StreamInfo
	err := s.retry(ctx, "stream info", func(ctx context.Context, _ bool) error {
		var err error
		info, err = s.stream.Info(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: stream info: %w", err)
	}
	return info, nil
}

// StreamStatus is what the stream says of itself: for /readyz.
type StreamStatus struct {
	// Head is the last ledger_seq, 0 when the stream is empty.
	Head uint64 `json:"ledger_head"`
	// Replicas and Storage are the stream's own, which are Config's only
	// when Open created it.
	Replicas int     `json:"replicas"`
	Storage  Storage `json:"storage"`
	// Leader names the server that leads the stream ("" outside a cluster);
	// Current counts the replicas, leader included, that are up to date.
	Leader  string `json:"leader,omitempty"`
	Current int    `json:"replicas_current"`
}

// Status reads the stream's status: one stream info.
func (s *Store) Status(ctx context.Context) (StreamStatus, error) {
	info, err := s.info(ctx)
	if err != nil {
		return StreamStatus{}, err
	}
	st := StreamStatus{Head: info.State.LastSeq, Replicas: info.Config.Replicas, Storage: FileStorage, Current: 1}
	if info.Config.Storage == jetstream.MemoryStorage {
		st.Storage = MemoryStorage
	}
	if st.Replicas == 0 {
		st.Replicas = 1
	}
	if c := info.Cluster; c != nil {
		st.Leader = c.Leader
		if c.Leader == "" {
			st.Current = 0
		}
		for _, p := range c.Replicas {
			if p.Current && !p.Offline {
				st.Current++
			}
		}
	}
	return st, nil
}
