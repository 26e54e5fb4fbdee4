package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/format"
)

// Replica tails a log read-only and hands each committed record, in
// sequence order, to an Applier. Replicas are not fenced and never write to
// the store. Create one with NewReplica; drive it with Run or Poll.
type Replica struct {
	store casstore.Store
	app   Applier
	cfg   ReplicaConfig
	log   *slog.Logger
	met   replicaMetrics

	mu        sync.Mutex // serialises Poll
	next      uint64     // next sequence to apply
	started   bool       // next is loaded from the cursor store
	explicit  bool       // next came from a saved cursor or StartAt > 0
	man       *format.Manifest
	version   casstore.Version
	lastSaved time.Time

	nextPub  atomic.Uint64
	lag      atomic.Uint64
	applied  atomic.Int64
	fetched  atomic.Int64
	segments atomic.Int64
}

// NewReplica returns a replica of the log at cfg.ManifestPath that applies
// records with app. It does no I/O until Poll or Run.
func NewReplica(store casstore.Store, app Applier, cfg ReplicaConfig) *Replica {
	cfg = cfg.withDefaults()
	met, err := newReplicaMetrics(cfg.Meter)
	if err != nil {
		cfg.Logger.Warn("wal: some replica metrics are unavailable", "err", err)
	}
	return &Replica{store: store, app: app, cfg: cfg, log: cfg.Logger, met: met}
}

// Run polls until ctx ends and then returns nil. Store errors are retried
// with backoff (for RetryWindow, if set); it returns at once on corruption
// (ErrCorrupt), an applier error (ErrApply), ErrLogTruncated, or a store
// error no retry can fix. Between polls that found nothing it waits
// PollInterval.
func (r *Replica) Run(ctx context.Context) error {
	bo := newBackoff(r.cfg.RetryWindow)
	for {
		n, err := r.Poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !r.retryable(err) {
				r.log.Error("wal: replica stopped", "manifest", r.cfg.ManifestPath, "err", err)
				return err
			}
			r.log.Warn("wal: replica poll failed, retrying", "manifest", r.cfg.ManifestPath, "err", err)
			if n > 0 {
				bo.reset() // progress was made: this is not one long outage
			}
			if !bo.wait(ctx) {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			continue
		}
		bo.reset()
		if n > 0 {
			continue // more may have been committed meanwhile
		}
		t := time.NewTimer(r.cfg.PollInterval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

func (r *Replica) retryable(err error) bool {
	switch {
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrApply), errors.Is(err, ErrLogTruncated):
		return false
	case errors.Is(err, casstore.ErrNotFound):
		return true // a referenced segment not visible yet: wait for it
	}
	return transient(err)
}

// Poll applies every record committed since the cursor and returns how many
// it applied. It reads the manifest only when its version changed (one Stat
// otherwise), fetches up to Prefetch segments in parallel, applies their
// records strictly in order, and saves the cursor after applying. On an
// applier error it saves the cursor at the failed record and returns an
// error wrapping ErrApply; on a damaged object it applies nothing from it
// and returns ErrCorrupt.
func (r *Replica) Poll(ctx context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	defer func() { r.met.poll.Record(context.Background(), since(start)) }()
	if err := r.startCursor(ctx); err != nil {
		return 0, err
	}
	if err := r.refresh(ctx); err != nil {
		return 0, err
	}
	entries, err := r.pendingEntries()
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	n, err := r.applyEntries(ctx, entries)
	if serr := r.saveCursor(ctx); err == nil {
		err = serr
	}
	r.publish()
	return n, err
}

// startCursor loads the cursor on the first Poll.
func (r *Replica) startCursor(ctx context.Context) error {
	if r.started {
		return nil
	}
	next, ok, err := r.cfg.Cursor.Load(ctx)
	if err != nil {
		return err
	}
	if ok {
		r.next, r.explicit = next, true
	} else {
		r.next, r.explicit = r.cfg.StartAt, r.cfg.StartAt > 0
	}
	r.started = true
	r.lastSaved = time.Now()
	r.publish()
	return nil
}

// refresh loads the manifest if its version changed since the last load.
func (r *Replica) refresh(ctx context.Context) error {
	key := r.cfg.ManifestPath
	if r.man != nil {
		info, err := statObject(ctx, r.store, key, r.cfg.RequestTimeout)
		if errors.Is(err, casstore.ErrNotFound) && r.version == "" {
			return nil // still no log: nothing new, and nothing wrong
		}
		if err != nil {
			return err
		}
		if info.Version == r.version {
			return nil
		}
	}
	lm, err := loadManifest(ctx, r.store, key, r.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	r.man, r.version = lm.m, lm.version
	return nil
}

// pendingEntries lists the entries that hold sequences at or after the
// cursor.
func (r *Replica) pendingEntries() ([]format.Entry, error) {
	var entries []format.Entry
	for e := range r.man.EntriesFrom(r.next) {
		entries = append(entries, e)
	}
	if len(entries) > 0 && entries[0].Sequence > r.next {
		if r.explicit {
			return nil, fmt.Errorf("%w: manifest %q starts at %d, cursor is %d", ErrLogTruncated, r.cfg.ManifestPath, entries[0].Sequence, r.next)
		}
		r.next = entries[0].Sequence // a fresh replica starts where the log starts
	}
	return entries, nil
}

// fetched is one prefetched segment.
type fetchedSegment struct {
	records [][]byte
	err     error
}

// applyEntries fetches segments with up to Prefetch in flight and applies
// them in order. Every fetch goroutine has ended when it returns.
func (r *Replica) applyEntries(ctx context.Context, entries []format.Entry) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	results := make([]chan fetchedSegment, len(entries))
	launched := 0
	applied := 0
	for i, e := range entries {
		for launched < len(entries) && launched < i+r.cfg.Prefetch {
			ch := make(chan fetchedSegment, 1)
			results[launched] = ch
			wg.Add(1)
			go func(e format.Entry) {
				defer wg.Done()
				recs, err := r.fetch(ctx, e)
				ch <- fetchedSegment{recs, err}
			}(entries[launched])
			launched++
		}
		var f fetchedSegment
		select {
		case f = <-results[i]:
		case <-ctx.Done():
			return applied, ctx.Err()
		}
		results[i] = nil
		if f.err != nil {
			return applied, f.err
		}
		n, err := r.applySegment(ctx, e, f.records)
		applied += n
		if err != nil {
			return applied, err
		}
		if time.Since(r.lastSaved) > time.Second {
			if err := r.saveCursor(ctx); err != nil {
				return applied, err
			}
		}
	}
	return applied, nil
}

// fetch reads and decodes the segment of e (see readConsistent: only
// damage that two reads agree on is ErrCorrupt, and nothing of such a
// segment is applied). Transient read errors are retried a few times here,
// so one flaky GET does not restart a whole catch-up.
func (r *Replica) fetch(ctx context.Context, e format.Entry) ([][]byte, error) {
	var recs [][]byte
	decode := func(b []byte, _ casstore.ObjectInfo) error {
		r.fetched.Add(int64(len(b)))
		r.met.fetched.Add(context.Background(), int64(len(b)))
		seg, err := format.DecodeSegment(b)
		if err == nil && e.Count > 0 && len(seg.Records) != int(e.Count) {
			err = fmt.Errorf("%w: segment holds %d records, its manifest entry says %d", format.ErrCorrupt, len(seg.Records), e.Count)
		}
		if err == nil {
			recs = seg.Records
		}
		return err
	}
	bo := newBackoff(0)
	for attempt := 0; ; attempt++ {
		err := readConsistent(ctx, r.store, "segment", e.Location, r.cfg.RequestTimeout, decode)
		if err == nil || attempt == 3 || !r.retryable(err) || !bo.wait(ctx) {
			return recs, err
		}
	}
}

// applySegment applies the records of e at or after the cursor, moving the
// cursor past each one. Metadata items are walked alongside the records, so
// the cost is linear in records plus groups.
func (r *Replica) applySegment(ctx context.Context, e format.Entry, records [][]byte) (int, error) {
	if e.Count == 0 && e.Sequence < r.next {
		return 0, nil // a legacy entry is applied whole or not at all
	}
	md := e.Metadata
	j := -1 // index of the metadata item covering record i
	n := 0
	for i, data := range records {
		for j+1 < len(md) && int64(md[j+1].StartIndex) <= int64(i) {
			j++
		}
		seq := e.RecordSequence(i)
		if e.Count > 0 && seq < r.next {
			continue // applied before a restart or an applier error
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		rec := Record{Sequence: seq, Data: data}
		if j >= 0 {
			rec.GroupMeta = md[j].Payload
		}
		if err := r.app.Apply(ctx, rec); err != nil {
			if e.Count > 0 {
				r.next = seq
			}
			return n, fmt.Errorf("%w: record %d of segment %q: %w", ErrApply, seq, e.Location, err)
		}
		n++
		r.applied.Add(1)
		r.met.applied.Add(context.Background(), 1)
		if e.Count > 0 {
			r.next = seq + 1
		}
	}
	r.next = max(r.next, e.End())
	r.segments.Add(1)
	return n, nil
}

func (r *Replica) saveCursor(ctx context.Context) error {
	if err := r.cfg.Cursor.Save(ctx, r.next); err != nil {
		return err
	}
	r.lastSaved = time.Now()
	return nil
}

// publish makes the position visible to Next and Lag and the lag gauge.
func (r *Replica) publish() {
	r.nextPub.Store(r.next)
	if r.man != nil {
		lag := uint64(0)
		if end := r.man.NextSequence(); end > r.next {
			lag = end - r.next
		}
		r.lag.Store(lag)
		r.met.lag.Record(context.Background(), int64(lag))
	}
}

// Next returns the next sequence the replica will apply (its cursor).
func (r *Replica) Next() uint64 { return r.nextPub.Load() }

// ReplicaStats is a snapshot of a replica's counters.
type ReplicaStats struct {
	// Next is the cursor: the next sequence to apply.
	Next uint64
	// Lag is the records committed but not applied, as of the last manifest
	// read.
	Lag uint64
	// Applied counts records applied (re-deliveries included); Segments the
	// segments completed; FetchedBytes the segment bytes read.
	Applied, Segments, FetchedBytes int64
}

// Stats returns a snapshot of the replica's counters.
func (r *Replica) Stats() ReplicaStats {
	return ReplicaStats{Next: r.nextPub.Load(), Lag: r.lag.Load(), Applied: r.applied.Load(),
		Segments: r.segments.Load(), FetchedBytes: r.fetched.Load()}
}
