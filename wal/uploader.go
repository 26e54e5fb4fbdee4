package wal

import (
	"context"
	"errors"
	"fmt"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/format"
)

// uploadLoop encodes and stores segments from the upload queue. Uploads
// finish in any order; the committer restores ordinal order.
func (p *Producer) uploadLoop() {
	defer p.wg.Done()
	for {
		var s *segment
		var ok bool
		select {
		case s, ok = <-p.uploadQ:
		case <-p.runCtx.Done():
			return
		}
		if !ok {
			return
		}
		if err := p.upload(p.runCtx, s); err != nil {
			if p.runCtx.Err() == nil {
				p.halt(p.fatal(err))
			}
			return
		}
		p.c.markUploaded(s)
	}
}

// upload writes one segment, retrying transient failures for RetryWindow.
// The key is unique to this producer, so the write is create-only and a
// retry that finds the object already there means an earlier attempt whose
// reply was lost did land, with the same bytes.
func (p *Producer) upload(ctx context.Context, s *segment) error {
	records := make([][]byte, 0, s.records)
	for _, g := range s.groups {
		records = append(records, g.records...)
	}
	data, err := format.EncodeSegment(records, p.cfg.Compression, p.segmentVersion())
	if err != nil {
		return fmt.Errorf("wal: encode segment %q: %w", s.key, err)
	}
	s.size = len(data)
	p.met.batchBytes.Record(context.Background(), int64(len(data)))
	cond := casstore.None()
	if p.store.Capabilities().IfAbsent {
		cond = casstore.IfAbsent()
	}
	bo := newBackoff(p.cfg.RetryWindow)
	retried := false
	for {
		_, err := putObject(ctx, p.store, s.key, data, cond, p.cfg.RequestTimeout)
		if err == nil || (retried && errors.Is(err, casstore.ErrAlreadyExists)) {
			for _, g := range s.groups {
				g.records = nil // uploaded: the bytes are no longer needed
			}
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		p.met.uploadFailures.Add(context.Background(), 1)
		if !transient(err) {
			return fmt.Errorf("wal: upload segment: %w", err)
		}
		p.log.Warn("wal: segment upload failed, retrying", "key", s.key, "err", err)
		if !bo.wait(ctx) {
			return fmt.Errorf("wal: upload segment: failing for longer than RetryWindow %v: %w", p.cfg.RetryWindow, err)
		}
		retried = true
	}
}
