package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/faultstore"
	"github.com/objwal/objwal/wal"
)

const demoUsage = `usage: objwal demo [--url URL] [--records N] [flags]

Runs the main job end to end: one producer and two replicas, each replica in
its own goroutine with its own copy of a key-value map. Several appenders
put and delete keys through the producer; the replicas tail the log from the
store. At the end it prints what the run wrote and cost (records, bytes,
MB/s, commit latency, replica lag, object-store requests and bytes by kind)
and checks that both replicas hold exactly the primary's map. It exits 1 if
they differ.

Without --url it runs on a file store in a fresh temporary directory that is
removed afterwards. With --url the objects go under a fresh
objwal-demo/<run>/ prefix of that store and are left there; the output
names the manifest key, for "objwal tail URL --manifest KEY".
`

// demoConfig is the demo's workload.
type demoConfig struct {
	url           string
	records       int
	keys          int
	appenders     int
	group         int
	window        int
	valueSize     int
	deletePercent int
	flushInterval time.Duration
	pollInterval  time.Duration
	seed          uint64
	// The log's keys, under a prefix of their own (set by demo).
	manifest, segmentPrefix string
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c demoConfig
	fs := newFlagSet("demo", demoUsage, stderr)
	fs.StringVar(&c.url, "url", "", "store URL (default: a file store in a new temporary directory)")
	fs.IntVar(&c.records, "records", 200_000, "records to append")
	fs.IntVar(&c.keys, "keys", 10_000, "size of the key space")
	fs.IntVar(&c.appenders, "appenders", 8, "concurrent appenders")
	fs.IntVar(&c.group, "group", 16, "records per Append (one group)")
	fs.IntVar(&c.window, "window", 32, "groups each appender keeps in flight")
	fs.IntVar(&c.valueSize, "value-size", 64, "bytes per value")
	fs.IntVar(&c.deletePercent, "delete-percent", 10, "share of operations that delete a key (0-100)")
	fs.DurationVar(&c.flushInterval, "flush-interval", wal.DefaultFlushInterval, "producer flush interval")
	fs.DurationVar(&c.pollInterval, "poll-interval", 10*time.Millisecond, "replica poll interval")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the workload")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if err := c.validate(pos); err != nil {
		fmt.Fprintf(stderr, "objwal demo: %v\n", err)
		return 2
	}
	if err := demo(ctx, c, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "objwal demo: %v\n", err)
		return 1
	}
	return 0
}

func (c demoConfig) validate(pos []string) error {
	switch {
	case len(pos) > 0:
		return fmt.Errorf("unexpected argument %q (the store is given with --url)", pos[0])
	case c.records <= 0:
		return errors.New("--records must be positive")
	case c.keys <= 0 || c.keys > 100_000_000:
		return errors.New("--keys must be in 1..100000000")
	case c.appenders <= 0 || c.group <= 0 || c.window <= 0:
		return errors.New("--appenders, --group and --window must be positive")
	case c.valueSize < 0 || c.valueSize > 1<<20:
		return errors.New("--value-size must be in 0..1048576")
	case c.deletePercent < 0 || c.deletePercent > 100:
		return errors.New("--delete-percent must be in 0..100")
	case c.flushInterval <= 0 || c.pollInterval <= 0:
		return errors.New("--flush-interval and --poll-interval must be positive")
	}
	return nil
}

// kvOp is one operation of the demo's key-value workload. Its record frame
// is: op byte ('P' put, 'D' delete), key length (1 byte), key, value.
type kvOp struct {
	del   bool
	key   string
	value []byte
}

func (o kvOp) encode() []byte {
	b := make([]byte, 0, 2+len(o.key)+len(o.value))
	op := byte('P')
	if o.del {
		op = 'D'
	}
	b = append(b, op, byte(len(o.key)))
	b = append(b, o.key...)
	return append(b, o.value...)
}

func decodeKVOp(b []byte) (kvOp, error) {
	if len(b) < 2 || len(b) < 2+int(b[1]) || (b[0] != 'P' && b[0] != 'D') {
		return kvOp{}, fmt.Errorf("not a demo key-value record (%d bytes)", len(b))
	}
	n := int(b[1])
	return kvOp{del: b[0] == 'D', key: string(b[2 : 2+n]), value: b[2+n:]}, nil
}

// primaryMap is the primary's view: for every key, the operation with the
// highest committed sequence. Appenders learn their sequences from Wait in
// any order; keeping the highest gives the same map as applying the log in
// sequence order.
type primaryMap struct {
	mu sync.Mutex
	m  map[string]primaryEntry
}

type primaryEntry struct {
	seq uint64
	op  kvOp
}

func (p *primaryMap) apply(first uint64, ops []kvOp) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, op := range ops {
		seq := first + uint64(i)
		if e, ok := p.m[op.key]; !ok || seq > e.seq {
			p.m[op.key] = primaryEntry{seq: seq, op: op}
		}
	}
}

// final returns the key-value map the log describes.
func (p *primaryMap) final() map[string][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string][]byte, len(p.m))
	for k, e := range p.m {
		if !e.op.del {
			out[k] = e.op.value
		}
	}
	return out
}

// demoReplica is one replica with its own map, touched only by its Run
// goroutine until that goroutine has returned.
type demoReplica struct {
	name  string
	store *faultstore.Store
	r     *wal.Replica
	m     map[string][]byte
	done  chan struct{}
	err   error
}

func newDemoReplica(name string, store casstore.Store, c demoConfig, stderr io.Writer) *demoReplica {
	d := &demoReplica{name: name, store: faultstore.New(store, faultstore.Config{}), m: map[string][]byte{}, done: make(chan struct{})}
	app := wal.TypedApplier(decodeKVOp, func(_ context.Context, _ uint64, op kvOp) error {
		if op.del {
			delete(d.m, op.key)
		} else {
			d.m[op.key] = bytes.Clone(op.value)
		}
		return nil
	})
	d.r = wal.NewReplica(d.store, app, wal.ReplicaConfig{ManifestPath: c.manifest, PollInterval: c.pollInterval, Logger: quietLogger(stderr)})
	return d
}

// demoResult is what the run measured.
type demoResult struct {
	records, dataBytes int64
	elapsed            time.Duration
	commitLat          []time.Duration
	producer           wal.Stats
	maxLag             uint64
	catchUp            time.Duration
}

// firstError keeps the first error reported by any goroutine and cancels
// the work when it arrives.
type firstError struct {
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func (f *firstError) set(err error) {
	f.once.Do(func() { f.err = err; f.cancel() })
}

func demo(ctx context.Context, c demoConfig, stdout, stderr io.Writer) error {
	where := c.url
	if c.url == "" {
		dir, err := os.MkdirTemp("", "objwal-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.url = "file://" + dir
		where = c.url + " (temporary, removed afterwards)"
	}
	base, err := openStore(ctx, c.url)
	if err != nil {
		return err
	}
	defer base.Close()
	// The log's own keys, so that "objwal tail URL --manifest KEY" finds
	// it in any store (a file store URL has no key prefix).
	prefix := "objwal-demo/" + runID() + "/"
	c.manifest, c.segmentPrefix = prefix+wal.DefaultManifestPath, prefix+wal.DefaultSegmentPrefix
	store := base

	fmt.Fprintf(stdout, "objwal demo on %s, manifest %s\n", where, c.manifest)
	fmt.Fprintf(stdout, "workload: %d records (%d%% deletes) over %d keys, %d appenders, %d records per group, values of %d B\n\n",
		c.records, c.deletePercent, c.keys, c.appenders, c.group, c.valueSize)

	pstore := faultstore.New(store, faultstore.Config{})
	replicas := []*demoReplica{newDemoReplica("replica-1", store, c, stderr), newDemoReplica("replica-2", store, c, stderr)}
	res, err := demoRun(ctx, c, pstore, replicas, stderr)
	if err != nil {
		return err
	}
	prim := res.primary.final()
	writeDemoTable(stdout, res.demoResult, pstore, replicas)

	fmt.Fprintln(stdout)
	mismatch := false
	for _, r := range replicas {
		if diff := diffMaps(prim, r.m); diff != "" {
			mismatch = true
			fmt.Fprintf(stdout, "check: %s != primary: %s\n", r.name, diff)
		} else {
			fmt.Fprintf(stdout, "check: %s == primary (%d keys, cursor at sequence %d)\n", r.name, len(prim), r.r.Next())
		}
	}
	if mismatch {
		return errors.New("a replica differs from the primary")
	}
	return nil
}

// demoRunResult adds the primary's map to the measurements.
type demoRunResult struct {
	demoResult
	primary *primaryMap
}

// demoRun drives the workload and returns once the producer is closed, both
// replicas have applied everything and every goroutine has stopped.
func demoRun(ctx context.Context, c demoConfig, pstore *faultstore.Store, replicas []*demoReplica, stderr io.Writer) (res demoRunResult, err error) {
	res.primary = &primaryMap{m: map[string]primaryEntry{}}
	p, err := wal.NewProducer(ctx, pstore, wal.ProducerConfig{
		ManifestPath: c.manifest, SegmentPrefix: c.segmentPrefix, FlushInterval: c.flushInterval, Logger: quietLogger(stderr),
	})
	if err != nil {
		return res, fmt.Errorf("start producer: %w", err)
	}
	start := p.Stats().NextSequence

	// The replicas run until rctx ends, which happens on every path out.
	rctx, stopReplicas := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	for _, r := range replicas {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			defer close(r.done)
			r.err = r.r.Run(rctx)
		}()
	}
	defer func() { stopReplicas(); rwg.Wait() }()

	wctx, cancelWork := context.WithCancel(ctx)
	defer cancelWork()
	fail := &firstError{cancel: cancelWork}
	var (
		claimed   atomic.Int64 // records handed to appenders
		committed atomic.Int64 // records whose group committed
		dataBytes atomic.Int64
		lat       latencies
		wg        sync.WaitGroup
	)
	bar := startProgress(stderr, int64(c.records), func() (int64, string) {
		n := committed.Load()
		return n, fmt.Sprintf("%d/%d records committed, replicas at %d and %d", n, c.records, replicas[0].r.Next()-start, replicas[1].r.Next()-start)
	})
	defer bar.stop()
	var maxLag atomic.Uint64
	sampleDone := make(chan struct{})
	var swg sync.WaitGroup
	stopSampler := sync.OnceFunc(func() { close(sampleDone); swg.Wait() })
	defer stopSampler()
	swg.Add(1)
	go func() { // replica lag sampler
		defer swg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-sampleDone:
				return
			}
			head := p.Stats().NextSequence
			for _, r := range replicas {
				if n := r.r.Next(); head > n && head-n > maxLag.Load() {
					maxLag.Store(head - n)
				}
			}
		}
	}()

	t0 := time.Now()
	for a := range c.appenders {
		type pending struct {
			d     *wal.Durability
			start time.Time
			ops   []kvOp
		}
		inflight := make(chan pending, c.window-1)
		wg.Add(2)
		go func() { // waiter: resolves this appender's groups in order
			defer wg.Done()
			for pg := range inflight {
				seq, err := pg.d.Wait(wctx)
				if err != nil {
					fail.set(fmt.Errorf("commit: %w", err))
					continue
				}
				lat.add(time.Since(pg.start))
				res.primary.apply(seq, pg.ops)
				committed.Add(int64(len(pg.ops)))
			}
		}()
		go func() { // appender
			defer wg.Done()
			defer close(inflight)
			rng := rand.New(rand.NewPCG(c.seed, uint64(a)))
			value := make([]byte, c.valueSize)
			for wctx.Err() == nil {
				n := claimed.Add(int64(c.group))
				size := min(int64(c.group), int64(c.records)-(n-int64(c.group)))
				if size <= 0 {
					return
				}
				ops := make([]kvOp, size)
				recs := make([][]byte, size)
				for i := range ops {
					ops[i].key = fmt.Sprintf("key-%08d", rng.IntN(c.keys))
					if rng.IntN(100) < c.deletePercent {
						ops[i].del = true
					} else {
						for j := range value {
							value[j] = 'a' + byte(rng.IntN(26))
						}
						ops[i].value = bytes.Clone(value)
					}
					recs[i] = ops[i].encode()
					dataBytes.Add(int64(len(recs[i])))
				}
				t := time.Now()
				d, err := p.Append(wctx, recs, nil)
				if err != nil {
					fail.set(fmt.Errorf("append: %w", err))
					return
				}
				inflight <- pending{d: d, start: t, ops: ops}
			}
		}()
	}
	wg.Wait()
	closeErr := p.Close(ctx)
	res.elapsed = time.Since(t0)
	bar.stop()
	if fail.err != nil {
		return res, fail.err
	}
	if closeErr != nil {
		return res, fmt.Errorf("close producer: %w", closeErr)
	}
	res.producer = p.Stats()
	res.records, res.dataBytes, res.commitLat = committed.Load(), dataBytes.Load(), lat.sorted()

	// Wait for both replicas to apply the whole log.
	head := res.producer.NextSequence
	caught := time.Now()
	for _, r := range replicas {
		for r.r.Next() < head {
			select {
			case <-r.done:
				return res, fmt.Errorf("%s stopped at sequence %d of %d: %v", r.name, r.r.Next(), head, r.err)
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	res.catchUp = time.Since(caught)
	stopSampler()
	res.maxLag = maxLag.Load()
	stopReplicas()
	rwg.Wait()
	for _, r := range replicas {
		if r.err != nil {
			return res, fmt.Errorf("%s: %w", r.name, r.err)
		}
	}
	return res, nil
}

// writeDemoTable prints the run's numbers and the object-store cost.
func writeDemoTable(w io.Writer, r demoResult, pstore *faultstore.Store, replicas []*demoReplica) {
	ew := &errWriter{w: w}
	ew.printf("  %-22s %d\n", "records", r.records)
	ew.printf("  %-22s %s of record data\n", "bytes", humanBytes(r.dataBytes))
	ew.printf("  %-22s %.2f s\n", "elapsed", r.elapsed.Seconds())
	ew.printf("  %-22s %.2f MB/s, %.0f records/s\n", "write", mbps(r.dataBytes, r.elapsed), float64(r.records)/r.elapsed.Seconds())
	ew.printf("  %-22s %d manifest CAS, %d segments, %.0f records per commit\n", "commits",
		r.producer.Commits, r.producer.Segments, float64(r.producer.Records)/float64(max(1, r.producer.Commits)))
	ew.printf("  %-22s p50 %.1f ms, p99 %.1f ms (Append to Wait, %d groups)\n", "commit latency",
		ms(percentile(r.commitLat, 0.50)), ms(percentile(r.commitLat, 0.99)), len(r.commitLat))
	ew.printf("  %-22s at most %d records behind while running; caught up %.1f ms after the last commit\n", "replica lag",
		r.maxLag, ms(r.catchUp))

	ew.printf("\n  %-22s %12s", "object-store requests", "producer")
	stats := []faultstore.Stats{pstore.Stats()}
	for _, rp := range replicas {
		ew.printf(" %12s", rp.name)
		stats = append(stats, rp.store.Stats())
	}
	ew.printf(" %12s\n", "total")
	row := func(label string, f func(faultstore.Stats) int64, human bool) {
		ew.printf("  %-22s", label)
		var total int64
		for _, s := range stats {
			v := f(s)
			total += v
			if human {
				ew.printf(" %12s", humanBytes(v))
			} else {
				ew.printf(" %12d", v)
			}
		}
		if human {
			ew.printf(" %12s\n", humanBytes(total))
		} else {
			ew.printf(" %12d\n", total)
		}
	}
	for op := range faultstore.OpCount {
		row("  "+op.String(), func(s faultstore.Stats) int64 { return s[op].Requests }, false)
	}
	row("  all", func(s faultstore.Stats) int64 { return s.Total().Requests }, false)
	row("bytes written", func(s faultstore.Stats) int64 { return s.Total().BytesWritten }, true)
	row("bytes read", func(s faultstore.Stats) int64 { return s.Total().BytesRead }, true)
	if w := pstore.Stats().Total().BytesWritten; r.dataBytes > 0 {
		ew.printf("  %-22s %.2f (object bytes written per record byte)\n", "write amplification", float64(w)/float64(r.dataBytes))
	}
	_ = ew.err
}

// diffMaps describes the first difference between want and got, or returns
// "" when they are equal.
func diffMaps(want, got map[string][]byte) string {
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			return fmt.Sprintf("key %q missing (%d keys, want %d)", k, len(got), len(want))
		}
		if !bytes.Equal(g, v) {
			return fmt.Sprintf("key %q is %q, want %q", k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("extra key %q (%d keys, want %d)", k, len(got), len(want))
		}
	}
	return ""
}
