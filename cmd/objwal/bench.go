package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/faultstore"
	"github.com/objwal/objwal/wal"
)

const benchUsage = `usage: objwal bench [--url URL] [--latency D] [--key-write-interval D]
                    [--appenders N] [--record-size B] [--bytes N] [--json]

Drives the real producer and then a replica over a store and measures them.
Latency and the per-key write limit are injected by a fault store wrapped
around --url (default: a fresh in-memory store, mem://).

Write phase: --appenders goroutines append groups of --group records of
--record-size bytes until --bytes of record data are committed. Each appender keeps up to --inflight bytes of
groups appended but not yet committed (at least one group), so the offered
load is the same in bytes for small and large records. Commit latency is
Append to Wait, per group; once the offered load exceeds what the log
commits, it includes the time a group queues behind earlier ones.
Catch-up phase: a new replica reads the whole log from the start, fetching
--prefetch segments in parallel.

Besides the measurements it prints the bounds they are measured against:
  round trip R            median manifest CAS (one Put with IfMatch)
  commit-rate bound       bytes per commit / R: the manifest is serial, so
                          commits/s <= 1/R
  serialized-flush bound  bytes per commit / (segment PUT + manifest CAS):
                          one flush at a time (upload, then commit, nothing
                          overlapped) carrying the same bytes per flush
  sequential catch-up     bytes per segment / segment GET: one GET at a time

The objects go under a fresh objwal-bench/<run>/ prefix and are left there;
the output names the manifest key, for "objwal tail URL --manifest KEY".
`

// benchConfig is one benchmark run.
type benchConfig struct {
	url              string
	latency          time.Duration
	jitter           time.Duration
	keyWriteInterval time.Duration
	keyWriteFail     bool
	appenders        int
	recordSize       int
	group            int
	inflight         int64
	bytes            int64
	flushInterval    time.Duration
	flushBytes       int
	prefetch         int
	asJSON           bool
}

// benchResult is the bench's output; the JSON field names are part of the
// tool's interface.
type benchResult struct {
	URL              string  `json:"url"`
	Manifest         string  `json:"manifest"` // key of the log in the store at URL
	LatencyMs        float64 `json:"latency_ms"`
	KeyWriteInterval float64 `json:"key_write_interval_ms"`
	Appenders        int     `json:"appenders"`
	RecordSize       int     `json:"record_size"`
	Group            int     `json:"group"`
	InflightBytes    int64   `json:"inflight_bytes"`
	FlushIntervalMs  float64 `json:"flush_interval_ms"`
	Prefetch         int     `json:"prefetch"`

	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	WriteSeconds  float64 `json:"write_s"`
	WriteMBps     float64 `json:"write_mbps"`
	RecordsPerS   float64 `json:"records_per_s"`
	CommitP50Ms   float64 `json:"commit_p50_ms"`
	CommitP90Ms   float64 `json:"commit_p90_ms"`
	CommitP99Ms   float64 `json:"commit_p99_ms"`
	Commits       int64   `json:"commits"`
	Segments      int64   `json:"segments"`
	CommitRetries int64   `json:"commit_retries"`
	BytesPerCmt   float64 `json:"bytes_per_commit"`
	SegmentsPerCm float64 `json:"segments_per_commit"`

	RoundTripMs      float64 `json:"round_trip_ms"`
	SegmentPutMs     float64 `json:"segment_put_ms"`
	SegmentGetMs     float64 `json:"segment_get_ms"`
	CommitBoundMBps  float64 `json:"commit_bound_mbps"`
	SerialBoundMBps  float64 `json:"serialized_flush_bound_mbps"`
	VsSerialized     float64 `json:"vs_serialized_flush"`
	LatencyFloorMs   float64 `json:"latency_floor_ms"`
	CatchupSeconds   float64 `json:"catchup_s"`
	CatchupMBps      float64 `json:"catchup_mbps"`
	SequentialMBps   float64 `json:"sequential_catchup_bound_mbps"`
	CatchupVsSeqGets float64 `json:"catchup_vs_sequential"`

	Requests map[string]int64 `json:"requests"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c benchConfig
	fs := newFlagSet("bench", benchUsage, stderr)
	fs.StringVar(&c.url, "url", "", "store URL (default: mem://objwal-bench, in this process only)")
	fs.DurationVar(&c.latency, "latency", 0, "latency injected before every store operation")
	fs.DurationVar(&c.jitter, "jitter", 0, "uniform random extra latency in [0, jitter)")
	fs.DurationVar(&c.keyWriteInterval, "key-write-interval", 0, "minimum time between two writes of one key (GCS, R2: 1s); 0 for none")
	fs.BoolVar(&c.keyWriteFail, "key-write-fail", false, "refuse a too-early write with a 429 (retried by the producer) instead of delaying it")
	fs.IntVar(&c.appenders, "appenders", 16, "concurrent appenders")
	fs.IntVar(&c.recordSize, "record-size", 1024, "bytes per record")
	fs.IntVar(&c.group, "group", 1, "records per Append")
	var size, inflight byteSize = 64 << 20, 1 << 20
	fs.Var(&size, "bytes", "record bytes to write (suffixes K, M, G: KiB, MiB, GiB)")
	fs.Var(&inflight, "inflight", "record bytes each appender keeps appended but not yet committed")
	fs.DurationVar(&c.flushInterval, "flush-interval", wal.DefaultFlushInterval, "producer flush interval")
	fs.IntVar(&c.flushBytes, "flush-bytes", wal.DefaultFlushBytes, "producer flush size")
	fs.IntVar(&c.prefetch, "prefetch", wal.DefaultPrefetch, "replica segments fetched in parallel")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	c.bytes, c.inflight = int64(size), int64(inflight)
	if err := c.validate(pos); err != nil {
		fmt.Fprintf(stderr, "objwal bench: %v\n", err)
		return 2
	}
	res, err := bench(ctx, c, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "objwal bench: %v\n", err)
		return 1
	}
	if c.asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "objwal bench: %v\n", err)
			return 1
		}
		return 0
	}
	writeBenchReport(stdout, res)
	return 0
}

func (c benchConfig) validate(pos []string) error {
	switch {
	case len(pos) > 0:
		return fmt.Errorf("unexpected argument %q (the store is given with --url)", pos[0])
	case c.latency < 0 || c.jitter < 0 || c.keyWriteInterval < 0:
		return errors.New("--latency, --jitter and --key-write-interval must not be negative")
	case c.appenders <= 0 || c.group <= 0 || c.inflight <= 0 || c.prefetch <= 0:
		return errors.New("--appenders, --group, --inflight and --prefetch must be positive")
	case c.recordSize <= 0 || c.recordSize > 4<<20:
		return errors.New("--record-size must be in 1..4194304")
	case c.bytes <= 0:
		return errors.New("--bytes must be positive")
	case c.flushInterval <= 0 || c.flushBytes <= 0:
		return errors.New("--flush-interval and --flush-bytes must be positive")
	}
	return nil
}

// byteSize is a flag value of bytes with an optional K, M or G suffix.
type byteSize int64

func (b *byteSize) String() string { return fmt.Sprint(int64(*b)) }

func (b *byteSize) Set(s string) error {
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult, s = 1<<10, s[:n-1]
		case 'm', 'M':
			mult, s = 1<<20, s[:n-1]
		case 'g', 'G':
			mult, s = 1<<30, s[:n-1]
		}
	}
	var v int64
	if _, err := fmt.Sscanf(s, "%d", &v); err != nil || v < 0 || fmt.Sprint(v) != s {
		return fmt.Errorf("%q is not a byte count (want for example 4096, 64K, 256M, 1G)", s)
	}
	*b = byteSize(v * mult)
	return nil
}

func bench(ctx context.Context, c benchConfig, stderr io.Writer) (benchResult, error) {
	res := benchResult{URL: c.url, LatencyMs: ms(c.latency), KeyWriteInterval: ms(c.keyWriteInterval),
		Appenders: c.appenders, RecordSize: c.recordSize, Group: c.group, InflightBytes: c.inflight,
		FlushIntervalMs: ms(c.flushInterval), Prefetch: c.prefetch}
	if c.url == "" {
		c.url = "mem://objwal-bench"
		res.URL = c.url
	}
	base, err := openStore(ctx, c.url)
	if err != nil {
		return res, err
	}
	defer base.Close()
	prefix := "objwal-bench/" + runID() + "/"
	res.Manifest = prefix + wal.DefaultManifestPath
	segPrefix := prefix + wal.DefaultSegmentPrefix
	var rules []faultstore.Rule
	if c.latency > 0 || c.jitter > 0 {
		rules = []faultstore.Rule{{Latency: c.latency, Jitter: c.jitter}}
	}
	fcfg := faultstore.Config{Seed: 1, Rules: rules, KeyWriteInterval: c.keyWriteInterval, KeyWriteDelay: !c.keyWriteFail}
	timed := newTimedStore(faultstore.New(base, fcfg), res.Manifest)

	if err := benchWrite(ctx, c, timed, segPrefix, &res, stderr); err != nil {
		return res, err
	}
	if err := benchCatchUp(ctx, c, timed, &res, stderr); err != nil {
		return res, err
	}
	res.Requests = timed.requests()
	return res, nil
}

// benchWrite runs the producer until c.bytes of records are committed.
func benchWrite(ctx context.Context, c benchConfig, store *timedStore, segPrefix string, res *benchResult, stderr io.Writer) error {
	p, err := wal.NewProducer(ctx, store, wal.ProducerConfig{
		ManifestPath: res.Manifest, SegmentPrefix: segPrefix,
		FlushInterval: c.flushInterval, FlushBytes: c.flushBytes, Logger: quietLogger(stderr),
	})
	if err != nil {
		return fmt.Errorf("start producer: %w", err)
	}
	store.reset() // the claim is not part of the measurement
	records := max(1, c.bytes/int64(c.recordSize))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := &firstError{cancel: cancel}
	var (
		claimed, committed atomic.Int64
		lat                latencies
		wg                 sync.WaitGroup
	)
	bar := startProgress(stderr, records, func() (int64, string) {
		n := committed.Load()
		return n, fmt.Sprintf("%d/%d records committed", n, records)
	})
	defer bar.stop()
	t0 := time.Now()
	for a := range c.appenders {
		type pending struct {
			d     *wal.Durability
			start time.Time
			n     int64
		}
		window := max(1, c.inflight/int64(c.group*c.recordSize))
		inflight := make(chan pending, window-1)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for pg := range inflight {
				if _, err := pg.d.Wait(wctx); err != nil {
					fail.set(fmt.Errorf("commit: %w", err))
					continue
				}
				lat.add(time.Since(pg.start))
				committed.Add(pg.n)
			}
		}()
		go func() {
			defer wg.Done()
			defer close(inflight)
			// Incompressible record bytes, different per appender; the
			// first 8 bytes of each record carry its number.
			rng := rand.New(rand.NewPCG(uint64(a), 7))
			buf := make([]byte, c.group*c.recordSize)
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			recs := make([][]byte, c.group)
			for wctx.Err() == nil {
				n := claimed.Add(int64(c.group))
				size := min(int64(c.group), records-(n-int64(c.group)))
				if size <= 0 {
					return
				}
				for i := range size {
					recs[i] = buf[int(i)*c.recordSize : int(i+1)*c.recordSize]
					if c.recordSize >= 8 {
						binary.LittleEndian.PutUint64(recs[i], uint64(n-int64(c.group)+i))
					}
				}
				t := time.Now()
				d, err := p.Append(wctx, recs[:size], nil)
				if err != nil {
					fail.set(fmt.Errorf("append: %w", err))
					return
				}
				inflight <- pending{d: d, start: t, n: size}
			}
		}()
	}
	wg.Wait()
	closeErr := p.Close(ctx)
	elapsed := time.Since(t0)
	bar.stop()
	if fail.err != nil {
		return fail.err
	}
	if closeErr != nil {
		return fmt.Errorf("close producer: %w", closeErr)
	}
	st := p.Stats()
	sorted := lat.sorted()
	res.Records = committed.Load()
	res.Bytes = res.Records * int64(c.recordSize)
	res.WriteSeconds = elapsed.Seconds()
	res.WriteMBps = mbps(res.Bytes, elapsed)
	res.RecordsPerS = float64(res.Records) / elapsed.Seconds()
	res.CommitP50Ms, res.CommitP90Ms, res.CommitP99Ms = ms(percentile(sorted, .5)), ms(percentile(sorted, .9)), ms(percentile(sorted, .99))
	res.Commits, res.Segments, res.CommitRetries = st.Commits, st.Segments, st.CommitRetries
	res.BytesPerCmt = float64(res.Bytes) / float64(max(1, st.Commits))
	res.SegmentsPerCm = float64(st.Segments) / float64(max(1, st.Commits))
	cas, segPut := store.median(opManifestPut), store.median(opSegmentPut)
	res.RoundTripMs, res.SegmentPutMs = ms(cas), ms(segPut)
	res.LatencyFloorMs = ms(segPut + cas + c.flushInterval)
	if cas > 0 {
		res.CommitBoundMBps = mbps(int64(res.BytesPerCmt), cas)
	}
	if segPut+cas > 0 {
		res.SerialBoundMBps = mbps(int64(res.BytesPerCmt), segPut+cas)
		res.VsSerialized = res.WriteMBps / res.SerialBoundMBps
	}
	return nil
}

// benchCatchUp reads the whole log with a new replica.
func benchCatchUp(ctx context.Context, c benchConfig, store *timedStore, res *benchResult, stderr io.Writer) error {
	var applied atomic.Int64
	r := wal.NewReplica(store, wal.ApplyFunc(func(_ context.Context, rec wal.Record) error {
		applied.Add(1)
		return nil
	}), wal.ReplicaConfig{ManifestPath: res.Manifest, Prefetch: c.prefetch, Logger: quietLogger(stderr)})
	bar := startProgress(stderr, res.Records, func() (int64, string) {
		n := applied.Load()
		return n, fmt.Sprintf("replica catching up: %d/%d records", n, res.Records)
	})
	defer bar.stop()
	t0 := time.Now()
	for applied.Load() < res.Records {
		n, err := r.Poll(ctx)
		if err != nil {
			return fmt.Errorf("replica: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("replica stopped finding records at %d of %d", applied.Load(), res.Records)
		}
	}
	elapsed := time.Since(t0)
	bar.stop()
	res.CatchupSeconds = elapsed.Seconds()
	res.CatchupMBps = mbps(res.Bytes, elapsed)
	if get := store.median(opSegmentGet); get > 0 && res.Segments > 0 {
		res.SegmentGetMs = ms(get)
		res.SequentialMBps = mbps(res.Bytes/res.Segments, get)
		res.CatchupVsSeqGets = res.CatchupMBps / res.SequentialMBps
	}
	return nil
}

func writeBenchReport(w io.Writer, r benchResult) {
	ew := &errWriter{w: w}
	ew.printf("objwal bench on %s: latency %.0f ms, key write interval %.0f ms, %d appenders with %s in flight each, %d records of %d B per Append, flush interval %.0f ms\n\n",
		r.URL, r.LatencyMs, r.KeyWriteInterval, r.Appenders, humanBytes(r.InflightBytes), r.Group, r.RecordSize, r.FlushIntervalMs)
	ew.printf("  %-26s %s\n", "log (manifest key)", r.Manifest)
	ew.printf("  %-26s %d records, %s in %.2f s\n", "written", r.Records, humanBytes(r.Bytes), r.WriteSeconds)
	ew.printf("  %-26s %.2f MB/s, %.0f records/s\n", "write throughput", r.WriteMBps, r.RecordsPerS)
	ew.printf("  %-26s p50 %.1f ms, p90 %.1f ms, p99 %.1f ms\n", "commit latency", r.CommitP50Ms, r.CommitP90Ms, r.CommitP99Ms)
	ew.printf("  %-26s %.1f ms (segment PUT %.1f + manifest CAS %.1f + flush interval %.0f)\n", "latency floor", r.LatencyFloorMs, r.SegmentPutMs, r.RoundTripMs, r.FlushIntervalMs)
	ew.printf("  %-26s %d commits, %d segments (%.2f per commit), %s per commit, %d CAS retries\n", "commits",
		r.Commits, r.Segments, r.SegmentsPerCm, humanBytes(int64(r.BytesPerCmt)), r.CommitRetries)
	ew.printf("  %-26s %.1f ms (median manifest CAS)\n", "round trip R", r.RoundTripMs)
	ew.printf("  %-26s %.2f MB/s (bytes per commit / R); write is %.0f%% of it\n", "commit-rate bound", r.CommitBoundMBps, 100*r.WriteMBps/max(r.CommitBoundMBps, 1e-9))
	ew.printf("  %-26s %.2f MB/s (bytes per commit / (PUT + CAS)); write is %.2fx it\n", "serialized-flush bound", r.SerialBoundMBps, r.VsSerialized)
	ew.printf("  %-26s %.2f MB/s in %.2f s, prefetch %d\n", "replica catch-up", r.CatchupMBps, r.CatchupSeconds, r.Prefetch)
	ew.printf("  %-26s %.2f MB/s (bytes per segment / segment GET %.1f ms); catch-up is %.1fx it\n", "one-GET-at-a-time bound", r.SequentialMBps, r.SegmentGetMs, r.CatchupVsSeqGets)
	ew.printf("  %-26s", "requests")
	for _, k := range []string{"segment_put", "manifest_put", "segment_get", "manifest_get", "stat", "other"} {
		ew.printf(" %s=%d", k, r.Requests[k])
	}
	ew.printf("\n")
}

// The request kinds timedStore tells apart.
const (
	opSegmentPut = iota
	opManifestPut
	opSegmentGet
	opManifestGet
	opStat
	opOther
	opKinds
)

var opNames = [opKinds]string{"segment_put", "manifest_put", "segment_get", "manifest_get", "stat", "other"}

// timedStore times every request by kind, telling the manifest apart from
// segments, so the bench can state the round trips its bounds use.
type timedStore struct {
	casstore.Store
	manifest string
	mu       sync.Mutex
	d        [opKinds][]time.Duration
}

func newTimedStore(s casstore.Store, manifest string) *timedStore {
	return &timedStore{Store: s, manifest: manifest}
}

func (t *timedStore) observe(kind int, start time.Time) {
	d := time.Since(start)
	t.mu.Lock()
	t.d[kind] = append(t.d[kind], d)
	t.mu.Unlock()
}

func (t *timedStore) kind(key string, manifestKind, segmentKind int) int {
	if key == t.manifest {
		return manifestKind
	}
	return segmentKind
}

func (t *timedStore) reset() {
	t.mu.Lock()
	t.d = [opKinds][]time.Duration{}
	t.mu.Unlock()
}

// median returns the median duration of one kind, 0 if none ran.
func (t *timedStore) median(kind int) time.Duration {
	t.mu.Lock()
	s := append([]time.Duration(nil), t.d[kind]...)
	t.mu.Unlock()
	if len(s) == 0 {
		return 0
	}
	lat := latencies{d: s}
	return percentile(lat.sorted(), .5)
}

func (t *timedStore) requests() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := make(map[string]int64, opKinds)
	for k, d := range t.d {
		m[opNames[k]] = int64(len(d))
	}
	return m
}

// Get implements casstore.Store.
func (t *timedStore) Get(ctx context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	defer t.observe(t.kind(key, opManifestGet, opSegmentGet), time.Now())
	return t.Store.Get(ctx, key)
}

// GetRange implements casstore.Store.
func (t *timedStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	defer t.observe(t.kind(key, opManifestGet, opSegmentGet), time.Now())
	return t.Store.GetRange(ctx, key, off, n)
}

// Stat implements casstore.Store.
func (t *timedStore) Stat(ctx context.Context, key string) (casstore.ObjectInfo, error) {
	defer t.observe(opStat, time.Now())
	return t.Store.Stat(ctx, key)
}

// Put implements casstore.Store.
func (t *timedStore) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	defer t.observe(t.kind(key, opManifestPut, opSegmentPut), time.Now())
	return t.Store.Put(ctx, key, data, cond)
}

// Delete implements casstore.Store.
func (t *timedStore) Delete(ctx context.Context, key string, cond casstore.Condition) error {
	defer t.observe(opOther, time.Now())
	return t.Store.Delete(ctx, key, cond)
}

// List implements casstore.Store.
func (t *timedStore) List(ctx context.Context, prefix string) iter.Seq2[casstore.ObjectInfo, error] {
	defer t.observe(opOther, time.Now())
	return t.Store.List(ctx, prefix)
}
