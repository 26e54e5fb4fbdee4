package wal

import "context"

// Durability is the handle of one Append group. It resolves exactly once:
// with the group's first sequence when the manifest commit that carries the
// group succeeds, or with an error.
//
// Resolution is signalled per segment, not per group: a group waits for its
// flush to be sealed (one channel per flush), then for its segment's commit
// (one channel per segment, which commits atomically). That keeps tiny
// Appends from paying for a channel each.
type Durability struct {
	flush *flushSignal
	seg   *segment // set before flush.sealed closes
	seq   uint64   // set before seg.done closes
	err   error
}

// flushSignal is closed when a flush has assigned its groups to segments.
type flushSignal struct{ sealed chan struct{} }

func newFlushSignal() *flushSignal { return &flushSignal{sealed: make(chan struct{})} }

// Wait blocks until the group is durably committed and returns the sequence
// of its first record; the group's records have consecutive sequences from
// there. (An empty group returns the sequence the next record took.)
//
// Errors are truthful about the records' fate:
//   - ErrOutcomeUnknown: they may or may not be in the log;
//   - ErrFenced, ErrHalted (which also wraps the cause), ErrClosed: they are
//     not in the log and never will be;
//   - ctx's error: Wait gave up; the group's fate is still pending and a
//     later Wait can learn it.
func (d *Durability) Wait(ctx context.Context) (uint64, error) {
	select {
	case <-d.flush.sealed:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case <-d.seg.done:
		return d.seq, d.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Resolved reports, without blocking, whether the group has resolved (Wait
// would return at once with its result).
func (d *Durability) Resolved() bool {
	select {
	case <-d.flush.sealed:
	default:
		return false
	}
	select {
	case <-d.seg.done:
		return true
	default:
		return false
	}
}
