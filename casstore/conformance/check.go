package conformance

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
)

// T is the part of *testing.T the cases use, so that the suite runs both
// under go test (Run) and from the objwal tool (Check). testing.TB cannot be
// implemented outside package testing, hence an interface of our own.
//
// As with *testing.T, Fatal, Fatalf, Skip and Skipf end the calling
// goroutine and must be called from the case's own goroutine; Log, Logf,
// Error and Errorf may be called from any goroutine.
type T interface {
	Helper()
	Name() string
	Context() context.Context
	Cleanup(func())
	Log(args ...any)
	Logf(format string, args ...any)
	Error(args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Skipf(format string, args ...any)
}

var _ T = (*testing.T)(nil)

// WithMatch runs only the cases whose name re matches (all of them when re
// is nil), under Run as under Check.
func WithMatch(re *regexp.Regexp) Option {
	return func(c *config) { c.match = re }
}

// Outcome is how a case ended.
type Outcome string

// The outcomes of a case. A case that reported an error and then skipped
// failed.
const (
	Pass Outcome = "pass"
	Fail Outcome = "fail"
	Skip Outcome = "skip"
)

// Result is what one case of Check did.
type Result struct {
	Name     string        // the case's name, as under go test (e.g. "RoundTrip")
	Outcome  Outcome       // pass, fail or skip
	Duration time.Duration // from opening the store to the end of its cleanups
	Messages []string      // everything the case logged, errors and skip reasons included, in order
}

// Summary is what a whole Check did.
type Summary struct {
	Results []Result // in the order the cases ran
	Passed  int
	Failed  int
	Skipped int
	// Err is ctx's error when ctx ended before every case ran; the cases
	// that did not run are not in Results.
	Err error
}

// Check runs the conformance cases outside go test, one after another, each
// in a goroutine of its own, and calls report with each case's Result as it
// ends (report may be nil). newStore is called once per case with ctx and
// must return a store handle of the case's own; Check closes it when the
// case ends. The options are Run's, WithMatch included.
//
// A case fails when it reports an error, when newStore fails, or when it
// panics in its own goroutine (the panic is recovered and its message and
// stack become the case's failure; a panic in a goroutine the case started
// cannot be recovered and ends the process, as under go test). Each case's
// Context is derived from ctx and cancelled when the case ends, before its
// cleanups run in last-in, first-out order. When ctx ends, Check returns
// after the case in progress without starting another.
func Check(ctx context.Context, newStore func(ctx context.Context) (casstore.Store, error), report func(Result), opts ...Option) Summary {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return check(ctx, cases, newStore, report, &cfg)
}

// check is Check over a given list of cases.
func check(ctx context.Context, list []testCase, newStore func(context.Context) (casstore.Store, error), report func(Result), cfg *config) Summary {
	var sum Summary
	for _, c := range list {
		if cfg.match != nil && !cfg.match.MatchString(c.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			sum.Err = err
			break
		}
		r := checkCase(ctx, c, newStore, cfg)
		switch r.Outcome {
		case Pass:
			sum.Passed++
		case Fail:
			sum.Failed++
		case Skip:
			sum.Skipped++
		}
		sum.Results = append(sum.Results, r)
		if report != nil {
			report(r)
		}
	}
	return sum
}

// checkCase runs one case to its end, cleanups included, and returns what
// it did.
func checkCase(ctx context.Context, c testCase, newStore func(context.Context) (casstore.Store, error), cfg *config) Result {
	start := time.Now()
	t := newCheckT(ctx, c.name)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer t.recoverPanic()
		s, err := newStore(ctx)
		if err != nil {
			t.Fatalf("opening the store: %v", err)
		}
		if s == nil {
			t.Fatal("newStore returned a nil Store and no error")
		}
		t.Cleanup(func() { _ = s.Close() }) // runs last: after the case's objects are deleted
		c.run(t, newEnv(t, s, cfg))
	}()
	<-done
	t.cancel()
	t.runCleanups()
	return t.result(time.Since(start))
}

// checkT is Check's T: it records messages and the outcome, and is safe for
// concurrent use.
type checkT struct {
	name   string
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	msgs     []string
	failed   bool
	skipped  bool
	cleanups []func()
}

func newCheckT(parent context.Context, name string) *checkT {
	ctx, cancel := context.WithCancel(parent)
	return &checkT{name: name, ctx: ctx, cancel: cancel}
}

func (t *checkT) Helper()                  {}
func (t *checkT) Name() string             { return t.name }
func (t *checkT) Context() context.Context { return t.ctx }

func (t *checkT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *checkT) Log(args ...any)                 { t.log(sprintln(args...)) }
func (t *checkT) Logf(format string, args ...any) { t.log(fmt.Sprintf(format, args...)) }

func (t *checkT) Error(args ...any) {
	t.log(sprintln(args...))
	t.fail()
}

func (t *checkT) Errorf(format string, args ...any) {
	t.log(fmt.Sprintf(format, args...))
	t.fail()
}

func (t *checkT) Fatal(args ...any) {
	t.Error(args...)
	runtime.Goexit()
}

func (t *checkT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}

func (t *checkT) Skip(args ...any) {
	t.log(sprintln(args...))
	t.skip()
}

func (t *checkT) Skipf(format string, args ...any) {
	t.log(fmt.Sprintf(format, args...))
	t.skip()
}

func (t *checkT) log(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.msgs = append(t.msgs, msg)
}

func (t *checkT) fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}

func (t *checkT) skip() {
	t.mu.Lock()
	t.skipped = true
	t.mu.Unlock()
	runtime.Goexit()
}

// recoverPanic, deferred in a goroutine the case runs on, turns a panic into
// a failure. It does nothing when the goroutine ends by runtime.Goexit
// (Fatal, Skip) or normally.
func (t *checkT) recoverPanic() {
	if r := recover(); r != nil {
		t.Errorf("panic: %v\n%s", r, debug.Stack())
	}
}

// runCleanups calls the registered cleanups, last registered first, each in
// a goroutine of its own so that one that panics or calls Fatal neither
// stops the others nor the tool. A cleanup may register further cleanups.
func (t *checkT) runCleanups() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer t.recoverPanic()
			f()
		}()
		<-done
	}
}

func (t *checkT) result(d time.Duration) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := Result{Name: t.name, Outcome: Pass, Duration: d, Messages: append([]string(nil), t.msgs...)}
	switch {
	case t.failed:
		r.Outcome = Fail
	case t.skipped:
		r.Outcome = Skip
	}
	return r
}

// sprintln formats like fmt.Sprintln without the final newline, as
// testing.T.Log does.
func sprintln(args ...any) string {
	return strings.TrimSuffix(fmt.Sprintln(args...), "\n")
}

// Cases returns the names of the conformance cases in the order Run and
// Check run them, for a tool that lists them or validates a filter.
func Cases() []string {
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	return names
}
