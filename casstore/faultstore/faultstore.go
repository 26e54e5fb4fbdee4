// Package faultstore wraps a casstore.Store and injects the faults that real
// object stores show: latency and jitter, clean failures, lost replies (the
// operation lands, the caller gets an error), slow replies, corrupted reads and
// a per-key minimum interval between writes (GCS and R2 allow about one write
// per second per object name). It also counts requests and bytes by operation
// kind, so tools can report what a workload cost.
//
// Every random decision is seeded. A decision is drawn from a generator keyed
// by (seed, operation, key, how many times that operation has run on that
// key), not from one shared stream, so the same seed gives the same faults for
// the same per-key history however goroutines interleave.
package faultstore

import (
	"context"
	"errors"
	"hash/fnv"
	"iter"
	"math/rand/v2"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objwal/objwal/casstore"
)

// The injected errors. They are transport-like: callers must treat them as
// "the outcome is unknown" for writes, as they would a 5xx or a timeout.
var (
	// ErrInjected is a clean failure: the operation did not reach the inner
	// store (like a 503 returned before the request was processed).
	ErrInjected = errors.New("faultstore: injected failure (503)")
	// ErrLostReply is returned after the operation ran on the inner store:
	// the write landed but the reply was lost.
	ErrLostReply = errors.New("faultstore: injected lost reply")
	// ErrThrottled is returned when a write comes sooner than the per-key
	// minimum write interval allows (like GCS's 429 for a hot object).
	ErrThrottled = errors.New("faultstore: per-key write rate exceeded (429)")
)

// Op is an operation kind of the Store interface.
type Op uint8

// The operation kinds. OpCount is the number of kinds.
const (
	OpGet Op = iota
	OpGetRange
	OpStat
	OpPut
	OpDelete
	OpList
	OpCount
)

var opNames = [OpCount]string{"get", "get-range", "stat", "put", "delete", "list"}

// String names the operation as casstore.OpError does.
func (o Op) String() string {
	if o < OpCount {
		return opNames[o]
	}
	return "unknown"
}

// Ops is a set of operation kinds; the zero value means every kind.
type Ops uint8

// OpsOf builds a set from kinds.
func OpsOf(kinds ...Op) Ops {
	var s Ops
	for _, k := range kinds {
		s |= 1 << k
	}
	return s
}

// Writes is the set {OpPut, OpDelete}; Reads is {OpGet, OpGetRange, OpStat, OpList}.
var (
	Writes = OpsOf(OpPut, OpDelete)
	Reads  = OpsOf(OpGet, OpGetRange, OpStat, OpList)
)

func (s Ops) has(o Op) bool { return s == 0 || s&(1<<o) != 0 }

// Rule injects faults into the operations it matches. Rates are
// probabilities in [0, 1] drawn independently per operation. Several rules
// may match one operation; each applies in order.
type Rule struct {
	// Ops limits the rule to these kinds (zero: all).
	Ops Ops
	// Key is a path.Match pattern over the key ("wal/seg/*/*"); empty
	// matches every key. For List it is matched against the prefix.
	Key string
	// Latency is added before every matched operation, plus a uniform
	// random extra in [0, Jitter).
	Latency, Jitter time.Duration
	// FailRate: fail before the operation reaches the inner store, with
	// FailErr (default ErrInjected). Set FailErr to casstore.ErrConflict to
	// model S3's 409 on conditional writes.
	FailRate float64
	FailErr  error
	// LostReplyRate: run the operation, then return ErrLostReply.
	LostReplyRate float64
	// SlowReplyRate: run the operation, then wait SlowReply before replying.
	SlowReplyRate float64
	SlowReply     time.Duration
	// CorruptRate: flip one random bit of the data a Get or GetRange
	// returns (the stored object is unchanged).
	CorruptRate float64
}

// Config configures a fault store.
type Config struct {
	// Seed makes every random decision reproducible.
	Seed uint64
	// Rules are the injected faults; nil injects none (the store only
	// counts).
	Rules []Rule
	// KeyWriteInterval is the minimum time between two writes (Put or
	// Delete) of one key; zero disables the limit.
	KeyWriteInterval time.Duration
	// KeyWriteKey limits KeyWriteInterval to keys matching this path.Match
	// pattern; empty applies it to every key.
	KeyWriteKey string
	// KeyWriteDelay makes a too-early write wait for its slot instead of
	// failing with ErrThrottled.
	KeyWriteDelay bool
}

// Store is the fault-injecting wrapper. It is safe for concurrent use.
type Store struct {
	inner casstore.Store
	cfg   Config

	rules atomic.Pointer[[]Rule]

	mu        sync.Mutex
	opCounts  map[opKey]uint64     // per (op, key) call count, for seeding
	lastWrite map[string]time.Time // per key, the slot of the last write

	stats [OpCount]opCounters
}

type opKey struct {
	op  Op
	key string
}

var _ casstore.Store = (*Store)(nil)

// New wraps inner with the faults of cfg.
func New(inner casstore.Store, cfg Config) *Store {
	s := &Store{
		inner:     inner,
		cfg:       cfg,
		opCounts:  map[opKey]uint64{},
		lastWrite: map[string]time.Time{},
	}
	s.SetRules(cfg.Rules)
	return s
}

// Inner returns the wrapped store (to read or damage objects without faults).
func (s *Store) Inner() casstore.Store { return s.inner }

// SetRules replaces the fault rules, for example to stop injecting faults at
// the end of a test so that a final check reads cleanly.
func (s *Store) SetRules(rules []Rule) {
	r := append([]Rule(nil), rules...)
	s.rules.Store(&r)
}

// plan is what the rules decided for one operation.
type plan struct {
	delay     time.Duration
	fail      error
	lostReply bool
	slowReply time.Duration
	corrupt   bool
	rng       *rand.Rand
}

// decide draws the faults for one call of op on key.
func (s *Store) decide(op Op, key string) plan {
	s.mu.Lock()
	n := s.opCounts[opKey{op, key}]
	s.opCounts[opKey{op, key}] = n + 1
	s.mu.Unlock()

	h := fnv.New64a()
	h.Write([]byte{byte(op)})
	h.Write([]byte(key))
	rng := rand.New(rand.NewPCG(s.cfg.Seed, h.Sum64()^(n*0x9E3779B97F4A7C15)))
	p := plan{rng: rng}
	for _, r := range *s.rules.Load() {
		if !r.Ops.has(op) || !matches(r.Key, key) {
			continue
		}
		p.delay += r.Latency
		if r.Jitter > 0 {
			p.delay += time.Duration(rng.Int64N(int64(r.Jitter)))
		}
		if p.fail == nil && r.FailRate > 0 && rng.Float64() < r.FailRate {
			p.fail = r.FailErr
			if p.fail == nil {
				p.fail = ErrInjected
			}
		}
		if r.LostReplyRate > 0 && rng.Float64() < r.LostReplyRate {
			p.lostReply = true
		}
		if r.SlowReplyRate > 0 && rng.Float64() < r.SlowReplyRate {
			p.slowReply += r.SlowReply
		}
		if r.CorruptRate > 0 && rng.Float64() < r.CorruptRate {
			p.corrupt = true
		}
	}
	return p
}

func matches(pattern, key string) bool {
	if pattern == "" {
		return true
	}
	ok, err := path.Match(pattern, key)
	return err == nil && ok
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// before applies the latency and the clean failure of p.
func (s *Store) before(ctx context.Context, op Op, key string, p plan) error {
	if err := sleep(ctx, p.delay); err != nil {
		s.stats[op].failures.Add(1)
		return casstore.Wrap(op.String(), key, err)
	}
	if p.fail != nil {
		s.stats[op].failures.Add(1)
		return casstore.Wrap(op.String(), key, p.fail)
	}
	return nil
}

// after applies the slow and lost replies of p to an operation that ran.
func (s *Store) after(ctx context.Context, op Op, key string, p plan, err error) error {
	if p.slowReply > 0 {
		if serr := sleep(ctx, p.slowReply); serr != nil && err == nil {
			err = serr
		}
	}
	if p.lostReply && err == nil {
		err = ErrLostReply
	}
	if err != nil {
		s.stats[op].failures.Add(1)
	}
	return casstore.Wrap(op.String(), key, err)
}

// throttle enforces the per-key write interval for a write to key.
func (s *Store) throttle(ctx context.Context, op Op, key string) error {
	iv := s.cfg.KeyWriteInterval
	if iv <= 0 || !matches(s.cfg.KeyWriteKey, key) {
		return nil
	}
	now := time.Now()
	s.mu.Lock()
	last, seen := s.lastWrite[key]
	slot := now
	if seen && now.Sub(last) < iv {
		if !s.cfg.KeyWriteDelay {
			s.mu.Unlock()
			s.stats[op].failures.Add(1)
			s.stats[op].throttled.Add(1)
			return casstore.Wrap(op.String(), key, ErrThrottled)
		}
		slot = last.Add(iv)
	}
	s.lastWrite[key] = slot
	s.mu.Unlock()
	if err := sleep(ctx, slot.Sub(now)); err != nil {
		return casstore.Wrap(op.String(), key, err)
	}
	return nil
}

// flipBit returns a copy of b with one random bit flipped.
func flipBit(b []byte, rng *rand.Rand) []byte {
	if len(b) == 0 {
		return b
	}
	c := append([]byte(nil), b...)
	i := rng.IntN(len(c) * 8)
	c[i/8] ^= 1 << (i % 8)
	return c
}

// Get implements casstore.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	s.stats[OpGet].requests.Add(1)
	p := s.decide(OpGet, key)
	if err := s.before(ctx, OpGet, key, p); err != nil {
		return nil, casstore.ObjectInfo{}, err
	}
	b, info, err := s.inner.Get(ctx, key)
	s.stats[OpGet].bytesRead.Add(int64(len(b)))
	if err = s.after(ctx, OpGet, key, p, err); err != nil {
		return nil, casstore.ObjectInfo{}, err
	}
	if p.corrupt {
		b = flipBit(b, p.rng)
	}
	return b, info, nil
}

// GetRange implements casstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	s.stats[OpGetRange].requests.Add(1)
	p := s.decide(OpGetRange, key)
	if err := s.before(ctx, OpGetRange, key, p); err != nil {
		return nil, err
	}
	b, err := s.inner.GetRange(ctx, key, off, n)
	s.stats[OpGetRange].bytesRead.Add(int64(len(b)))
	if err = s.after(ctx, OpGetRange, key, p, err); err != nil {
		return nil, err
	}
	if p.corrupt {
		b = flipBit(b, p.rng)
	}
	return b, nil
}

// Stat implements casstore.Store.
func (s *Store) Stat(ctx context.Context, key string) (casstore.ObjectInfo, error) {
	s.stats[OpStat].requests.Add(1)
	p := s.decide(OpStat, key)
	if err := s.before(ctx, OpStat, key, p); err != nil {
		return casstore.ObjectInfo{}, err
	}
	info, err := s.inner.Stat(ctx, key)
	if err = s.after(ctx, OpStat, key, p, err); err != nil {
		return casstore.ObjectInfo{}, err
	}
	return info, nil
}

// Put implements casstore.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	s.stats[OpPut].requests.Add(1)
	p := s.decide(OpPut, key)
	if err := s.before(ctx, OpPut, key, p); err != nil {
		return "", err
	}
	if err := s.throttle(ctx, OpPut, key); err != nil {
		return "", err
	}
	v, err := s.inner.Put(ctx, key, data, cond)
	if err == nil {
		s.stats[OpPut].bytesWritten.Add(int64(len(data)))
	}
	if err = s.after(ctx, OpPut, key, p, err); err != nil {
		return "", err
	}
	return v, nil
}

// Delete implements casstore.Store.
func (s *Store) Delete(ctx context.Context, key string, cond casstore.Condition) error {
	s.stats[OpDelete].requests.Add(1)
	p := s.decide(OpDelete, key)
	if err := s.before(ctx, OpDelete, key, p); err != nil {
		return err
	}
	if err := s.throttle(ctx, OpDelete, key); err != nil {
		return err
	}
	err := s.inner.Delete(ctx, key, cond)
	return s.after(ctx, OpDelete, key, p, err)
}

// List implements casstore.Store. Faults apply once, when iteration starts;
// a lost reply yields the error after the listing ran.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[casstore.ObjectInfo, error] {
	return func(yield func(casstore.ObjectInfo, error) bool) {
		s.stats[OpList].requests.Add(1)
		p := s.decide(OpList, prefix)
		if err := s.before(ctx, OpList, prefix, p); err != nil {
			yield(casstore.ObjectInfo{}, err)
			return
		}
		var infos []casstore.ObjectInfo
		var err error
		for info, e := range s.inner.List(ctx, prefix) {
			if e != nil {
				err = e
				break
			}
			infos = append(infos, info)
		}
		if err = s.after(ctx, OpList, prefix, p, err); err != nil {
			yield(casstore.ObjectInfo{}, err)
			return
		}
		for _, info := range infos {
			if !yield(info, nil) {
				return
			}
		}
	}
}

// Capabilities implements casstore.Store: those of the inner store.
func (s *Store) Capabilities() casstore.Capabilities { return s.inner.Capabilities() }

// Close implements casstore.Store by closing the inner store.
func (s *Store) Close() error { return s.inner.Close() }
