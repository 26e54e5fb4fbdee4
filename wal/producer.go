package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/format"
)

// Per-record and per-group bytes charged to MaxInFlightBytes on top of the
// record bytes: what the producer keeps in memory for them (slice headers,
// the group, its Durability). Charging it keeps the budget honest for tiny
// records without capping them by a count.
const (
	recordOverhead = 32
	groupOverhead  = 128
	segFooterMax   = 11
)

// group is one Append call; its Durability is what the caller holds.
type group struct {
	d       Durability
	records [][]byte // copies; dropped once uploaded
	meta    []byte
	block   int64 // Σ(4+len): the group's share of a record block
	cost    int64 // charged to the budget
}

// Producer is the single, epoch-fenced writer of one log. It is safe for
// concurrent use. Create it with NewProducer; stop it with Close.
type Producer struct {
	store casstore.Store
	cfg   ProducerConfig
	log   *slog.Logger
	met   producerMetrics
	runID string
	epoch uint64

	c *committer

	mu           sync.Mutex
	pending      []*group
	pendingBytes int64
	pendingSince time.Time
	pendingFlush *flushSignal  // shared by the pending groups
	inFlight     int64         // bytes charged to MaxInFlightBytes
	waiters      int           // Appends blocked on the budget
	freed        chan struct{} // closed and replaced when budget frees up
	closing      bool          // Close was called: Append refuses
	stopErr      error         // why the producer stopped early; set once
	finished     bool          // every Durability has been resolved

	kick    chan struct{} // wakes the flusher
	uploadQ chan *segment
	runCtx  context.Context
	cancel  context.CancelCauseFunc
	stopped chan struct{} // closed by halt
	done    chan struct{} // closed when every goroutine exited and all resolved
	wg      sync.WaitGroup
}

// NewProducer claims the log at cfg.ManifestPath by bumping its epoch with a
// CAS, and starts the flush, upload and commit pipeline. It returns
// ErrFenced if a concurrent claim won, ErrLegacyManifest for a v1 manifest
// without cfg.AllowManifestUpgrade, and ErrCorrupt for a damaged manifest.
// ctx bounds the claim only; the pipeline runs until Close.
func NewProducer(ctx context.Context, store casstore.Store, cfg ProducerConfig) (*Producer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	met, err := newProducerMetrics(cfg.Meter)
	if err != nil {
		cfg.Logger.Warn("wal: some producer metrics are unavailable", "err", err)
	}
	p := &Producer{
		store:   store,
		cfg:     cfg,
		log:     cfg.Logger,
		met:     met,
		runID:   ulid.Make().String(),
		freed:   make(chan struct{}),
		kick:    make(chan struct{}, 1),
		uploadQ: make(chan *segment, cfg.UploadConcurrency),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
	lm, err := p.claim(ctx)
	if err != nil {
		return nil, err
	}
	p.epoch = lm.m.Epoch()
	p.c = newCommitter(p, lm)
	p.runCtx, p.cancel = context.WithCancelCause(context.Background())
	p.wg.Add(2 + cfg.UploadConcurrency)
	go p.flushLoop()
	go p.c.run()
	for range cfg.UploadConcurrency {
		go p.uploadLoop()
	}
	go p.supervise()
	p.log.Info("wal: producer claimed the log", "manifest", cfg.ManifestPath, "epoch", p.epoch, "run", p.runID)
	return p, nil
}

// Epoch returns the epoch this producer claimed.
func (p *Producer) Epoch() uint64 { return p.epoch }

// RunID returns the ULID that names this producer's segments
// (<SegmentPrefix>/<RunID>/<ordinal>).
func (p *Producer) RunID() string { return p.runID }

// Append adds records as one group and returns its Durability. The group's
// records get consecutive sequences, in the order Append calls were
// accepted. Append copies records and meta, so the caller may reuse them.
//
// Append blocks while the in-flight byte budget (MaxInFlightBytes) is
// spent: that is the backpressure signal. It returns ctx's error if ctx ends
// first, ErrTooLarge for a group that can never fit, ErrClosed after Close,
// and the halt error (ErrFenced, ErrHalted) after the producer stopped. On
// any error nothing was appended.
func (p *Producer) Append(ctx context.Context, records [][]byte, meta []byte) (*Durability, error) {
	g, err := p.newGroup(records, meta)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if err := p.reserve(ctx, g.cost); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	if len(p.pending) == 0 {
		p.pendingSince = time.Now()
		p.pendingFlush = newFlushSignal()
	}
	g.d.flush = p.pendingFlush
	p.pending = append(p.pending, g)
	p.pendingBytes += g.block
	wake := len(p.pending) == 1 || p.pendingBytes >= int64(p.cfg.FlushBytes)
	p.mu.Unlock()
	if wake {
		p.wakeFlusher()
	}
	p.met.appendRecords.Add(context.Background(), int64(len(records)))
	p.met.appendBytes.Add(context.Background(), g.block-4*int64(len(records)))
	return &g.d, nil
}

// newGroup validates and copies one Append's records into one allocation.
func (p *Producer) newGroup(records [][]byte, meta []byte) (*group, error) {
	var data int64
	for i, r := range records {
		if int64(len(r)) > math.MaxUint32 {
			return nil, fmt.Errorf("%w: record %d is %d bytes (the format's limit is 4 GiB)", ErrTooLarge, i, len(r))
		}
		data += int64(len(r))
	}
	block := data + 4*int64(len(records))
	if block+segFooterMax > int64(p.cfg.SegmentMaxBytes) {
		return nil, fmt.Errorf("%w: %d records of %d bytes exceed SegmentMaxBytes %d", ErrTooLarge, len(records), data, p.cfg.SegmentMaxBytes)
	}
	cost := block + int64(len(meta)) + groupOverhead + recordOverhead*int64(len(records))
	if cost > p.cfg.MaxInFlightBytes {
		return nil, fmt.Errorf("%w: group of %d bytes exceeds MaxInFlightBytes %d", ErrTooLarge, cost, p.cfg.MaxInFlightBytes)
	}
	arena := make([]byte, 0, data+int64(len(meta)))
	copies := make([][]byte, len(records))
	for i, r := range records {
		arena = append(arena, r...)
		copies[i] = arena[len(arena)-len(r) : len(arena) : len(arena)]
	}
	var m []byte
	if meta != nil {
		arena = append(arena, meta...)
		m = arena[len(arena)-len(meta) : len(arena) : len(arena)]
	}
	return &group{records: copies, meta: m, block: block, cost: cost}, nil
}

// reserve charges n bytes to the in-flight budget, waiting (with p.mu
// released) while they do not fit. It is called and returns with p.mu
// held, and fails if ctx ends or the producer closes or stops meanwhile.
// The budget is measured in bytes, never in a count of batches, so tiny
// records are limited only by their real footprint.
func (p *Producer) reserve(ctx context.Context, n int64) error {
	for {
		if err := p.admissibleLocked(); err != nil {
			return err
		}
		if p.inFlight+n <= p.cfg.MaxInFlightBytes {
			p.inFlight += n
			return nil
		}
		ch := p.freed
		p.waiters++
		p.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-p.stopped:
		case <-ctx.Done():
			err = ctx.Err()
		}
		p.mu.Lock()
		p.waiters--
		if err != nil {
			return err
		}
	}
}

// release returns n bytes to the budget and wakes blocked Appends.
func (p *Producer) release(n int64) {
	p.mu.Lock()
	p.inFlight -= n
	if p.waiters > 0 {
		close(p.freed)
		p.freed = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *Producer) admissibleLocked() error {
	switch {
	case p.stopErr != nil:
		return p.stopErr
	case p.closing:
		return ErrClosed
	}
	return nil
}

func (p *Producer) wakeFlusher() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Close flushes and commits every pending group, stops the pipeline and
// waits for its goroutines. If ctx ends first, Close abandons what is not
// committed (those groups resolve with ErrClosed, or ErrOutcomeUnknown for a
// commit in flight), still waits for the goroutines, and returns ctx's
// error. It returns the halt error if the producer had stopped, else nil.
// Calling it again is safe and returns the same result. Every Durability is
// resolved when Close returns.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.wakeFlusher()
	select {
	case <-p.done:
	case <-ctx.Done():
		p.halt(fmt.Errorf("%w: Close gave up before the records were committed: %w", ErrClosed, ctx.Err()))
		<-p.done
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopErr
}

// halt stops the producer with err (already in its final form: fenced,
// halted, closed) unless it stopped already. Goroutines see runCtx end.
func (p *Producer) halt(err error) {
	p.mu.Lock()
	first := p.stopErr == nil
	if first {
		p.stopErr = err
	}
	p.mu.Unlock()
	if !first {
		return
	}
	p.cancel(err)
	close(p.stopped)
	switch {
	case errors.Is(err, ErrClosed):
		p.log.Warn("wal: producer closed with records uncommitted", "manifest", p.cfg.ManifestPath, "err", err)
		return
	case errors.Is(err, ErrFenced):
		p.met.fenced.Add(context.Background(), 1)
		p.met.halted.Add(context.Background(), 1, outcome("fenced"))
	case errors.Is(err, ErrCorrupt):
		p.met.halted.Add(context.Background(), 1, outcome("corrupt"))
	default:
		p.met.halted.Add(context.Background(), 1, outcome("error"))
	}
	p.log.Error("wal: producer halted", "manifest", p.cfg.ManifestPath, "epoch", p.epoch, "err", err)
}

// fatal turns a failure into the producer's halt error.
func (p *Producer) fatal(err error) error {
	if errors.Is(err, ErrFenced) || errors.Is(err, ErrClosed) {
		return err
	}
	return haltedError(err)
}

// supervise waits for the pipeline's goroutines, then resolves every group
// that is still open, so that no Wait blocks forever.
func (p *Producer) supervise() {
	p.wg.Wait()
	p.mu.Lock()
	p.finished = true
	pending := p.pending
	p.pending = nil
	stopErr := p.stopErr
	p.mu.Unlock()
	if stopErr == nil {
		stopErr = p.fatal(errors.New("pipeline stopped with records pending")) // defensive: a bug, not a path
	}
	if len(pending) > 0 {
		// Never sealed: give them a segment of their own to resolve on.
		s := &segment{groups: pending, done: make(chan struct{})}
		for _, g := range pending {
			s.cost += g.cost
			g.d.seg = s
		}
		close(pending[0].d.flush.sealed)
		s.resolve(nil, stopErr)
		p.release(s.cost)
	}
	p.c.abandon(stopErr)
	p.cancel(nil)
	close(p.done)
}

// Stats is a snapshot of a producer's counters.
type Stats struct {
	// Epoch claimed and RunID of segment keys.
	Epoch uint64
	RunID string
	// Commits is the number of successful manifest CAS writes; Segments
	// the number of segments they committed; Records the records.
	Commits, Segments, Records int64
	// CommitRetries counts CAS attempts that had to be repeated.
	CommitRetries int64
	// InFlightBytes is the budget in use now.
	InFlightBytes int64
	// NextSequence is the manifest's next sequence after the last commit.
	NextSequence uint64
}

// Stats returns a snapshot of the producer's counters.
func (p *Producer) Stats() Stats {
	s := p.c.stats()
	p.mu.Lock()
	s.InFlightBytes = p.inFlight
	p.mu.Unlock()
	s.Epoch, s.RunID = p.epoch, p.runID
	return s
}

// segmentKey names segment ordinal of this producer (FORMATS.md §5).
func (p *Producer) segmentKey(ordinal uint64) string {
	return fmt.Sprintf("%s/%s/%016x", p.cfg.SegmentPrefix, p.runID, ordinal)
}

func (p *Producer) segmentVersion() uint16 {
	if p.cfg.LegacySegmentFormat {
		return format.SegmentV1
	}
	return format.SegmentV2
}
