package wal_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/faultstore"
	"github.com/objwal/objwal/wal"
)

// gatedStore holds writes to one key until the gate opens.
type gatedStore struct {
	casstore.Store
	key  string
	gate chan struct{}
}

func (g *gatedStore) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	if key == g.key {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return g.Store.Put(ctx, key, data, cond)
}

// waitBlocked reports whether ch stays open for a short while: a weak,
// one-sided check (it can only fail if the call really returned).
func stillBlocked(ch <-chan error) bool {
	select {
	case <-ch:
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

func TestBackpressure(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	mem := casstore.NewMemory()
	gs := &gatedStore{Store: mem, key: "wal/manifest", gate: make(chan struct{})}
	cfg := fastConfig()
	cfg.SegmentMaxBytes = 2048
	cfg.MaxInFlightBytes = 4096
	// The claim must pass the gate: open it for the claim only.
	close(gs.gate)
	p, err := wal.NewProducer(ctx, gs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gs.gate = make(chan struct{}) // commits now block (the committer reads gs.gate on each Put)
	// Fill the budget: commits cannot complete, so nothing is released.
	var ds []*wal.Durability
	for i := 0; ; i++ {
		actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		d, err := p.Append(actx, [][]byte{bytes.Repeat([]byte{byte(i)}, 1000)}, nil)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		if i > 10 {
			t.Fatalf("%d KB appended into a 4 KB budget without blocking", i)
		}
	}
	if len(ds) == 0 {
		t.Fatal("the first append blocked")
	}
	// A blocked Append honours cancellation and appends nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		_, err := p.Append(cctx, [][]byte{bytes.Repeat([]byte("x"), 1000)}, nil)
		cancelled <- err
	}()
	// And one that waits is released when commits free the budget.
	released := make(chan error, 1)
	var late *wal.Durability
	go func() {
		d, err := p.Append(ctx, [][]byte{bytes.Repeat([]byte("L"), 1000)}, nil)
		late = d
		released <- err
	}()
	if !stillBlocked(released) {
		t.Fatal("Append did not block on a spent budget")
	}
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Append: %v", err)
	}
	close(gs.gate)
	if err := <-released; err != nil {
		t.Fatalf("released Append: %v", err)
	}
	for _, d := range append(ds, late) {
		if _, err := d.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := tailAll(t, ctx, mem)
	if len(got) != len(ds)+1 || got[len(got)-1].Data[0] != 'L' {
		t.Fatalf("log has %d records", len(got))
	}
	for _, r := range got {
		if r.Data[0] == 'x' {
			t.Fatal("a cancelled Append reached the log")
		}
	}
}

// TestUploadOrderVsCommitOrder: the upload of segment 0 lands long after
// segment 1's; segment 1 must still commit after segment 0.
func TestUploadOrderVsCommitOrder(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{Rules: []faultstore.Rule{
		{Ops: faultstore.OpsOf(faultstore.OpPut), Key: "wal/seg/*/0000000000000000", Latency: 300 * time.Millisecond},
	}})
	cfg := fastConfig()
	cfg.SegmentMaxBytes = 1024 // one 600-byte group per segment
	cfg.FlushInterval = time.Hour
	cfg.FlushBytes = 1200 // both groups seal together, as ordinals 0 and 1
	p, err := wal.NewProducer(ctx, fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.Append(ctx, [][]byte{bytes.Repeat([]byte("a"), 600)}, nil)
	b, _ := p.Append(ctx, [][]byte{bytes.Repeat([]byte("b"), 600)}, nil)
	seqB, err := b.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Resolved() {
		t.Fatal("segment 1 resolved while segment 0 was still uploading")
	}
	seqA, err := a.Wait(ctx)
	if err != nil || seqA != 0 || seqB != 1 {
		t.Fatalf("a at %d, b at %d (%v)", seqA, seqB, err)
	}
	if st := p.Stats(); st.Segments != 2 {
		t.Fatalf("%d segments", st.Segments)
	}
	p.Close(ctx)
	got := tailAll(t, ctx, fs.Inner())
	if len(got) != 2 || got[0].Data[0] != 'a' || got[1].Data[0] != 'b' {
		t.Fatalf("log order wrong")
	}
}

// TestFailedMiddleUpload: segment 1 of 0..2 never uploads. Segment 0
// commits; 1 and 2 are reported not in the log (even though 2 uploaded),
// and no replica ever sees them.
func TestFailedMiddleUpload(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{Rules: []faultstore.Rule{
		{Ops: faultstore.OpsOf(faultstore.OpPut), Key: "wal/seg/*/0000000000000001", FailRate: 1},
	}})
	cfg := fastConfig()
	cfg.SegmentMaxBytes = 1024
	cfg.FlushInterval = time.Hour
	cfg.FlushBytes = 600
	cfg.RetryWindow = 100 * time.Millisecond
	p, err := wal.NewProducer(ctx, fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.Append(ctx, [][]byte{bytes.Repeat([]byte("a"), 600)}, nil)
	if _, err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.FlushBytes = 1200
	b, _ := p.Append(ctx, [][]byte{bytes.Repeat([]byte("b"), 600)}, nil)
	c, _ := p.Append(ctx, [][]byte{bytes.Repeat([]byte("c"), 600)}, nil)
	for _, d := range []*wal.Durability{b, c} {
		_, err := d.Wait(ctx)
		if !errors.Is(err, wal.ErrHalted) || errors.Is(err, wal.ErrOutcomeUnknown) {
			t.Fatalf("group after the failed upload: %v, want ErrHalted", err)
		}
		if !errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("halt error does not carry its cause: %v", err)
		}
	}
	if err := p.Close(ctx); !errors.Is(err, wal.ErrHalted) {
		t.Fatalf("Close: %v", err)
	}
	got := tailAll(t, ctx, fs.Inner())
	if len(got) != 1 || got[0].Data[0] != 'a' {
		t.Fatalf("log has %d records", len(got))
	}
}

// TestUnknownOutcomeIsReported: the manifest CAS lands but its reply is
// lost, and the manifest cannot be read back. The producer halts and must
// say the outcome is unknown, not that the records failed: they are in
// the log.
func TestUnknownOutcomeIsReported(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{})
	cfg := fastConfig()
	cfg.RetryWindow = 50 * time.Millisecond
	p, err := wal.NewProducer(ctx, fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fs.SetRules([]faultstore.Rule{
		{Ops: faultstore.OpsOf(faultstore.OpPut), Key: "wal/manifest", LostReplyRate: 1},
		{Ops: faultstore.Reads, Key: "wal/manifest", FailRate: 1},
	})
	d, _ := p.Append(ctx, [][]byte{rec(0)}, nil)
	_, err = d.Wait(ctx)
	if !errors.Is(err, wal.ErrOutcomeUnknown) || errors.Is(err, wal.ErrHalted) {
		t.Fatalf("Wait: %v, want ErrOutcomeUnknown only", err)
	}
	if _, err := p.Append(ctx, [][]byte{rec(1)}, nil); !errors.Is(err, wal.ErrHalted) {
		t.Fatalf("Append after halt: %v", err)
	}
	p.Close(ctx)
	fs.SetRules(nil)
	if got := tailAll(t, ctx, fs.Inner()); len(got) != 1 {
		t.Fatalf("the lost-reply commit should have landed; log has %d records", len(got))
	}
}

// TestLostReplyResolvedByOwnKeys: every manifest CAS loses its reply but
// reads work: the producer finds its own segment keys and acknowledges
// exactly once.
func TestLostReplyResolvedByOwnKeys(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{})
	p, err := wal.NewProducer(ctx, fs, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	fs.SetRules([]faultstore.Rule{{Ops: faultstore.OpsOf(faultstore.OpPut), LostReplyRate: 1}})
	for i := range 5 {
		d, err := p.Append(ctx, [][]byte{rec(i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if seq, err := d.Wait(ctx); err != nil || seq != uint64(i) {
			t.Fatalf("group %d: seq %d err %v", i, seq, err)
		}
	}
	p.Close(ctx)
	fs.SetRules(nil)
	got := tailAll(t, ctx, fs.Inner())
	if len(got) != 5 {
		t.Fatalf("log has %d records, want 5 (no duplicates)", len(got))
	}
}

// TestCloseRacingAppend: appends race Close; each either is refused with
// ErrClosed (and is absent) or commits; no goroutine outlives Close.
func TestCloseRacingAppend(t *testing.T) {
	seed := seedFor(t)
	for round := range 5 {
		ctx := testCtx(t, 30*time.Second)
		before := runtime.NumGoroutine()
		mem := casstore.NewMemory()
		p, err := wal.NewProducer(ctx, mem, fastConfig())
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var okCount, refused atomic.Int64
		start := make(chan struct{})
		for c := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range 200 {
					d, err := p.Append(ctx, [][]byte{rec(c*1000 + i)}, nil)
					if errors.Is(err, wal.ErrClosed) {
						refused.Add(1)
						return
					}
					if err != nil {
						t.Errorf("append: %v", err)
						return
					}
					if _, err := d.Wait(ctx); err != nil {
						t.Errorf("an accepted append failed: %v", err)
						return
					}
					okCount.Add(1)
				}
			}()
		}
		close(start)
		time.Sleep(time.Duration((seed+uint64(round))%5) * time.Millisecond)
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if got := tailAll(t, ctx, mem); int64(len(got)) != okCount.Load() {
			t.Fatalf("round %d: %d acknowledged, %d in the log", round, okCount.Load(), len(got))
		}
		waitGoroutines(t, before)
	}
}

// waitGoroutines fails if goroutines started by the test do not end
// (polling, because the runtime reaps them asynchronously).
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want <= %d:\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCloseGivesUp: Close with an expired context abandons uncommitted
// groups truthfully and still stops every goroutine.
func TestCloseGivesUp(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	before := runtime.NumGoroutine()
	mem := casstore.NewMemory()
	gs := &gatedStore{Store: mem, key: "wal/manifest", gate: make(chan struct{})}
	close(gs.gate)
	p, err := wal.NewProducer(ctx, gs, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	gs.gate = make(chan struct{}) // never opens: the commit hangs until cancelled
	d, _ := p.Append(ctx, [][]byte{rec(0)}, nil)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := p.Close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	_, err = d.Wait(ctx)
	if !errors.Is(err, wal.ErrClosed) && !errors.Is(err, wal.ErrOutcomeUnknown) {
		t.Fatalf("abandoned group: %v", err)
	}
	waitGoroutines(t, before)
}

// TestPerKeyWriteLimit: with GCS's one write per object per interval on the
// manifest (too-early writes refused like a 429), every append still
// commits: throttled CASes are retried and group commit packs the waiting
// appends into the few writes the limit allows.
func TestPerKeyWriteLimit(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{KeyWriteInterval: 100 * time.Millisecond, KeyWriteKey: "wal/manifest"})
	p, err := wal.NewProducer(ctx, fs, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				d, err := p.Append(ctx, [][]byte{rec(c*10 + i)}, nil)
				if err == nil {
					_, err = d.Wait(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	t.Logf("80 appends in %d commits; %d throttled writes", st.Commits, fs.Stats()[faultstore.OpPut].Throttled)
	if got := tailAll(t, ctx, fs.Inner()); len(got) != 80 {
		t.Fatalf("log has %d records", len(got))
	}
}

// TestSerialFlushesBaseline: the one-flush-at-a-time mode that
// BenchmarkPipelining measures as its baseline still commits every record,
// in order, and never has more than one flush's segments between seal and
// commit (so with one segment per flush, every CAS carries one segment).
func TestSerialFlushesBaseline(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	store := casstore.NewMemory()
	cfg := wal.WithSerialFlushes(fastConfig())
	p, err := wal.NewProducer(ctx, store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	const appenders, each = 8, 40
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				d, err := p.Append(ctx, [][]byte{rec(a*each + i)}, nil)
				if err == nil {
					_, err = d.Wait(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := p.Stats()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Segments != st.Commits {
		t.Fatalf("serial flushes: %d segments in %d commits; want one segment per commit", st.Segments, st.Commits)
	}
	got := tailAll(t, ctx, store)
	if len(got) != appenders*each {
		t.Fatalf("replica saw %d records, want %d", len(got), appenders*each)
	}
	for i, r := range got {
		if r.Sequence != uint64(i) {
			t.Fatalf("record %d has sequence %d", i, r.Sequence)
		}
	}
}
