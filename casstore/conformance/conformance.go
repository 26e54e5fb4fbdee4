// Package conformance is the one test suite every casstore.Store passes.
//
// An adapter's test calls Run with a function that opens a fresh store:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) casstore.Store {
//			s := casstore.NewMemory()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Run calls newStore once per case, so each case gets its own handle (the
// "Close" case closes it). Every case works under its own random key prefix
// "conformance-<random>/", so the suite also runs against a shared, non-empty
// bucket: "fresh and empty" holds per prefix, and listings look only there
// (one listing without a prefix stops as soon as it has passed the case's
// keys). Objects a case wrote are deleted when it ends.
//
// The suite checks what the casstore contract promises: round trips of empty,
// small and multi-MiB objects under odd keys, ranged reads, listings with
// pagination and prefixes, each condition winning and losing, version tokens,
// cancelled contexts, a read-modify-write race of IfMatch writers, and a
// concurrent history of puts and gets checked for linearizability with
// porcupine. Where a store declares a capability as missing
// (casstore.Capabilities), the cases that need it check that the store
// refuses with ErrUnsupported and then skip with the declared reason, so a
// gap shows in `go test -v` output instead of passing silently. Only
// KeyAndDirectoryCoexist writes a key and keys below it ("a" and "a/b"); on a
// store without NestedKeys it checks that such a write fails with an error
// and loses nothing, then skips. Every other case, the listings included,
// runs on such stores too.
//
// A history that is not linearizable is reported key by key in call order,
// and porcupine's HTML visualization of it is written to the temporary
// directory (the failure names the file).
//
// Options shrink the heavy cases for slow backends; the defaults are the
// numbers the project's issue asks for.
//
// The cases are written against T, the part of *testing.T they use. Check
// runs the same cases outside go test, as `objwal conformance URL` does
// against a user's bucket, and returns a Result per case instead of
// reporting to package testing.
package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
)

// Option adjusts Run.
type Option func(*config)

type config struct {
	raceWriters  int
	raceAttempts int
	listCount    int
	largeSize    int
	linClients   int
	linOps       int
	linKeys      int
	timeout      time.Duration
	linTimeout   time.Duration
	keepObjects  bool
	match        *regexp.Regexp // nil: every case
}

func defaultConfig() config {
	return config{
		raceWriters:  16,
		raceAttempts: 20,
		listCount:    1100,
		largeSize:    8 << 20,
		linClients:   4,
		linOps:       40,
		linKeys:      3,
		timeout:      2 * time.Minute,
		linTimeout:   20 * time.Second,
	}
}

// WithRaceWriters sets how many goroutines race read-modify-write IfMatch
// increments of one counter (default 16) and how many attempts each makes
// (default 20). Values below 1 are ignored.
func WithRaceWriters(writers, attemptsEach int) Option {
	return func(c *config) {
		if writers > 0 {
			c.raceWriters = writers
		}
		if attemptsEach > 0 {
			c.raceAttempts = attemptsEach
		}
	}
}

// WithListCount sets how many keys the pagination case writes and lists
// (default 1,100: more than one page of 1,000 on S3, GCS and Azure). Values
// below 1 are ignored.
func WithListCount(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.listCount = n
		}
	}
}

// WithLargeObjectSize sets the size in bytes of the large round-trip object
// (default 8 MiB). Values below 2 are ignored.
func WithLargeObjectSize(n int) Option {
	return func(c *config) {
		if n > 1 {
			c.largeSize = n
		}
	}
}

// WithLinearizability sets the linearizability case's shape: clients
// concurrent clients, each doing opsEach operations spread over keys keys
// (defaults 4, 40, 3). Values below 1 are ignored.
func WithLinearizability(clients, opsEach, keys int) Option {
	return func(c *config) {
		if clients > 0 {
			c.linClients = clients
		}
		if opsEach > 0 {
			c.linOps = opsEach
		}
		if keys > 0 {
			c.linKeys = keys
		}
	}
}

// WithTimeout bounds each concurrent case (the race and the history for
// linearizability), so that a backend that hangs fails the case instead of
// the whole test binary (default 2 minutes). It is a guard against hangs,
// not a performance assertion.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithKeepObjects leaves every object a case wrote in the store instead of
// deleting its prefix when the case ends, for debugging against a bucket.
func WithKeepObjects() Option {
	return func(c *config) { c.keepObjects = true }
}

// Run runs every conformance case as a subtest of t. newStore must return a
// store handle of its own for each call (it may register t.Cleanup to close
// it or remove its files); the suite writes only under a random prefix per
// case.
func Run(t *testing.T, newStore func(t *testing.T) casstore.Store, opts ...Option) {
	t.Helper()
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	for _, c := range cases {
		if cfg.match != nil && !cfg.match.MatchString(c.name) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, newStore(t), &cfg)
			c.run(t, e)
		})
	}
}

// A testCase is one named conformance case.
type testCase struct {
	name string
	run  func(t T, e *env)
}

// cases is the suite, in the order Run runs it.
var cases = []testCase{
	{"RoundTrip", testRoundTrip},
	{"OddKeys", testOddKeys},
	{"BackslashKey", testBackslashKey},
	{"KeyAndDirectoryCoexist", testKeyAndDirectory},
	{"Overwrite", testOverwrite},
	{"EmptyKey", testEmptyKey},
	{"GetRange", testGetRange},
	{"StatGetAgree", testStatGetAgree},
	{"NotFound", testNotFound},
	{"List", testList},
	{"ListPagination", testListPagination},
	{"ListWithoutPrefix", testListWithoutPrefix},
	{"IfAbsent", testIfAbsent},
	{"IfMatch", testIfMatch},
	{"UnsupportedConditions", testUnsupportedConditions},
	{"VersionsChange", testVersionsChange},
	{"Delete", testDelete},
	{"DeleteIfMatch", testDeleteIfMatch},
	{"CancelledContext", testCancelledContext},
	{"Race", testRace},
	{"Linearizability", testLinearizability},
	{"Close", testClose},
}

// env is one case's view of the store: the raw store and the case's prefix.
type env struct {
	s    casstore.Store
	p    string // "conformance-<random>/"
	caps casstore.Capabilities
	cfg  *config
}

func newEnv(t T, s casstore.Store, cfg *config) *env {
	t.Helper()
	if s == nil {
		t.Fatal("newStore returned a nil Store")
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random prefix: %v", err)
	}
	e := &env{s: s, p: "conformance-" + hex.EncodeToString(b[:]) + "/", caps: s.Capabilities(), cfg: cfg}
	if !cfg.keepObjects {
		// Registered after newStore's own cleanups, so it runs before them,
		// while the store is still open.
		t.Cleanup(func() { e.cleanup(t) })
	}
	return e
}

// k returns the store key for name inside the case's prefix.
func (e *env) k(name string) string { return e.p + name }

// cleanup deletes what the case wrote, best effort.
func (e *env) cleanup(t T) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.timeout)
	defer cancel()
	var keys []string
	for info, err := range e.s.List(ctx, e.p) {
		if err != nil {
			if !errors.Is(err, casstore.ErrClosed) {
				t.Logf("cleanup: listing %s: %v", e.p, err)
			}
			return
		}
		keys = append(keys, info.Key)
	}
	for _, k := range keys {
		if err := e.s.Delete(ctx, k, casstore.None()); err != nil && !errors.Is(err, casstore.ErrNotFound) {
			t.Logf("cleanup: %v", err)
			return
		}
	}
}

func (e *env) put(t T, key string, data []byte, cond casstore.Condition) casstore.Version {
	t.Helper()
	v, err := e.s.Put(t.Context(), key, data, cond)
	if err != nil {
		t.Fatalf("Put(%q, %d bytes, %v): %v", key, len(data), cond, err)
	}
	if v == "" {
		t.Fatalf("Put(%q, %v) succeeded with an empty version", key, cond)
	}
	return v
}

func (e *env) get(t T, key string) ([]byte, casstore.ObjectInfo) {
	t.Helper()
	b, info, err := e.s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return b, info
}

// wantObject checks that key holds exactly data at version v.
func (e *env) wantObject(t T, key string, data []byte, v casstore.Version) {
	t.Helper()
	got, info := e.get(t, key)
	if !bytes.Equal(got, data) {
		t.Errorf("Get(%q) = %s, want %s", key, describe(got), describe(data))
	}
	if info.Version != v {
		t.Errorf("Get(%q) version = %q, want %q", key, info.Version, v)
	}
	if info.Size != int64(len(data)) {
		t.Errorf("Get(%q) info.Size = %d, want %d", key, info.Size, len(data))
	}
}

// wantAbsent checks that Stat reports ErrNotFound for key.
func (e *env) wantAbsent(t T, key string) {
	t.Helper()
	_, err := e.s.Stat(t.Context(), key)
	wantErr(t, fmt.Sprintf("Stat(%q)", key), err, casstore.ErrNotFound)
}

// wantErr fails unless errors.Is(err, want).
func wantErr(t T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error = %v, want %v", what, err, want)
	}
}

// describe renders bytes briefly for failure messages.
func describe(b []byte) string {
	if len(b) <= 64 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%d bytes starting %q", len(b), b[:32])
}

// gaps renders declared capability gaps for skip messages.
func (e *env) gaps() string {
	if len(e.caps.Gaps) == 0 {
		return "no reason declared in Capabilities().Gaps"
	}
	return strings.Join(e.caps.Gaps, "; ")
}
