package ledger

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Storage is where the stream keeps its messages.
type Storage string

// Storage kinds. Memory keeps every message on the Go heap: right for tests,
// not for serve.
const (
	FileStorage   Storage = "file"
	MemoryStorage Storage = "memory"
)

// Expectation is how Append guards against writing on stale state.
type Expectation string

// Expectation modes.
const (
	// ExpectAuto picks ExpectProject when the server is 2.11 or later and
	// ExpectStream otherwise.
	ExpectAuto Expectation = "auto"
	// ExpectProject checks the last sequence on "<prefix>.<project>.>"
	// (Nats-Expected-Last-Subject-Sequence with the -Subject header, server
	// 2.11+): projects never contend.
	ExpectProject Expectation = "project"
	// ExpectStream checks the stream's last sequence
	// (Nats-Expected-Last-Sequence): correct on any server, but every append
	// contends with every other; the Store tracks the stream head and retries
	// internally when only another project moved it.
	ExpectStream Expectation = "stream"
)

// Config configures a Store.
type Config struct {
	// Stream is the JetStream stream name. Default "TURNLEDGER".
	Stream string
	// Prefix is the first subject token: events go to
	// "<prefix>.<project>.<aggregate>.<id>". Default "tl".
	Prefix string
	// Storage of the stream, used when Open creates it. Default FileStorage.
	Storage Storage
	// Replicas of the stream, 1 to 5, used when Open creates the stream.
	// An existing stream is never changed: Store.Status reports its own.
	// Default 1.
	Replicas int
	// DuplicateWindow is the stream's duplicate-tracking window. Default 2m.
	DuplicateWindow time.Duration
	// Expect is the optimistic-concurrency mode. Default ExpectAuto.
	Expect Expectation
	// BatchSize is the most events Follow and ReadAll hand to fn at once.
	// Default 1000.
	BatchSize int
	// FollowLinger is how long Follow, having handed over every event it
	// holds, waits for the event of an append this Store has in flight
	// before it tells fn it has caught up (an empty batch: the projector
	// commits then, or once its commit interval has passed). With none in
	// flight it tells fn at once, so a lone client waits for nothing. 0
	// tells fn whenever nothing is ready. Default 500µs.
	FollowLinger time.Duration
	// StreamConflictRetries bounds the internal retries of Append in
	// ExpectStream mode when another project moved the stream head. Default 64.
	StreamConflictRetries int
	// AttemptTimeout bounds one request to JetStream (a publish, a message
	// get, a stream info, a consumer create). A stream without a leader does
	// not answer at all, so a short bound lets the Store ask again soon: a
	// request sent just before a new leader is elected waits out its bound,
	// so the bound is also what an election costs beyond itself, and a
	// shorter bound lets commands resume sooner after a new stream leader
	// is elected. Default 500ms.
	AttemptTimeout time.Duration
	// RetryFor bounds how long the Store keeps asking while JetStream is
	// unavailable (a leader election, a lost leader, a reconnect) before it
	// gives up with a kernel.Unavailable error. Default 15s: a graceful
	// leader hand-off takes well under a second, an election after a crashed
	// leader 4 to 9 seconds in nats-server 2.15.
	RetryFor time.Duration
	// AllowPurge makes Open create the stream without deny_purge, so that
	// a retention run can purge it below its horizon once archived
	// (PurgeBelow). JetStream cannot lift deny_purge from an existing
	// stream. Default false: the stream is append-only.
	AllowPurge bool
}

// DefaultConfig returns the configuration serve uses.
func DefaultConfig() Config {
	return Config{
		Stream:                "TURNLEDGER",
		Prefix:                "tl",
		Storage:               FileStorage,
		Replicas:              1,
		DuplicateWindow:       2 * time.Minute,
		Expect:                ExpectAuto,
		BatchSize:             1000,
		FollowLinger:          500 * time.Microsecond,
		StreamConflictRetries: 64,
		AttemptTimeout:        500 * time.Millisecond,
		RetryFor:              15 * time.Second,
	}
}

// tokenPattern is what a stream name or subject prefix may look like.
var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate reports every problem of c, joined.
func (c Config) Validate() error {
	var errs []error
	if !tokenPattern.MatchString(c.Stream) {
		errs = append(errs, fmt.Errorf("ledger: stream name %q must be 1 to 64 letters, digits, '_' or '-'", c.Stream))
	}
	if !tokenPattern.MatchString(c.Prefix) {
		errs = append(errs, fmt.Errorf("ledger: subject prefix %q must be 1 to 64 letters, digits, '_' or '-'", c.Prefix))
	}
	switch c.Storage {
	case FileStorage, MemoryStorage:
	default:
		errs = append(errs, fmt.Errorf("ledger: storage %q must be %q or %q", c.Storage, FileStorage, MemoryStorage))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("ledger: replicas %d must be 1 to 5", c.Replicas))
	}
	if c.DuplicateWindow < 0 {
		errs = append(errs, fmt.Errorf("ledger: duplicate window %v must not be negative", c.DuplicateWindow))
	}
	switch c.Expect {
	case ExpectAuto, ExpectProject, ExpectStream:
	default:
		errs = append(errs, fmt.Errorf("ledger: expectation %q must be %q, %q or %q", c.Expect, ExpectAuto, ExpectProject, ExpectStream))
	}
	if c.BatchSize < 1 || c.BatchSize > 100_000 {
		errs = append(errs, fmt.Errorf("ledger: batch size %d must be 1 to 100000", c.BatchSize))
	}
	if c.FollowLinger < 0 || c.FollowLinger > time.Second {
		errs = append(errs, fmt.Errorf("ledger: follow linger %v must be 0 to 1s", c.FollowLinger))
	}
	if c.StreamConflictRetries < 0 {
		errs = append(errs, fmt.Errorf("ledger: stream conflict retries %d must not be negative", c.StreamConflictRetries))
	}
	if c.AttemptTimeout <= 0 || c.RetryFor < c.AttemptTimeout {
		errs = append(errs, fmt.Errorf("ledger: attempt timeout %v must be positive and at most the retry bound %v", c.AttemptTimeout, c.RetryFor))
	}
	return errors.Join(errs...)
}
