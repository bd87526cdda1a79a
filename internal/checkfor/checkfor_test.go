package checkfor

import (
	"errors"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Until(t, time.Second, "three looks", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("looked %d times, want 3", n)
	}
	m := 0
	NoError(t, time.Second, func() error {
		if m++; m < 2 {
			return errors.New("not yet")
		}
		return nil
	})
	if m != 2 {
		t.Errorf("NoError looked %d times, want 2", m)
	}
}

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func TestUntilFailsAfterTheTimeout(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() { recover() }()
		Until(r, 20*time.Millisecond, "never", func() bool { return false })
	}()
	if r.failed == "" {
		t.Error("Until with a condition that never holds did not fail the test")
	}
}
