package faultstore

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// opCounters are the live counters of one operation kind.
type opCounters struct {
	requests     atomic.Int64
	failures     atomic.Int64
	throttled    atomic.Int64
	bytesRead    atomic.Int64
	bytesWritten atomic.Int64
}

// OpStats counts the calls of one operation kind.
type OpStats struct {
	// Requests is the number of calls.
	Requests int64
	// Errors is the number of calls that returned an error, injected or
	// not (a Get of a missing key counts).
	Errors int64
	// Throttled is the number of writes refused by the per-key interval.
	Throttled int64
	// BytesRead is the number of object bytes returned by the inner store
	// (Get, GetRange), including replies that were then lost.
	BytesRead int64
	// BytesWritten is the number of object bytes the inner store accepted
	// (Put).
	BytesWritten int64
}

// Stats is a snapshot of the counters, indexed by Op.
type Stats [OpCount]OpStats

// Stats returns a snapshot of the request and byte counters.
func (s *Store) Stats() Stats {
	var st Stats
	for i := range st {
		c := &s.stats[i]
		st[i] = OpStats{
			Requests:     c.requests.Load(),
			Errors:       c.failures.Load(),
			Throttled:    c.throttled.Load(),
			BytesRead:    c.bytesRead.Load(),
			BytesWritten: c.bytesWritten.Load(),
		}
	}
	return st
}

// ResetStats sets every counter to zero (for example between benchmark
// phases).
func (s *Store) ResetStats() {
	for i := range s.stats {
		c := &s.stats[i]
		c.requests.Store(0)
		c.failures.Store(0)
		c.throttled.Store(0)
		c.bytesRead.Store(0)
		c.bytesWritten.Store(0)
	}
}

// Total sums the counters of every kind.
func (st Stats) Total() OpStats {
	var t OpStats
	for _, o := range st {
		t.Requests += o.Requests
		t.Errors += o.Errors
		t.Throttled += o.Throttled
		t.BytesRead += o.BytesRead
		t.BytesWritten += o.BytesWritten
	}
	return t
}

// Sub returns st minus earlier, the cost of what ran in between.
func (st Stats) Sub(earlier Stats) Stats {
	var d Stats
	for i := range st {
		a, b := st[i], earlier[i]
		d[i] = OpStats{
			Requests:     a.Requests - b.Requests,
			Errors:       a.Errors - b.Errors,
			Throttled:    a.Throttled - b.Throttled,
			BytesRead:    a.BytesRead - b.BytesRead,
			BytesWritten: a.BytesWritten - b.BytesWritten,
		}
	}
	return d
}

// String renders the kinds that saw requests, one per line:
// "put  requests=12 errors=0 read=0 written=4096".
func (st Stats) String() string {
	var sb strings.Builder
	for i, o := range st {
		if o.Requests == 0 {
			continue
		}
		fmt.Fprintf(&sb, "%-9s requests=%d errors=%d throttled=%d read=%d written=%d\n",
			Op(i), o.Requests, o.Errors, o.Throttled, o.BytesRead, o.BytesWritten)
	}
	return sb.String()
}
