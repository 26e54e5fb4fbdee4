package conformance

import (
	"context"
	"fmt"
	"iter"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/objwal/objwal/casstore"
)

// op builds a history entry for the model tests.
func op(call, ret int64, in linInput, out linOutput) porcupine.Operation {
	return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
}

func put(key, value string, cond casstore.ConditionKind, ifMatch casstore.Version) linInput {
	return linInput{key: key, kind: linPut, cond: cond, ifMatch: ifMatch, value: value}
}

func get(key string) linInput { return linInput{key: key, kind: linGet} }

func TestModel(t *testing.T) {
	ok := linOutput{outcome: outOK}
	okv := func(v casstore.Version) linOutput { return linOutput{outcome: outOK, version: v} }
	read := func(val string, v casstore.Version) linOutput {
		return linOutput{outcome: outOK, value: val, version: v}
	}
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{
			op(1, 2, get("k"), linOutput{outcome: outNotFound}),
			op(3, 4, put("k", "a", casstore.CondIfAbsent, ""), okv("v1")),
			op(5, 6, put("k", "b", casstore.CondIfAbsent, ""), linOutput{outcome: outAlreadyExists}),
			op(7, 8, put("k", "c", casstore.CondIfMatch, "v1"), okv("v2")),
			op(9, 10, put("k", "d", casstore.CondIfMatch, "v1"), linOutput{outcome: outPreconditionFailed}),
			op(11, 12, get("k"), read("c", "v2")),
		}, porcupine.Ok},
		{"two IfMatch winners from one version", []porcupine.Operation{
			op(1, 2, put("k", "a", casstore.Unconditional, ""), okv("v1")),
			op(3, 6, put("k", "b", casstore.CondIfMatch, "v1"), okv("v2")),
			op(4, 5, put("k", "c", casstore.CondIfMatch, "v1"), okv("v3")),
		}, porcupine.Illegal},
		{"stale read", []porcupine.Operation{
			op(1, 2, put("k", "a", casstore.Unconditional, ""), okv("v1")),
			op(3, 4, put("k", "b", casstore.Unconditional, ""), okv("v2")),
			op(5, 6, get("k"), read("a", "v1")),
		}, porcupine.Illegal},
		{"read reports another write's version", []porcupine.Operation{
			op(1, 2, put("k", "a", casstore.Unconditional, ""), okv("v1")),
			op(3, 4, get("k"), read("a", "v9")),
		}, porcupine.Illegal},
		{"IfMatch lost although it matched", []porcupine.Operation{
			op(1, 2, put("k", "a", casstore.Unconditional, ""), okv("v1")),
			op(3, 4, put("k", "b", casstore.CondIfMatch, "v1"), linOutput{outcome: outPreconditionFailed}),
		}, porcupine.Illegal},
		{"concurrent writes in either order", []porcupine.Operation{
			op(1, 4, put("k", "a", casstore.Unconditional, ""), okv("v1")),
			op(2, 3, put("k", "b", casstore.Unconditional, ""), okv("v2")),
			op(5, 6, get("k"), read("a", "v1")),
		}, porcupine.Ok},
		{"unknown outcome that happened", []porcupine.Operation{
			op(1, math.MaxInt64, put("k", "a", casstore.CondIfAbsent, ""), linOutput{outcome: outUnknown}),
			op(3, 4, get("k"), read("a", "v1")),
			op(5, 6, put("k", "b", casstore.CondIfMatch, "v1"), okv("v2")),
		}, porcupine.Ok},
		{"unknown outcome that did not happen", []porcupine.Operation{
			op(1, math.MaxInt64, put("k", "a", casstore.Unconditional, ""), linOutput{outcome: outUnknown}),
			op(3, 4, get("k"), linOutput{outcome: outNotFound}),
		}, porcupine.Ok},
		{"keys are independent", []porcupine.Operation{
			op(1, 2, put("k", "a", casstore.Unconditional, ""), ok),
			op(3, 4, get("j"), linOutput{outcome: outNotFound}),
			op(5, 6, get("k"), read("a", "")),
		}, porcupine.Ok},
	} {
		if got := porcupine.CheckOperationsTimeout(linModel.ToModel(), tc.history, e2eTimeout); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

const e2eTimeout = 10 * time.Second // a guard against hangs

// broken wraps a correct store and breaks one promise, so that the suite
// can be shown to notice.
type broken struct {
	casstore.Store
	mode string
}

func (b *broken) Put(ctx context.Context, key string, data []byte, cond casstore.Condition) (casstore.Version, error) {
	if b.mode == "ignore-ifmatch" && cond.Kind() == casstore.CondIfMatch {
		cond = casstore.None()
		// Widen the read-to-write window: while this writer sleeps the
		// others run and read the same version, so the lost updates the
		// Race and Linearizability cases look for happen even when a loaded
		// machine would otherwise run the racers one after another.
		time.Sleep(2 * time.Millisecond)
	}
	if b.mode == "flat" || b.mode == "flat-lossy" {
		if nested := b.nested(ctx, key); len(nested) > 0 {
			if b.mode == "flat" {
				return "", fmt.Errorf("flat test store: %q cannot coexist with %q", key, nested[0])
			}
			for _, k := range nested { // a file system that replaces silently
				_ = b.Store.Delete(ctx, k, casstore.None())
			}
		}
	}
	return b.Store.Put(ctx, key, data, cond)
}

// nested returns the stored keys that key would nest with: those it lies
// below and those below it.
func (b *broken) nested(ctx context.Context, key string) []string {
	var out []string
	for i := range len(key) {
		if key[i] == '/' {
			if _, err := b.Store.Stat(ctx, key[:i]); err == nil {
				out = append(out, key[:i])
			}
		}
	}
	for info, err := range b.Store.List(ctx, key+"/") {
		if err == nil {
			out = append(out, info.Key)
		}
	}
	return out
}

func (b *broken) List(ctx context.Context, prefix string) iter.Seq2[casstore.ObjectInfo, error] {
	if b.mode != "reverse-list" {
		return b.Store.List(ctx, prefix)
	}
	return func(yield func(casstore.ObjectInfo, error) bool) {
		var all []casstore.ObjectInfo
		for info, err := range b.Store.List(ctx, prefix) {
			if err != nil {
				yield(info, err)
				return
			}
			all = append(all, info)
		}
		slices.Reverse(all)
		for _, info := range all {
			if !yield(info, nil) {
				return
			}
		}
	}
}

func (b *broken) Delete(ctx context.Context, key string, cond casstore.Condition) error {
	if b.mode == "blind-delete" && cond.Kind() == casstore.CondIfMatch {
		cond = casstore.None()
	}
	return b.Store.Delete(ctx, key, cond)
}

func (b *broken) Capabilities() casstore.Capabilities {
	c := b.Store.Capabilities()
	switch b.mode {
	case "blind-delete":
		c.DeleteIfMatch = false
		c.Gaps = []string{"pretends conditional delete is a known gap, but deletes blindly"}
	case "flat":
		c.NestedKeys = false
		c.Gaps = []string{"flat test store: refuses a key and keys below it"}
	case "flat-lossy":
		c.NestedKeys = false
		c.Gaps = []string{"pretends nested keys are a known gap, but loses the other object silently"}
	}
	return c
}

// TestBrokenStoreHelper runs the suite on a broken store when re-executed
// by TestSuiteCatchesBrokenStores; run normally it does nothing.
func TestBrokenStoreHelper(t *testing.T) {
	mode := os.Getenv("CONFORMANCE_BROKEN")
	if mode == "" {
		return
	}
	Run(t, func(t *testing.T) casstore.Store {
		return &broken{Store: casstore.NewMemory(), mode: mode}
	}, brokenOpts...)
}

// brokenOpts shrink the suite for the broken-store runs, under Run and
// under Check alike.
var brokenOpts = []Option{WithListCount(50), WithLargeObjectSize(1024)}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the re-executed broken-store runs")
	}
	for mode, mustFail := range map[string][]string{
		"ignore-ifmatch": {"IfMatch", "Race", "Linearizability"},
		"reverse-list":   {"OddKeys", "List", "ListPagination", "ListWithoutPrefix", "KeyAndDirectoryCoexist"},
		"blind-delete":   {"DeleteIfMatch"},
		"flat-lossy":     {"KeyAndDirectoryCoexist"},
	} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenStoreHelper$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "CONFORMANCE_BROKEN="+mode)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store that breaks %s:\n%s", mode, out)
			}
			for _, name := range mustFail {
				if !strings.Contains(string(out), "--- FAIL: TestBrokenStoreHelper/"+name+" ") {
					t.Errorf("case %s did not fail on a store that breaks %s", name, mode)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// TestSuiteOnFlatStore runs the suite on a store that declares NestedKeys
// false and refuses a key and keys below it with an error: only
// KeyAndDirectoryCoexist may skip (after checking the refusal), and every
// listing case must pass, for none of them needs nested keys.
func TestSuiteOnFlatStore(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the re-executed flat-store run")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenStoreHelper$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "CONFORMANCE_BROKEN=flat")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the suite failed on an honest flat store: %v\n%s", err, out)
	}
	for _, want := range []string{
		"--- SKIP: TestBrokenStoreHelper/KeyAndDirectoryCoexist ",
		"store declares NestedKeys unsupported: flat test store",
		"cannot coexist with", // the refusals were made and logged
		"--- PASS: TestBrokenStoreHelper/OddKeys ",
		"--- PASS: TestBrokenStoreHelper/List ",
		"--- PASS: TestBrokenStoreHelper/ListPagination ",
		"--- PASS: TestBrokenStoreHelper/ListWithoutPrefix ",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := strings.Count(string(out), "--- SKIP:"); n != 2 {
		t.Errorf("%d cases skipped, want 2 (KeyAndDirectoryCoexist, and UnsupportedConditions which has nothing to refuse)", n)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
