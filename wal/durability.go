package wal

import (
	"context"
	"sync"
)

// Durability is the handle of one Append group. It resolves exactly once:
// with the group's first sequence when the manifest commit that carries the
// group succeeds, or with an error.
type Durability struct {
	done chan struct{}
	seq  uint64
	err  error
}

func newDurability() *Durability { return &Durability{done: make(chan struct{})} }

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
	case <-d.done:
		return d.seq, d.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Done is closed when the group resolved; Wait then returns at once.
func (d *Durability) Done() <-chan struct{} { return d.done }

func (d *Durability) resolve(seq uint64, err error) {
	d.seq, d.err = seq, err
	close(d.done)
}

// budget is a byte-weighted semaphore whose waiters give up when their
// context ends or the producer stops. It is not FIFO: a release wakes every
// waiter and whoever fits goes.
type budget struct {
	mu      sync.Mutex
	used    int64
	max     int64
	changed chan struct{} // closed and replaced on every release
}

func newBudget(max int64) *budget { return &budget{max: max, changed: make(chan struct{})} }

// acquire takes n bytes, blocking while they do not fit. It returns ctx's
// error, or errStopped when stop is closed first.
func (b *budget) acquire(ctx context.Context, n int64, stop <-chan struct{}) error {
	for {
		b.mu.Lock()
		if b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errStopped
		}
	}
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// inUse reports the bytes currently held.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
