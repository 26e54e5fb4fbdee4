package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/objwal/objwal/casstore"
)

// testRace: writers goroutines each make attempts read-modify-write
// increments of one counter with IfMatch. Every increment that the store
// acknowledged must be in the final value, no two winners may have written
// the same value (two winners from one version), and every loser must have
// lost with ErrPreconditionFailed or ErrConflict.
func testRace(t T, e *env) {
	if !e.caps.IfMatch {
		t.Skipf("store declares IfMatch unsupported: %s", e.gaps())
	}
	ctx, cancel := context.WithTimeout(t.Context(), e.cfg.timeout)
	defer cancel()
	key := e.k("race/counter")
	e.put(t, key, []byte("0"), casstore.IfAbsent())

	var (
		wins, losses atomic.Int64
		mu           sync.Mutex
		written      []int // the values the winners wrote
		wg           sync.WaitGroup
		start        = make(chan struct{})
	)
	for w := range e.cfg.raceWriters {
		wg.Go(func() {
			<-start // all writers begin together
			for range e.cfg.raceAttempts {
				b, info, err := e.s.Get(ctx, key)
				if err != nil {
					t.Errorf("writer %d: Get: %v", w, err)
					return
				}
				n, err := strconv.Atoi(string(b))
				if err != nil {
					t.Errorf("writer %d: counter holds %q: %v", w, b, err)
					return
				}
				// Let other writers run between the read and the write, so
				// the race is a race even on a fast store with few cores.
				runtime.Gosched()
				_, err = e.s.Put(ctx, key, []byte(strconv.Itoa(n+1)), casstore.IfMatch(info.Version))
				switch {
				case err == nil:
					wins.Add(1)
					mu.Lock()
					written = append(written, n+1)
					mu.Unlock()
				case errors.Is(err, casstore.ErrPreconditionFailed), errors.Is(err, casstore.ErrConflict):
					losses.Add(1)
				default:
					t.Errorf("writer %d: Put IfMatch lost with %v, want ErrPreconditionFailed or ErrConflict", w, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("race did not finish within %v: %v", e.cfg.timeout, ctx.Err())
	}
	b, _ := e.get(t, key)
	final, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatalf("final counter %q: %v", b, err)
	}
	t.Logf("%d writers × %d attempts: %d increments won, %d lost", e.cfg.raceWriters, e.cfg.raceAttempts, wins.Load(), losses.Load())
	if int64(final) != wins.Load() {
		t.Errorf("final counter = %d, but %d increments were acknowledged", final, wins.Load())
	}
	if wins.Load() == 0 {
		t.Errorf("no increment won")
	}
	slices.Sort(written)
	for i, v := range written {
		if v != i+1 {
			t.Errorf("winners wrote %v; want exactly 1..%d once each (two writers won from one version)", summarize(written), len(written))
			break
		}
	}
}

func summarize(v []int) string {
	if len(v) <= 20 {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%v … %v", v[:10], v[len(v)-10:])
}
