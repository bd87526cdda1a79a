package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
)

// secretKeyEnv names the environment variable that gives the engine's secret
// key (base64, at least 16 bytes): the instances of one deployment that share
// a NATS server should share it, so that a retry answered by another instance
// gets the same claim token back.
const secretKeyEnv = "TURNLEDGER_SECRET_KEY"

// secretKey returns the key from which the engine derives the secrets a
// retried request must answer again (claim and credential tokens, join
// codes): $TURNLEDGER_SECRET_KEY, or dir/secret-key, made on first start.
// Whoever holds it can re-derive those secrets from the ledger's ids: keep it
// like the admin token.
func secretKey(dir string) ([]byte, error) {
	if v := os.Getenv(secretKeyEnv); v != "" {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) < 16 {
			return nil, fmt.Errorf("%s must be base64 of at least 16 bytes", secretKeyEnv)
		}
		return b, nil
	}
	path := filepath.Join(dir, "secret-key")
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := base64.StdEncoding.DecodeString(string(bytes.TrimRight(b, "\r\n ")))
		if err != nil || len(k) < 16 {
			return nil, fmt.Errorf("%s must hold base64 of at least 16 bytes", path)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	k := make([]byte, 32)
	if _, err := io.ReadFull(rand.Reader, k); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write secret key: %w", err)
	}
	return k, nil
}

// projectionsInUse is the refusal of serve and replay to work on a data
// directory whose projection file another process holds: a healthy file of
// a running serve is in use, never damaged, and is left alone.
func projectionsInUse(dataDir string) error {
	return fmt.Errorf("%s is in use (is turnledger serve or replay running on %s? stop it first, or give this one another --data)",
		filepath.Join(dataDir, "projections.db"), dataDir)
}

// checkProjectionsFree refuses early, before NATS is touched, when another
// process holds the projection file of dataDir. openProjections refuses
// too, should one take it in between.
func checkProjectionsFree(dataDir string) error {
	locked, err := projection.Locked(filepath.Join(dataDir, "projections.db"))
	if err != nil {
		return err
	} else if locked {
		return projectionsInUse(dataDir)
	}
	return nil
}

// openProjections opens the projection file, checking it first: a damaged
// one is moved aside and rebuilt from the ledger by the projector, with a
// WARN, and /readyz answers 503 until the rebuild has reached the ledger's
// head of the moment. A file another process holds is neither checked nor
// moved: serve refuses to start.
func (s *Service) openProjections(path string) error {
	cfg := s.cfg.Limits.projection()
	if s.cfg.Now != nil {
		cfg.Now = s.cfg.Now
	}
	if s.cfg.ProjectionSync == ProjectionSyncClose {
		if cfg.Boot = projection.BootID(); cfg.Boot == "" {
			s.cfg.Logger.Info("the system does not tell its boot id: the projection file is fsynced at every commit")
		}
	}
	st, healed, err := projection.OpenHealing(path, cfg)
	if errors.Is(err, projection.ErrInUse) {
		return projectionsInUse(s.cfg.DataDir)
	} else if err != nil {
		return err
	}
	s.store = st
	if healed != nil {
		s.healed = true
		s.cfg.Logger.Warn("the projection file is damaged: moved aside, rebuilding it from the ledger",
			"moved_to", healed.MovedTo, "reason", healed.Reason)
	}
	return nil
}

// readyProjections adds the projection file's own health to /readyz: a read
// that found it damaged marks it failing, and a rebuild after healing keeps
// the service not ready until it is done.
func (s *Service) readyProjections(r *Readiness) {
	if f := s.store.ReadFailure(); f != "" {
		r.Status, r.Projections.Failing, r.Projections.LastError = "not_ready", true, f
	}
	if s.healed && s.store.Checkpoint() < s.healUntil {
		r.Status, r.Projections.Rebuilding = "not_ready", true
	}
}

// The values of Config.ProjectionSync (serve's --projection-sync).
const (
	ProjectionSyncClose  = "close"  // fsync at shutdown; rebuilt after a crash of the machine
	ProjectionSyncCommit = "commit" // fsync every commit
)

// ParseProjectionSync reads a ProjectionSync value.
func ParseProjectionSync(v string) (string, error) {
	switch v {
	case ProjectionSyncClose, ProjectionSyncCommit:
		return v, nil
	}
	return "", fmt.Errorf("must be %q or %q", ProjectionSyncClose, ProjectionSyncCommit)
}

// ParseSync reads a Sync value.
func ParseSync(v string) (ledger.Sync, error) {
	switch s := ledger.Sync(v); s {
	case ledger.SyncAlways, ledger.SyncInterval:
		return s, nil
	}
	return "", fmt.Errorf("must be %q or %q", ledger.SyncAlways, ledger.SyncInterval)
}
