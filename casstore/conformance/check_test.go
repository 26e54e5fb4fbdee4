package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/objwal/objwal/casstore"
)

func newMemory(context.Context) (casstore.Store, error) { return casstore.NewMemory(), nil }

// outcomes maps each case name of sum to its outcome.
func outcomes(sum Summary) map[string]Outcome {
	m := map[string]Outcome{}
	for _, r := range sum.Results {
		m[r.Name] = r.Outcome
	}
	return m
}

// TestCheckMemory runs the whole suite through Check on the memory store:
// every case passes but UnsupportedConditions, which has nothing to refuse
// on a store with both conditions and skips saying so; report sees every
// Result in order.
func TestCheckMemory(t *testing.T) {
	var reported []Result
	sum := Check(t.Context(), newMemory, func(r Result) { reported = append(reported, r) })
	if sum.Err != nil {
		t.Fatalf("Summary.Err = %v", sum.Err)
	}
	var names []string
	for _, r := range sum.Results {
		names = append(names, r.Name)
		want := Pass
		if r.Name == "UnsupportedConditions" {
			want = Skip
		}
		if r.Outcome != want {
			t.Errorf("%s: %s, want %s; messages:\n%s", r.Name, r.Outcome, want, strings.Join(r.Messages, "\n"))
		}
	}
	if !slices.Equal(names, Cases()) {
		t.Errorf("cases run: %q, want %q", names, Cases())
	}
	if sum.Passed != len(cases)-1 || sum.Skipped != 1 || sum.Failed != 0 {
		t.Errorf("summary %d passed, %d skipped, %d failed; want %d, 1, 0", sum.Passed, sum.Skipped, sum.Failed, len(cases)-1)
	}
	if !slices.EqualFunc(reported, sum.Results, func(a, b Result) bool { return a.Name == b.Name && a.Outcome == b.Outcome }) {
		t.Errorf("report saw %d results, Summary has %d, or in another order", len(reported), len(sum.Results))
	}
	for _, r := range sum.Results {
		if r.Name == "UnsupportedConditions" && !slices.ContainsFunc(r.Messages, func(m string) bool { return strings.Contains(m, "no Put condition to refuse") }) {
			t.Errorf("UnsupportedConditions skipped without its reason: %q", r.Messages)
		}
		if r.Name == "Race" && !slices.ContainsFunc(r.Messages, func(m string) bool { return strings.Contains(m, "16 writers × 20 attempts") }) {
			t.Errorf("Race logged nothing about its writers: %q", r.Messages)
		}
	}
}

// interleaved are the cases whose failure on a store that ignores IfMatch
// needs two writers to interleave, which a loaded machine may not do.
var interleaved = map[string]bool{"Race": true, "Linearizability": true}

// TestCheckAgreesWithRun runs the suite on the deliberately broken stores
// (and on an honest and a flat one) both through Run, under go test in a
// re-executed binary, and through Check, and wants the same outcome for
// every case, but for the cases that catch ignore-ifmatch only when
// goroutines interleave (there both must at least run the case).
func TestCheckAgreesWithRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the re-executed broken-store runs")
	}
	line := regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): TestBrokenStoreHelper/(\S+) `)
	for _, mode := range []string{"honest", "ignore-ifmatch", "reverse-list", "blind-delete", "flat-lossy", "flat"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenStoreHelper$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "CONFORMANCE_BROKEN="+mode)
			out, _ := cmd.CombinedOutput() // fails for the broken modes
			fromRun := map[string]Outcome{}
			for _, m := range line.FindAllStringSubmatch(string(out), -1) {
				fromRun[m[2]] = Outcome(strings.ToLower(m[1]))
			}
			if len(fromRun) != len(cases) {
				t.Fatalf("Run reported %d cases, want %d:\n%s", len(fromRun), len(cases), out)
			}
			sum := Check(t.Context(), func(context.Context) (casstore.Store, error) {
				return &broken{Store: casstore.NewMemory(), mode: mode}, nil
			}, nil, brokenOpts...)
			fromCheck := outcomes(sum)
			for _, name := range Cases() {
				if interleaved[name] && mode == "ignore-ifmatch" {
					// Whether a lost update shows depends on how the
					// goroutines interleave, in either run.
					if fromCheck[name] == Skip || fromRun[name] == Skip {
						t.Errorf("%s: Check says %q, Run says %q; neither may skip", name, fromCheck[name], fromRun[name])
					}
					continue
				}
				if fromCheck[name] != fromRun[name] {
					t.Errorf("%s: Check says %q, Run says %q", name, fromCheck[name], fromRun[name])
				}
			}
			if mode != "honest" && mode != "flat" && sum.Failed == 0 {
				t.Errorf("Check passed a store that breaks %s", mode)
			}
			if t.Failed() {
				t.Logf("Run's output:\n%s", out)
			}
		})
	}
}

// fakeCases returns cases that end in every way a case can, and the log
// of what their cleanups saw.
func fakeCases() ([]testCase, *[]string) {
	var mu sync.Mutex
	var log []string
	note := func(s string) {
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}
	return []testCase{
		{"Panics", func(t T, e *env) {
			var none []int
			_ = none[len(t.Name())] // a runtime panic, not only an explicit one
		}},
		{"PanicsWithValue", func(t T, e *env) { panic("boom") }},
		{"Fatal", func(t T, e *env) {
			t.Fatal("stop", "here")
			t.Error("not reached")
		}},
		{"ErrorsFromGoroutines", func(t T, e *env) {
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() { t.Errorf("goroutine %d", i) })
			}
			wg.Wait()
			t.Log("still running")
		}},
		{"ErrorThenSkip", func(t T, e *env) {
			t.Error("broken")
			t.Skip("then skipped")
		}},
		{"Skips", func(t T, e *env) {
			t.Skipf("no %s here", "feature")
			t.Error("not reached")
		}},
		{"Cleanups", func(t T, e *env) {
			for i := range 3 {
				t.Cleanup(func() { note(fmt.Sprintf("cleanup %d, context err %v", i, t.Context().Err())) })
			}
			t.Cleanup(func() { t.Fatal("fatal in a cleanup") })
			if t.Name() != "Cleanups" {
				t.Errorf("Name() = %q", t.Name())
			}
			if err := t.Context().Err(); err != nil {
				t.Errorf("context ended during the case: %v", err)
			}
		}},
		{"Passes", func(t T, e *env) {
			e.put(t, e.k("x"), []byte("y"), casstore.IfAbsent())
			t.Logf("wrote %s", e.k("x"))
		}},
	}, &log
}

// TestCheckOutcomes checks how Check records each way a case ends: panics
// and Fatal are failures that end the case (and never the process), Error
// continues, a Skip after an Error is a failure, cleanups run last-in
// first-out after the case's context ended, and a cleanup's Fatal fails the
// case without stopping the other cleanups.
func TestCheckOutcomes(t *testing.T) {
	list, log := fakeCases()
	cfg := defaultConfig()
	var stores []casstore.Store
	sum := check(t.Context(), list, func(context.Context) (casstore.Store, error) {
		s := casstore.NewMemory()
		stores = append(stores, s)
		return s, nil
	}, nil, &cfg)
	byName := map[string]Result{}
	for _, r := range sum.Results {
		byName[r.Name] = r
	}
	want := map[string]struct {
		outcome  Outcome
		messages []string // exact, or a prefix for a panic
	}{
		"Panics":               {Fail, []string{"panic: runtime error: index out of range [6] with length 0"}},
		"PanicsWithValue":      {Fail, []string{"panic: boom"}},
		"Fatal":                {Fail, []string{"stop here"}},
		"ErrorsFromGoroutines": {Fail, nil}, // checked below
		"ErrorThenSkip":        {Fail, []string{"broken", "then skipped"}},
		"Skips":                {Skip, []string{"no feature here"}},
		"Cleanups":             {Fail, []string{"fatal in a cleanup"}},
		"Passes":               {Pass, nil}, // checked below
	}
	if len(sum.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(sum.Results), len(want))
	}
	for name, w := range want {
		r := byName[name]
		if r.Outcome != w.outcome {
			t.Errorf("%s: %s, want %s (messages %q)", name, r.Outcome, w.outcome, r.Messages)
		}
		if w.messages == nil {
			continue
		}
		if strings.HasPrefix(name, "Panics") {
			if len(r.Messages) != 1 || !strings.HasPrefix(r.Messages[0], w.messages[0]) || !strings.Contains(r.Messages[0], "goroutine") {
				t.Errorf("%s: messages %q, want one starting %q with a stack", name, r.Messages, w.messages[0])
			}
			continue
		}
		if !slices.Equal(r.Messages, w.messages) {
			t.Errorf("%s: messages %q, want %q", name, r.Messages, w.messages)
		}
	}
	if r := byName["ErrorsFromGoroutines"]; len(r.Messages) != 9 || r.Messages[8] != "still running" {
		t.Errorf("ErrorsFromGoroutines: messages %q, want 8 errors then %q", r.Messages, "still running")
	}
	if r := byName["Passes"]; len(r.Messages) != 1 || !strings.HasPrefix(r.Messages[0], "wrote conformance-") {
		t.Errorf("Passes: messages %q", r.Messages)
	}
	if sum.Passed != 1 || sum.Failed != 6 || sum.Skipped != 1 {
		t.Errorf("summary %d passed, %d failed, %d skipped; want 1, 6, 1", sum.Passed, sum.Failed, sum.Skipped)
	}
	wantLog := []string{
		"cleanup 2, context err context canceled",
		"cleanup 1, context err context canceled",
		"cleanup 0, context err context canceled",
	}
	if !slices.Equal(*log, wantLog) {
		t.Errorf("cleanups ran as %q, want %q", *log, wantLog)
	}
	// Every case's store was closed and its objects deleted.
	for i, s := range stores {
		if _, _, err := s.Get(t.Context(), "x"); !errors.Is(err, casstore.ErrClosed) {
			t.Errorf("store %d (case %s) not closed: Get = %v", i, list[i].name, err)
		}
	}
}

// TestCheckStoreError: a store that cannot be opened fails every case with
// the reason, and no case runs against a nil store.
func TestCheckStoreError(t *testing.T) {
	sum := Check(t.Context(), func(context.Context) (casstore.Store, error) {
		return nil, errors.New("no such bucket")
	}, nil)
	if sum.Failed != len(cases) || sum.Passed != 0 || sum.Skipped != 0 {
		t.Fatalf("summary %d passed, %d failed, %d skipped; want every case failed", sum.Passed, sum.Failed, sum.Skipped)
	}
	for _, r := range sum.Results {
		if !slices.Equal(r.Messages, []string{"opening the store: no such bucket"}) {
			t.Errorf("%s: messages %q", r.Name, r.Messages)
		}
	}
	sum = Check(t.Context(), func(context.Context) (casstore.Store, error) { return nil, nil }, nil)
	if sum.Failed != len(cases) {
		t.Errorf("a nil store: %d of %d cases failed", sum.Failed, len(cases))
	}
}

// TestCheckMatchAndCancel: WithMatch selects cases by name, and a cancelled
// context runs none and says so.
func TestCheckMatchAndCancel(t *testing.T) {
	sum := Check(t.Context(), newMemory, nil, WithMatch(regexp.MustCompile("^(RoundTrip|Delete)$")))
	if got := slices.Collect(func(yield func(string) bool) {
		for _, r := range sum.Results {
			if !yield(r.Name + ":" + string(r.Outcome)) {
				return
			}
		}
	}); !slices.Equal(got, []string{"RoundTrip:pass", "Delete:pass"}) {
		t.Errorf("WithMatch ran %q, want RoundTrip and Delete, passing", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sum = Check(ctx, newMemory, nil)
	if len(sum.Results) != 0 || !errors.Is(sum.Err, context.Canceled) {
		t.Errorf("cancelled: %d results, Err %v; want none and context.Canceled", len(sum.Results), sum.Err)
	}
}

// TestRunMatch: Run honours WithMatch too, running the selected cases as
// subtests and no others.
func TestRunMatch(t *testing.T) {
	var opened int
	Run(t, func(t *testing.T) casstore.Store {
		opened++
		if t.Name() != "TestRunMatch/RoundTrip" {
			t.Errorf("ran %s", t.Name())
		}
		return casstore.NewMemory()
	}, WithMatch(regexp.MustCompile("^RoundTrip$")), WithLargeObjectSize(1024))
	if opened != 1 {
		t.Errorf("opened %d stores, want 1", opened)
	}
}
