package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/format"
)

// committer is the persistent, single goroutine that turns uploaded segments
// into manifest entries. It commits strictly in ordinal order, and each CAS
// carries every segment that is ready at the head of the queue (up to
// ManifestAppendBatchSize), so while one CAS is in flight the next flush's
// uploads proceed and join the next CAS.
//
// It is the only writer of the manifest after the claim, so it knows the
// version it last wrote and commits with IfMatch on it directly; it reloads
// only when that fails (one segment PUT + one CAS is the latency floor).
type committer struct {
	p *Producer

	mu        sync.Mutex
	queue     []*segment // sealed, unresolved, in ordinal order
	uploaded  map[*segment]bool
	allSealed bool
	wake      chan struct{}

	// Owned by the committer goroutine; read by stats under mu.
	man     *format.Manifest
	version casstore.Version
	// uncertain: the head batch was carried by a CAS whose outcome is still
	// unknown when the committer stops; those groups get ErrOutcomeUnknown.
	uncertain []*segment

	commits, segments, records, retries int64
	lastNext                            uint64
}

func newCommitter(p *Producer, lm loadedManifest) *committer {
	return &committer{p: p, man: lm.m, version: lm.version, lastNext: lm.m.NextSequence(),
		uploaded: map[*segment]bool{}, wake: make(chan struct{}, 1)}
}

func (c *committer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *committer) enqueue(segs []*segment) {
	c.mu.Lock()
	c.queue = append(c.queue, segs...)
	c.mu.Unlock()
}

func (c *committer) markUploaded(s *segment) {
	c.mu.Lock()
	c.uploaded[s] = true
	c.mu.Unlock()
	c.signal()
}

// sealedAll tells the committer no more segments will come (Close).
func (c *committer) sealedAll() {
	c.mu.Lock()
	c.allSealed = true
	c.mu.Unlock()
	c.signal()
}

// ready returns the uploaded prefix of the queue (at most the batch size),
// and whether the committer's work is over (Close, all committed).
func (c *committer) ready() (batch []*segment, over bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for n < len(c.queue) && n < c.p.cfg.ManifestAppendBatchSize && c.uploaded[c.queue[n]] {
		n++
	}
	return c.queue[:n:n], n == 0 && c.allSealed && len(c.queue) == 0
}

func (c *committer) run() {
	defer c.p.wg.Done()
	ctx := c.p.runCtx
	for {
		batch, over := c.ready()
		if over || ctx.Err() != nil {
			return
		}
		if len(batch) == 0 {
			select {
			case <-c.wake:
			case <-ctx.Done():
				return
			}
			continue
		}
		if err := c.commit(ctx, batch); err != nil {
			if ctx.Err() == nil || errors.Is(err, ErrFenced) {
				c.p.halt(c.p.fatal(err))
			}
			return
		}
	}
}

// commit appends batch to the manifest with one CAS, retrying until it
// lands, the producer is fenced, or failures outlast RetryWindow.
func (c *committer) commit(ctx context.Context, batch []*segment) error {
	key := c.p.cfg.ManifestPath
	bo := newBackoff(c.p.cfg.RetryWindow)
	base := c.man.NextSequence()
	unknown := false // a CAS carrying batch may have landed
	for {
		next, seqs, err := c.build(batch)
		if err != nil {
			return err
		}
		if next.Len() == c.man.Len() {
			c.acknowledge(batch, seqs) // only empty groups: nothing to write
			return nil
		}
		start := time.Now()
		v, err := putObject(ctx, c.p.store, key, next.Encode(), casstore.IfMatch(c.version), c.p.cfg.RequestTimeout)
		c.p.met.commitDuration.Record(context.Background(), since(start))
		if err == nil {
			c.man, c.version = next, v
			c.acknowledge(batch, seqs)
			return nil
		}
		c.p.met.commitCount.Add(context.Background(), 1, outcome("error"))
		var why string
		switch {
		case errors.Is(err, casstore.ErrPreconditionFailed):
			why = reasonCASConflict // someone (a newer claim, or our own lost write) changed it
		case errors.Is(err, casstore.ErrConflict):
			why = reasonWriteConflict // refused, not written: retry as is
		case transient(err) || ctx.Err() != nil:
			why, unknown = reasonUnknown, true
		default:
			c.setUncertain(batch, unknown) // an earlier attempt may have landed
			return fmt.Errorf("wal: commit: %w", err)
		}
		c.countRetry(why)
		if ctx.Err() != nil {
			c.setUncertain(batch, unknown)
			return err
		}
		c.p.log.Warn("wal: manifest commit failed, retrying", "key", key, "reason", why, "err", err)
		if why != reasonCASConflict && !bo.wait(ctx) {
			c.setUncertain(batch, unknown)
			return fmt.Errorf("wal: commit: failing for longer than RetryWindow %v: %w", c.p.cfg.RetryWindow, err)
		}
		if why == reasonWriteConflict {
			continue
		}
		done, err := c.resolve(ctx, bo, batch, base, &unknown)
		if done || err != nil {
			return err
		}
	}
}

// build returns the manifest after appending batch, and each segment's
// first sequence (as if this CAS lands).
func (c *committer) build(batch []*segment) (*format.Manifest, []uint64, error) {
	next := c.man.Clone()
	seqs := make([]uint64, len(batch))
	for i, s := range batch {
		if s.records == 0 {
			seqs[i] = next.NextSequence()
			continue
		}
		seq, err := next.Append(s.key, uint32(s.records), s.md)
		if err != nil {
			return nil, nil, fmt.Errorf("wal: commit segment %q: %w", s.key, err)
		}
		seqs[i] = seq
	}
	return next, seqs, nil
}

// resolve reloads the manifest after a failed CAS and decides what
// happened. The batch is in the log iff its keys sit, in order, at base:
// segment keys are unique to this producer, so nobody else can have put
// them there. It reports done when the batch landed (or the producer is
// fenced); otherwise the committer adopts the reloaded version and retries.
func (c *committer) resolve(ctx context.Context, bo *backoff, batch []*segment, base uint64, unknown *bool) (bool, error) {
	key := c.p.cfg.ManifestPath
	var lm loadedManifest
	for {
		var err error
		lm, err = loadManifest(ctx, c.p.store, key, c.p.cfg.RequestTimeout)
		if err == nil {
			break
		}
		c.countRetry(reasonLoad)
		if errors.Is(err, ErrCorrupt) || !transient(err) || !bo.wait(ctx) {
			c.setUncertain(batch, *unknown)
			return true, fmt.Errorf("wal: commit: reload manifest: %w", err)
		}
	}
	if seqs, ok := landed(lm.m, batch, base); ok {
		c.man, c.version = lm.m, lm.version
		c.acknowledge(batch, seqs)
		if lm.m.Epoch() != c.p.epoch {
			return true, newFenced(key, c.p.epoch, lm.m.Epoch())
		}
		return true, nil
	}
	if lm.m.Epoch() != c.p.epoch {
		// The manifest moved past every version our CASes were based on,
		// so none of them can land any more: the batch is definitely out.
		return true, newFenced(key, c.p.epoch, lm.m.Epoch())
	}
	if lm.version != c.version {
		// Only this producer writes at its epoch, and its write is not
		// there: the manifest changed in a way we cannot explain.
		c.setUncertain(batch, *unknown)
		return true, fmt.Errorf("wal: manifest %q changed at epoch %d without this producer's commit", key, c.p.epoch)
	}
	return false, nil // unchanged: our CAS did not land (yet); try again
}

// landed reports whether the batch's non-empty segments are the entries
// starting at base, and their sequences.
func landed(m *format.Manifest, batch []*segment, base uint64) ([]uint64, bool) {
	_, idx, ok := m.Locate(base)
	seqs := make([]uint64, len(batch))
	next := base
	for i, s := range batch {
		if s.records == 0 {
			seqs[i] = next
			continue
		}
		if !ok || idx >= m.Len() {
			return nil, false
		}
		e := m.Entry(idx)
		idx++
		if e.Location != s.key || e.Sequence != next || e.Count != uint32(s.records) {
			return nil, false
		}
		seqs[i] = next
		next = e.End()
	}
	return seqs, true
}

// acknowledge resolves the groups of a committed batch and frees their
// budget.
func (c *committer) acknowledge(batch []*segment, seqs []uint64) {
	c.mu.Lock()
	c.queue = c.queue[len(batch):]
	for _, s := range batch {
		delete(c.uploaded, s)
	}
	c.uncertain = nil
	c.lastNext = c.man.NextSequence()
	c.commits++
	c.segments += int64(len(batch))
	c.mu.Unlock()
	var recs int64
	for i, s := range batch {
		s.resolve(&seqs[i], nil)
		recs += int64(s.records)
		c.p.release(s.cost)
	}
	c.mu.Lock()
	c.records += recs
	c.mu.Unlock()
	c.p.met.commitCount.Add(context.Background(), 1, outcome("ok"))
	c.p.met.commitEntries.Record(context.Background(), int64(len(batch)))
	c.p.log.Debug("wal: committed", "manifest", c.p.cfg.ManifestPath, "segments", len(batch), "records", recs, "next", c.man.NextSequence())
}

func (c *committer) setUncertain(batch []*segment, unknown bool) {
	if !unknown {
		return
	}
	c.mu.Lock()
	c.uncertain = batch
	c.mu.Unlock()
}

func (c *committer) countRetry(why string) {
	c.p.met.commitRetries.Add(context.Background(), 1, reason(why))
	c.mu.Lock()
	c.retries++
	c.mu.Unlock()
}

// abandon resolves every segment left in the queue once the pipeline has
// stopped: ErrOutcomeUnknown for a batch whose CAS may have landed, err
// (the halt error) for the rest, which no CAS ever carried into the log.
func (c *committer) abandon(err error) {
	c.mu.Lock()
	queue, uncertain := c.queue, c.uncertain
	c.queue, c.uncertain = nil, nil
	c.mu.Unlock()
	unsure := map[*segment]bool{}
	for _, s := range uncertain {
		unsure[s] = true
	}
	for _, s := range queue {
		e := err
		if unsure[s] {
			e = &outcomeUnknownError{cause: err}
		}
		s.resolve(nil, e)
		c.p.release(s.cost)
	}
}

func (c *committer) stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Commits: c.commits, Segments: c.segments, Records: c.records, CommitRetries: c.retries, NextSequence: c.lastNext}
}
