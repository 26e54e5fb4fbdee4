package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/objwal/objwal/casstore"
)

// The linearizability case records a concurrent history of Gets and Puts
// (unconditional, IfAbsent, IfMatch) on a few keys and asks porcupine whether
// some sequential order of those operations, consistent with real time,
// explains every result. The model is a register per key whose state is
// (exists, value, version). Every write stores a unique token, so a Get pins
// down exactly which write it saw, and the versions Put returned must be the
// versions later Gets report and IfMatch decides on.
//
// An operation that failed with a non-sentinel error has an unknown outcome:
// a Get is dropped from the history, a Put may or may not have happened and
// stays pending until the end of the history. The check has a time bound;
// the history is kept small so it always finishes, and a check that runs out
// of time fails the case (reported as such) rather than passing silently.

type linKind uint8

const (
	linGet linKind = iota
	linPut
)

type linInput struct {
	key     string
	kind    linKind
	cond    casstore.ConditionKind
	ifMatch casstore.Version
	value   string // the token a Put writes
}

type linOutcome uint8

const (
	outOK linOutcome = iota
	outNotFound
	outAlreadyExists
	outPreconditionFailed
	outConflict
	outUnknown // transport error: the put may or may not have happened
)

func (o linOutcome) String() string {
	switch o {
	case outOK:
		return "ok"
	case outNotFound:
		return "not-found"
	case outAlreadyExists:
		return "already-exists"
	case outPreconditionFailed:
		return "precondition-failed"
	case outConflict:
		return "conflict"
	case outUnknown:
		return "unknown"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

type linOutput struct {
	outcome linOutcome
	value   string           // Get: the bytes read
	version casstore.Version // Get: the version read; Put: the new version
}

// linState is one key's register. version "" with exists means a write of
// unknown outcome put it there and nobody has read its version yet.
type linState struct {
	exists  bool
	value   string
	version casstore.Version
}

var linModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			k := op.Input.(linInput).key
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{linState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(linState), input.(linInput), output.(linOutput)
		if in.kind == linGet {
			switch out.outcome {
			case outNotFound:
				if !s.exists {
					return []any{s}
				}
			case outOK:
				if s.exists && s.value == out.value && (s.version == "" || s.version == out.version) {
					return []any{linState{exists: true, value: s.value, version: out.version}}
				}
			}
			return nil
		}
		// Could this Put's condition hold in state s?
		matches := func() bool {
			switch in.cond {
			case casstore.CondIfAbsent:
				return !s.exists
			case casstore.CondIfMatch:
				return s.exists && (s.version == "" || s.version == in.ifMatch)
			}
			return true
		}
		// Could it fail in state s?
		fails := func() bool {
			switch in.cond {
			case casstore.CondIfAbsent:
				return s.exists
			case casstore.CondIfMatch:
				return !s.exists || s.version == "" || s.version != in.ifMatch
			}
			return false
		}
		written := linState{exists: true, value: in.value, version: out.version}
		switch out.outcome {
		case outOK:
			if matches() {
				return []any{written}
			}
		case outAlreadyExists:
			if in.cond == casstore.CondIfAbsent && fails() {
				return []any{s}
			}
		case outPreconditionFailed:
			if in.cond == casstore.CondIfMatch && fails() {
				return []any{s}
			}
		case outConflict:
			return []any{s} // refused; the write did not happen
		case outUnknown:
			if matches() {
				return []any{s, linState{exists: true, value: in.value}}
			}
			return []any{s}
		}
		return nil
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		if !s.exists {
			return "absent"
		}
		return fmt.Sprintf("%q @ %q", s.value, s.version)
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		if in.kind == linGet {
			return fmt.Sprintf("get(%s) -> %v %q %q", in.key, out.outcome, out.value, out.version)
		}
		cond := "unconditional"
		switch in.cond {
		case casstore.CondIfAbsent:
			cond = "if-absent"
		case casstore.CondIfMatch:
			cond = fmt.Sprintf("if-match %q", in.ifMatch)
		}
		return fmt.Sprintf("put(%s, %q, %s) -> %v %q", in.key, in.value, cond, out.outcome, out.version)
	},
}

func testLinearizability(t T, e *env) {
	ctx, cancel := context.WithTimeout(t.Context(), e.cfg.timeout)
	defer cancel()
	keys := make([]string, e.cfg.linKeys)
	for i := range keys {
		keys[i] = e.k(fmt.Sprintf("lin/%d", i))
	}
	var (
		clock   atomic.Int64 // a logical clock: call and return stamps, no wall time
		mu      sync.Mutex
		history []porcupine.Operation
		pending []int // indexes of puts with unknown outcome
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	record := func(client int, in linInput, out linOutput, call int64) {
		ret := clock.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if in.kind == linGet && out.outcome == outUnknown {
			return // a failed read constrains nothing
		}
		if out.outcome == outUnknown {
			pending = append(pending, len(history))
		}
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	}
	for c := range e.cfg.linClients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 77))
			seen := map[string]casstore.Version{} // the last version this client saw per key
			<-start                               // all clients begin together
			for i := range e.cfg.linOps {
				if ctx.Err() != nil {
					return
				}
				runtime.Gosched() // interleave clients even on a fast store with few cores
				key := keys[r.IntN(len(keys))]
				in := linInput{key: key}
				roll := r.IntN(10)
				switch {
				case roll < 4:
					in.kind = linGet
				case roll < 6 || !e.caps.IfMatch && !e.caps.IfAbsent:
					in.kind, in.cond = linPut, casstore.Unconditional
				case e.caps.IfMatch && seen[key] != "" && (roll < 9 || !e.caps.IfAbsent):
					in.kind, in.cond, in.ifMatch = linPut, casstore.CondIfMatch, seen[key]
				case e.caps.IfAbsent:
					in.kind, in.cond = linPut, casstore.CondIfAbsent
				default:
					in.kind = linGet
				}
				call := clock.Add(1)
				var out linOutput
				var opErr error
				if in.kind == linGet {
					b, info, err := e.s.Get(ctx, key)
					opErr = err
					out = linOutput{outcome: classify(err), value: string(b), version: info.Version}
					if err == nil {
						seen[key] = info.Version
					}
				} else {
					in.value = fmt.Sprintf("c%d-op%d", c, i)
					var cond casstore.Condition
					switch in.cond {
					case casstore.CondIfAbsent:
						cond = casstore.IfAbsent()
					case casstore.CondIfMatch:
						cond = casstore.IfMatch(in.ifMatch)
					}
					v, err := e.s.Put(ctx, key, []byte(in.value), cond)
					opErr = err
					out = linOutput{outcome: classify(err), version: v}
					if err == nil {
						seen[key] = v
					}
					if out.outcome == outNotFound {
						t.Errorf("Put(%q, %v) failed with ErrNotFound: %v", key, cond, err)
					}
				}
				if out.outcome == outUnknown && ctx.Err() == nil {
					t.Logf("client %d: operation on %q failed, outcome unknown: %v", c, key, opErr)
				}
				record(c, in, out, call)
			}
		})
	}
	close(start)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("history did not finish within %v: %v", e.cfg.timeout, ctx.Err())
	}
	if err := checkInformative(history); err != nil {
		t.Fatalf("linearizability: %v", err)
	}
	for _, i := range pending {
		history[i].Return = math.MaxInt64 // may take effect any time after its call
	}
	res := porcupine.CheckOperationsTimeout(linModel.ToModel(), history, e.cfg.linTimeout)
	switch res {
	case porcupine.Ok:
		t.Logf("history of %d operations on %d keys by %d clients is linearizable", len(history), len(keys), e.cfg.linClients)
	case porcupine.Illegal:
		t.Errorf("history of %d operations is NOT linearizable; the keys that cannot be explained, in call order:\n%s%s",
			len(history), dumpIllegal(history), visualize(t, history, e.cfg.linTimeout))
	default:
		t.Errorf("linearizability check of %d operations gave %q within %v; shrink it with WithLinearizability", len(history), res, e.cfg.linTimeout)
	}
}

// checkInformative refuses a history that constrains nothing: failed calls
// count as "may or may not have happened", so a store whose every call
// errors would otherwise pass. At least one write and one read must have
// returned a definite answer.
func checkInformative(h []porcupine.Operation) error {
	var puts, gets int
	for _, op := range h {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		if out.outcome == outUnknown {
			continue
		}
		if in.kind == linGet {
			gets++
		} else {
			puts++
		}
	}
	if puts == 0 || gets == 0 {
		return fmt.Errorf("only %d writes and %d reads of %d operations returned a definite answer: the history checks nothing (is the store reachable?)", puts, gets, len(h))
	}
	return nil
}

// classify maps an error to the model's outcomes.
func classify(err error) linOutcome {
	switch {
	case err == nil:
		return outOK
	case errors.Is(err, casstore.ErrNotFound):
		return outNotFound
	case errors.Is(err, casstore.ErrAlreadyExists):
		return outAlreadyExists
	case errors.Is(err, casstore.ErrPreconditionFailed):
		return outPreconditionFailed
	case errors.Is(err, casstore.ErrConflict):
		return outConflict
	}
	return outUnknown
}

// dumpIllegal renders the history of each key whose own history is not
// linearizable (the model partitions by key), sorted by call time, so that a
// failure shows the few operations that matter rather than all of them.
func dumpIllegal(h []porcupine.Operation) string {
	var b strings.Builder
	for _, part := range linModel.Partition(h) {
		if porcupine.CheckOperations(linModel.ToModel(), part) {
			continue
		}
		part = slices.Clone(part)
		slices.SortStableFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		fmt.Fprintf(&b, " key %s (%d operations):\n%s", part[0].Input.(linInput).key, len(part), dumpHistory(part))
	}
	return b.String()
}

// visualize writes porcupine's HTML rendering of an illegal history (the
// longest partial linearizations and where each stops) to a file in the
// temporary directory and returns a line naming it for the failure message.
func visualize(t T, h []porcupine.Operation, timeout time.Duration) string {
	model := linModel.ToModel()
	_, info := porcupine.CheckOperationsVerbose(model, h, timeout)
	f, err := os.CreateTemp("", "objwal-linearizability-*.html")
	if err != nil {
		return fmt.Sprintf("(no visualization: %v)", err)
	}
	path := f.Name()
	_ = f.Close()
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return fmt.Sprintf("(no visualization: %v)", err)
	}
	t.Logf("linearizability visualization of %s: %s", t.Name(), path)
	return "visualization: " + path
}

func dumpHistory(h []porcupine.Operation) string {
	var s string
	for i, op := range h {
		if i == 200 {
			s += fmt.Sprintf("  … %d more\n", len(h)-i)
			break
		}
		s += fmt.Sprintf("  [%d,%d] client %d: %s\n", op.Call, op.Return, op.ClientId, linModel.DescribeOperation(op.Input, op.Output))
	}
	return s
}
