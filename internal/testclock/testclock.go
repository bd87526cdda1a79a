// Package testclock is the clock tests inject into the engine, the
// projections and the API when they need time to pass without sleeping: the
// real time moved by an offset the test sets or advances, safe for
// concurrent use.
package testclock

import (
	"sync/atomic"
	"time"
)

// Offset is the real clock plus an offset; its zero value is the real clock.
type Offset struct{ off atomic.Int64 }

// Now returns the real time plus the offset.
func (c *Offset) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// Advance moves the clock forward by d.
func (c *Offset) Advance(d time.Duration) { c.off.Add(int64(d)) }

// Set makes the offset d (negative: the clock is behind the real time).
func (c *Offset) Set(d time.Duration) { c.off.Store(int64(d)) }
