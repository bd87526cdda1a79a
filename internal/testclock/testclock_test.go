package testclock

import (
	"testing"
	"time"
)

func TestOffset(t *testing.T) {
	var c Offset
	if d := time.Since(c.Now()); d < 0 || d > time.Minute {
		t.Fatalf("zero Offset: Now() is %v from the real time, want about 0", d)
	}
	c.Advance(time.Hour)
	c.Advance(time.Hour)
	if d := c.Now().Sub(time.Now()); d < 2*time.Hour-time.Minute || d > 2*time.Hour {
		t.Errorf("after Advance(1h) twice: Now() - real = %v, want about 2h", d)
	}
	c.Set(-2 * time.Minute)
	if d := time.Since(c.Now()); d < 2*time.Minute || d > 3*time.Minute {
		t.Errorf("after Set(-2m): real - Now() = %v, want about 2m", d)
	}
}
