// Package checkfor is how tests wait for asynchronous work: it polls a
// condition every few milliseconds until it holds or a timeout passes, and
// fails the test then. No test sleeps for a fixed time instead. (After
// nats-server's checkFor.)
package checkfor

import (
	"testing"
	"time"
)

// interval is how long to wait between two looks.
const interval = 5 * time.Millisecond

// Until polls cond until it returns true, failing t with "timed out after
// <timeout> waiting for <what>" when timeout passes first.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}

// NoError polls cond until it returns nil, failing t with cond's last error
// when timeout passes first.
func NoError(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}
