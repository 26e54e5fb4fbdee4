package wal_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/faultstore"
	"github.com/objwal/objwal/wal"
)

const chaosRequestTimeout = 50 * time.Millisecond

// chaosRules injects every kind of write and read trouble at moderate rates:
// lost replies (the write lands, the caller gets an error), clean 5xx, and
// S3's 409 on the manifest, plus latency so that operations overlap.
func chaosRules(r *rand.Rand, harsh float64) []faultstore.Rule {
	f := func(max float64) float64 { return r.Float64() * max * harsh }
	return []faultstore.Rule{
		{Latency: time.Millisecond, Jitter: 3 * time.Millisecond},
		{Ops: faultstore.OpsOf(faultstore.OpPut), Key: "wal/manifest", LostReplyRate: f(0.2), FailRate: f(0.1)},
		{Ops: faultstore.OpsOf(faultstore.OpPut), Key: "wal/manifest", FailRate: f(0.1), FailErr: casstore.ErrConflict},
		{Ops: faultstore.OpsOf(faultstore.OpPut), Key: "wal/seg/*/*", LostReplyRate: f(0.15), FailRate: f(0.1)},
		{Ops: faultstore.Reads, FailRate: f(0.1), CorruptRate: f(0.02)},
		// Replies slower than the request timeout: the write lands, the
		// caller times out.
		{Ops: faultstore.Writes, SlowReplyRate: f(0.05), SlowReply: 2 * chaosRequestTimeout},
	}
}

// TestRandomizedFaultSchedules runs appenders against one producer through
// randomized schedules of lost replies, 5xx and 409s, with a short retry
// window so that some schedules halt the producer mid-commit; every outcome
// is checked against a final read (never lost, duplicated or reordered;
// errors truthful) and with porcupine.
func TestRandomizedFaultSchedules(t *testing.T) {
	seed := seedFor(t)
	for round := range 6 {
		rs := seed + uint64(round)
		t.Run("", func(t *testing.T) {
			t.Logf("round seed %d", rs)
			runFaultSchedule(t, rs)
		})
	}
}

func runFaultSchedule(t *testing.T, seed uint64) {
	ctx := testCtx(t, 60*time.Second)
	r := rand.New(rand.NewPCG(seed, 1))
	harsh := 1 + 2*r.Float64() // up to 3x the base rates: some schedules halt mid-commit
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{Seed: seed, Rules: chaosRules(r, harsh)})
	h := newHistory()
	cfg := fastConfig()
	cfg.RetryWindow = time.Duration(5+r.IntN(200)) * time.Millisecond
	cfg.RequestTimeout = chaosRequestTimeout
	cfg.SegmentMaxBytes = 64 + r.IntN(256) // several segments per flush
	cfg.UploadConcurrency = 1 + r.IntN(4)
	var p *wal.Producer
	var err error
	for p == nil {
		if p, err = wal.NewProducer(ctx, fs, cfg); err != nil && ctx.Err() != nil {
			t.Fatalf("claim: %v", err)
		}
	}
	// Half of the schedules end in a storm: the manifest's writes lose
	// their replies and its reads fail, so the producer halts with commits
	// whose outcome it cannot learn.
	stormAt := int64(-1)
	if r.IntN(2) == 0 {
		stormAt = int64(r.IntN(150))
	}
	storm := []faultstore.Rule{
		{Ops: faultstore.OpsOf(faultstore.OpPut), Key: "wal/manifest", LostReplyRate: 0.6, FailRate: 0.3},
		{Ops: faultstore.Reads, Key: "wal/manifest", FailRate: 0.9},
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				st := h.appendAndWait(t, ctx, c+1, p, 1+c%3)
				if done.Add(1) == stormAt {
					fs.SetRules(storm)
				}
				if st == statusFailed {
					return
				}
			}
		}()
	}
	wg.Wait()
	closeErr := p.Close(ctx)
	fs.SetRules(nil)
	st := p.Stats()
	t.Logf("harshness %.1f, retry window %v: %d commits, %d commit retries, %d injected errors; producer ended with %v",
		harsh, cfg.RetryWindow, st.Commits, st.CommitRetries, fs.Stats().Total().Errors, closeErr)
	h.check(t, tailAll(t, ctx, fs.Inner()))
}

// TestFencingZombies starts producers one after another on one log while
// the earlier ones are still appending under faults. Each newer claim fences
// the older producers; the zombies must commit nothing after that, every
// acknowledged record must survive exactly once in order, and every refusal
// must be truthful.
func TestFencingZombies(t *testing.T) {
	seed := seedFor(t)
	ctx := testCtx(t, 90*time.Second)
	r := rand.New(rand.NewPCG(seed, 2))
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{Seed: seed, Rules: chaosRules(r, 1)})
	h := newHistory()
	cfg := fastConfig()
	cfg.SegmentMaxBytes = 128
	cfg.RequestTimeout = chaosRequestTimeout
	var wg sync.WaitGroup
	var producers []*wal.Producer
	var mu sync.Mutex
	for gen := range 5 {
		p, err := wal.NewProducer(ctx, fs, cfg)
		if err != nil {
			t.Logf("generation %d claim failed: %v", gen, err)
			if !errors.Is(err, wal.ErrFenced) && !transientClaimError(err) {
				t.Fatalf("claim: %v", err)
			}
			continue
		}
		mu.Lock()
		producers = append(producers, p)
		mu.Unlock()
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 25 {
					if h.appendAndWait(t, ctx, gen*10+c+1, p, 1+c%2) == statusFailed {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(5+r.IntN(30)) * time.Millisecond) // let it run before the next claim
	}
	wg.Wait()
	fenced := 0
	for _, p := range producers {
		if err := p.Close(ctx); errors.Is(err, wal.ErrFenced) {
			fenced++
		}
	}
	t.Logf("%d producers, %d ended fenced", len(producers), fenced)
	if len(producers) > 1 && fenced == 0 {
		t.Fatalf("no producer was fenced by a newer claim")
	}
	fs.SetRules(nil)
	h.check(t, tailAll(t, ctx, fs.Inner()))
}

// transientClaimError reports a claim that ran out of retries.
func transientClaimError(err error) bool {
	return errors.Is(err, faultstore.ErrInjected) || errors.Is(err, faultstore.ErrLostReply) ||
		errors.Is(err, casstore.ErrConflict) || errors.Is(err, wal.ErrCorrupt)
}

func TestFencedProducerStops(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	store := casstore.NewMemory()
	p1, err := wal.NewProducer(ctx, store, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := p1.Append(ctx, [][]byte{rec(0)}, nil)
	if _, err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	p2, err := wal.NewProducer(ctx, store, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	if p2.Epoch() != 2 {
		t.Fatalf("second claim epoch %d", p2.Epoch())
	}
	d, err = p1.Append(ctx, [][]byte{rec(99)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Wait(ctx); !errors.Is(err, wal.ErrFenced) || !errors.Is(err, wal.ErrHalted) {
		t.Fatalf("zombie append: %v, want ErrFenced", err)
	}
	if _, err := p1.Append(ctx, [][]byte{rec(98)}, nil); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("append after fencing: %v", err)
	}
	if err := p1.Close(ctx); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("Close of a fenced producer: %v", err)
	}
	d, _ = p2.Append(ctx, [][]byte{rec(1)}, nil)
	if seq, err := d.Wait(ctx); err != nil || seq != 1 {
		t.Fatalf("new primary: seq %d err %v", seq, err)
	}
	p2.Close(ctx)
	got := tailAll(t, ctx, store)
	if len(got) != 2 || string(got[1].Data) != string(rec(1)) {
		t.Fatalf("log after failover: %d records", len(got))
	}
}

// TestConcurrentClaims: of producers claiming at once, each claim either
// wins or reports ErrFenced, and only the highest epoch can commit.
func TestConcurrentClaims(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	store := casstore.NewMemory()
	var wg sync.WaitGroup
	ps := make([]*wal.Producer, 6)
	errs := make([]error, 6)
	for i := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps[i], errs[i] = wal.NewProducer(ctx, store, fastConfig())
		}()
	}
	wg.Wait()
	var top *wal.Producer
	for i, p := range ps {
		if errs[i] != nil {
			if !errors.Is(errs[i], wal.ErrFenced) {
				t.Fatalf("claim %d: %v", i, errs[i])
			}
			continue
		}
		if top == nil || p.Epoch() > top.Epoch() {
			top = p
		}
	}
	for _, p := range ps {
		if p == nil {
			continue
		}
		d, err := p.Append(ctx, [][]byte{rec(int(p.Epoch()))}, nil)
		if err == nil {
			_, err = d.Wait(ctx)
		}
		if (p == top) != (err == nil) {
			t.Fatalf("producer at epoch %d (top %d): %v", p.Epoch(), top.Epoch(), err)
		}
		p.Close(ctx)
	}
}
