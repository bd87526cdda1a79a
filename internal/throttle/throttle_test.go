package throttle

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBucketsTakeAndGiveBack(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	b := New(Rate{Burst: 3, Every: time.Second}, c.now)
	if w, failed := b.Wait("a"); w != 0 || failed {
		t.Fatalf("Wait(a) before any failure = %v, %v; want 0, false", w, failed)
	}
	for range 3 {
		b.Fail("a")
	}
	if w, failed := b.Wait("a"); w != time.Second || !failed {
		t.Errorf("Wait(a) after 3 failures of a burst of 3 = %v, %v; want 1s, true", w, failed)
	}
	if w, _ := b.Wait("b"); w != 0 {
		t.Errorf("Wait(b) = %v, want 0: keys are independent", w)
	}
	c.t = c.t.Add(250 * time.Millisecond)
	if w, _ := b.Wait("a"); w != 750*time.Millisecond {
		t.Errorf("Wait(a) a quarter of a token later = %v, want 750ms", w)
	}
	c.t = c.t.Add(750 * time.Millisecond)
	if w, failed := b.Wait("a"); w != 0 || !failed {
		t.Errorf("Wait(a) one token later = %v, %v; want 0, true (it failed recently)", w, failed)
	}
	c.t = c.t.Add(time.Hour)
	if w, failed := b.Wait("a"); w != 0 || failed {
		t.Errorf("Wait(a) once full again = %v, %v; want 0, false", w, failed)
	}
	if n := len(b.keys); n != 0 {
		t.Errorf("buckets kept once full again = %d, want 0", n)
	}
}

func TestBucketsAreBounded(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	b := New(Rate{Burst: 2, Every: time.Minute}, c.now)
	b.maxKeys = 10
	for i := range 30 {
		b.Fail(fmt.Sprintf("k%d", i))
	}
	if n := len(b.keys); n != 11 {
		t.Errorf("keys kept after 30 failing keys with a bound of 10 = %d, want 10 and the overflow bucket", n)
	}
	if w, _ := b.Wait(overflowKey); w == 0 {
		t.Errorf("the overflow bucket, shared by 20 keys, has tokens left; want it empty")
	}
}

func TestOffThrottlesNothing(t *testing.T) {
	for _, r := range []Rate{{}, {Burst: 5}, {Every: time.Second}} {
		b := New(r, time.Now)
		for range 10 {
			b.Fail("a")
		}
		if w, failed := b.Wait("a"); w != 0 || failed || r.Enabled() {
			t.Errorf("%+v: Wait after 10 failures = %v, %v, enabled %v; want no throttle", r, w, failed, r.Enabled())
		}
	}
}

func TestRemoteHost(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.2:4000": "127.0.0.2", "[::1]:80": "::1", "pipe": "pipe"} {
		if got := RemoteHost(&http.Request{RemoteAddr: in}); got != want {
			t.Errorf("RemoteHost(%q) = %q, want %q", in, got, want)
		}
	}
}
