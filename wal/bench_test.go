package wal_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/faultstore"
	"github.com/objwal/objwal/wal"
)

// Benchmarks. Run them with
//
//	go test -run '^$' -bench . -benchtime 2s ./wal/
//
// Each reports MB/s (of record bytes) and the figures it is measured
// against: commits/s, and the bound of a design that runs one flush at a
// time (upload, then commit, then the next flush): FlushBytes ÷ 2 round
// trips.

// discardSegments is a memory store that keeps manifests but drops segment
// bytes, so producer benchmarks measure the pipeline, not the heap.
type discardSegments struct{ *casstore.Memory }

func (d discardSegments) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	if strings.HasPrefix(key, "wal/seg/") {
		return d.Memory.Put(ctx, key, nil, cond)
	}
	return d.Memory.Put(ctx, key, data, cond)
}

func latencyStore(inner casstore.Store, latency time.Duration) *faultstore.Store {
	var rules []faultstore.Rule
	if latency > 0 {
		rules = []faultstore.Rule{{Latency: latency, Jitter: latency / 10}}
	}
	return faultstore.New(inner, faultstore.Config{Rules: rules})
}

const benchFlushBytes = 1 << 20

func benchProducerConfig() wal.ProducerConfig {
	return wal.ProducerConfig{
		FlushInterval:    10 * time.Millisecond,
		FlushBytes:       benchFlushBytes,
		SegmentMaxBytes:  benchFlushBytes,
		MaxInFlightBytes: 64 << 20,
		Logger:           quiet(),
	}
}

// benchProduce drives b.N records of size bytes from appenders goroutines,
// each appending one record per Append without waiting for each commit
// (their last Durability is waited for at the end).
func benchProduce(b *testing.B, latency time.Duration, size, appenders int) {
	benchProduceWith(b, benchProducerConfig(), latency, size, appenders)
}

// benchProduceWith is benchProduce with a given producer configuration.
func benchProduceWith(b *testing.B, cfg wal.ProducerConfig, latency time.Duration, size, appenders int) {
	ctx := context.Background()
	fs := latencyStore(discardSegments{casstore.NewMemory()}, latency)
	p, err := wal.NewProducer(ctx, fs, cfg)
	if err != nil {
		b.Fatal(err)
	}
	record := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	var issued atomic.Int64
	var wg sync.WaitGroup
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last *wal.Durability
			for issued.Add(1) <= int64(b.N) {
				d, err := p.Append(ctx, [][]byte{record}, nil)
				if err != nil {
					b.Error(err)
					return
				}
				last = d
			}
			if last != nil {
				if _, err := last.Wait(ctx); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	st := p.Stats()
	if err := p.Close(ctx); err != nil {
		b.Fatal(err)
	}
	commits := float64(st.Commits) / elapsed.Seconds()
	b.ReportMetric(commits, "commits/s")
	if st.Commits > 0 {
		b.ReportMetric(float64(st.Segments)/float64(st.Commits), "segments/commit")
	}
}

// BenchmarkPipelining: 4 KiB records from 64 appenders with 20 ms on every
// store request. The persistent committer overlaps the uploads of flush N+1
// with the commit of flush N and coalesces segments; mode=serial measures
// the seed's one-flush-at-a-time pipeline on the same code as the baseline.
func BenchmarkPipelining(b *testing.B) {
	for _, lat := range []time.Duration{0, 20 * time.Millisecond} {
		for _, serial := range []bool{false, true} {
			cfg, mode := benchProducerConfig(), "pipelined"
			if serial {
				cfg, mode = wal.WithSerialFlushes(cfg), "serial"
			}
			b.Run(fmt.Sprintf("latency=%v/mode=%s", lat, mode), func(b *testing.B) { benchProduceWith(b, cfg, lat, 4096, 64) })
		}
	}
}

// BenchmarkRecordSize: MB/s of 100 B records against 4 KiB records, one
// record per Append, 16 appenders. Budgets and flush triggers are in
// bytes, so small records are not capped by a count of batches.
func BenchmarkRecordSize(b *testing.B) {
	for _, lat := range []time.Duration{0, 20 * time.Millisecond} {
		for _, size := range []int{100, 4096} {
			b.Run(fmt.Sprintf("latency=%v/size=%d", lat, size), func(b *testing.B) { benchProduce(b, lat, size, 16) })
		}
	}
}

// BenchmarkCommitLatency: one appender waiting for each commit, with 20 ms
// per request: the floor is FlushInterval + one segment PUT + one manifest
// CAS (about 2 round trips).
func BenchmarkCommitLatency(b *testing.B) {
	const lat = 20 * time.Millisecond
	ctx := context.Background()
	fs := latencyStore(discardSegments{casstore.NewMemory()}, lat)
	cfg := benchProducerConfig()
	cfg.FlushInterval = time.Millisecond
	p, err := wal.NewProducer(ctx, fs, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(ctx)
	var lats []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		d, err := p.Append(ctx, [][]byte{[]byte("x")}, nil)
		if err == nil {
			_, err = d.Wait(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		lats = append(lats, time.Since(t0))
	}
	slices.Sort(lats)
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1e3, "p99-ms")
	b.ReportMetric(float64(2*lat.Milliseconds()+int64(cfg.FlushInterval/time.Millisecond)), "floor-ms")
}

// BenchmarkReplicaCatchup: a fresh replica reads 32 segments of 256 KiB
// with 20 ms per GET; prefetch 8 overlaps the GETs that prefetch 1 makes
// one at a time.
func BenchmarkReplicaCatchup(b *testing.B) {
	ctx := context.Background()
	mem := casstore.NewMemory()
	cfg := benchProducerConfig()
	cfg.SegmentMaxBytes, cfg.FlushBytes = 256<<10, 256<<10
	p, err := wal.NewProducer(ctx, mem, cfg)
	if err != nil {
		b.Fatal(err)
	}
	record := make([]byte, 4096)
	var last *wal.Durability
	const records = 32 * 63 // 63 records of 4 KiB fit a 256 KiB segment
	for range records {
		if last, err = p.Append(ctx, [][]byte{record}, nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := last.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		b.Fatal(err)
	}
	fs := latencyStore(mem, 20*time.Millisecond)
	for _, prefetch := range []int{1, 8} {
		b.Run(fmt.Sprintf("prefetch=%d", prefetch), func(b *testing.B) {
			b.SetBytes(records * 4096)
			for b.Loop() {
				r := wal.NewReplica(fs, wal.ApplyFunc(func(context.Context, wal.Record) error { return nil }),
					wal.ReplicaConfig{Prefetch: prefetch, Logger: quiet()})
				n, err := r.Poll(ctx)
				if err != nil || n != records {
					b.Fatalf("applied %d: %v", n, err)
				}
			}
		})
	}
}

// BenchmarkReplicaGroupsPerSegment: one segment whose every record is its
// own Append group with its own meta. Metadata is walked alongside the
// records, so the cost per record stays flat as groups per segment grow
// (the seed's lookup per record made it quadratic).
func BenchmarkReplicaGroupsPerSegment(b *testing.B) {
	for _, groups := range []int{1 << 10, 1 << 14} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			ctx := context.Background()
			mem := casstore.NewMemory()
			cfg := benchProducerConfig()
			cfg.FlushInterval, cfg.FlushBytes, cfg.SegmentMaxBytes = time.Hour, 64<<20, 64<<20
			p, err := wal.NewProducer(ctx, mem, cfg)
			if err != nil {
				b.Fatal(err)
			}
			for i := range groups {
				if _, err := p.Append(ctx, [][]byte{[]byte("r")}, fmt.Appendf(nil, "g%d", i)); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				r := wal.NewReplica(mem, wal.ApplyFunc(func(context.Context, wal.Record) error { return nil }), wal.ReplicaConfig{Logger: quiet()})
				if n, err := r.Poll(ctx); err != nil || n != groups {
					b.Fatalf("applied %d: %v", n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*groups), "ns/record")
		})
	}
}
