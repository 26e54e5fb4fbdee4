package wal

import (
	"bytes"
	"context"
	"time"

	"github.com/objwal/objwal/format"
)

// segment is one sealed segment: a run of groups packed under
// SegmentMaxBytes, with a reserved ordinal.
type segment struct {
	ordinal uint64
	key     string
	groups  []*group
	starts  []uint32 // index of each group's first record in the segment
	records int
	block   int64 // record block bytes before compression
	cost    int64 // budget to release when resolved
	md      []format.Metadata
	size    int           // encoded bytes (set by the uploader)
	done    chan struct{} // closed when the segment's groups resolved
}

// resolve settles every group of the segment: committed at *base plus the
// group's start index when err is nil, else failed with err.
func (s *segment) resolve(base *uint64, err error) {
	for j, g := range s.groups {
		if err == nil {
			g.d.seq = *base + uint64(s.starts[j])
		} else {
			g.d.err = err
		}
	}
	close(s.done)
}

// flushLoop seals the pending buffer into segments whenever FlushInterval
// has passed since its oldest group, FlushBytes are buffered, or Close asks,
// and hands them to the uploaders. Sending blocks while the upload queue is
// full; records keep accumulating meanwhile, so the next seal is larger:
// under load, segments grow instead of the queue.
func (p *Producer) flushLoop() {
	defer p.wg.Done()
	defer close(p.uploadQ)
	var ordinal uint64
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		groups, signal, closing, wait := p.takePending()
		if groups != nil {
			segs := p.seal(groups, &ordinal)
			close(signal.sealed) // every group now knows its segment
			if !p.dispatch(segs) {
				return
			}
			if p.cfg.serialFlushes && !p.awaitCommitted(segs) {
				return
			}
		}
		if closing && groups == nil {
			p.c.sealedAll()
			return
		}
		if groups != nil {
			continue // more may be ready already
		}
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-p.kick:
		case <-timer.C:
		case <-p.runCtx.Done():
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// awaitCommitted blocks until every segment of segs is resolved (they
// resolve in ordinal order, so waiting for the last one suffices). It
// reports false if the producer stopped meanwhile.
func (p *Producer) awaitCommitted(segs []*segment) bool {
	select {
	case <-segs[len(segs)-1].done:
		return true
	case <-p.runCtx.Done():
		return false
	}
}

// takePending returns the pending groups if a flush is due, whether Close
// was called, and otherwise how long until the interval trigger (0: wait
// for a kick).
func (p *Producer) takePending() (groups []*group, signal *flushSignal, closing bool, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	closing = p.closing
	if len(p.pending) == 0 || p.stopErr != nil {
		return nil, nil, closing, 0
	}
	age := time.Since(p.pendingSince)
	if closing || p.pendingBytes >= int64(p.cfg.FlushBytes) || age >= p.cfg.FlushInterval {
		groups, signal = p.pending, p.pendingFlush
		p.pending, p.pendingBytes, p.pendingFlush = nil, 0, nil
		return groups, signal, closing, 0
	}
	return nil, nil, closing, p.cfg.FlushInterval - age
}

// seal packs groups, in order, into segments of at most SegmentMaxBytes of
// record block and reserves their ordinals. Each segment's metadata has an
// item only where the group meta changes: records after an item inherit it
// (FORMATS.md §4.4), so runs of groups with equal meta (typically none)
// cost the manifest nothing per group and GroupMeta stays exact.
func (p *Producer) seal(groups []*group, ordinal *uint64) []*segment {
	now := time.Now().UnixMilli()
	limit := int64(p.cfg.SegmentMaxBytes) - segFooterMax
	var segs []*segment
	var cur *segment
	var curMeta []byte
	for _, g := range groups {
		if cur == nil || (cur.block+g.block > limit && len(cur.groups) > 0) {
			cur = &segment{ordinal: *ordinal, key: p.segmentKey(*ordinal), done: make(chan struct{})}
			*ordinal++
			segs = append(segs, cur)
			curMeta = nil
		}
		start := uint32(cur.records)
		if !bytes.Equal(g.meta, curMeta) {
			cur.md = append(cur.md, format.Metadata{StartIndex: start, IngestionMs: now, Payload: g.meta})
			curMeta = g.meta
		}
		g.d.seg = cur
		cur.groups = append(cur.groups, g)
		cur.starts = append(cur.starts, start)
		cur.records += len(g.records)
		cur.block += g.block
		cur.cost += g.cost
	}
	for _, s := range segs {
		p.met.batchRecords.Record(context.Background(), int64(s.records))
	}
	return segs
}

// dispatch registers segs with the committer (which fixes their commit
// order) and queues the non-empty ones for upload. It reports false if the
// producer stopped meanwhile.
func (p *Producer) dispatch(segs []*segment) bool {
	p.c.enqueue(segs)
	for _, s := range segs {
		if s.records == 0 {
			p.c.markUploaded(s) // nothing to store: an empty segment only resolves its groups
			continue
		}
		select {
		case p.uploadQ <- s:
		case <-p.runCtx.Done():
			return false
		}
	}
	return true
}
