package wal_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/objwal/objwal/wal"
)

// The history checker models the log as what it promises: an append-only
// sequence of records. An Append group that was acknowledged at sequence s
// must have been appended when the log held exactly s records; a group
// reported as not in the log (ErrFenced, ErrHalted, ErrClosed, or refused by
// Append) must leave the log unchanged; a group with an unknown outcome may
// do either. A final read by a replica must return exactly the log. Porcupine
// searches for an order of the operations, consistent with real time, that
// explains every result; if none exists the history shows a lost, duplicated,
// reordered or falsely refused record.

// outcome of one Append group, as its caller saw it.
type appendStatus int

const (
	statusOK appendStatus = iota
	statusFailed
	statusUnknown
)

type appendInput struct{ ids string } // the group's record IDs, 4 bytes each
type appendOutput struct {
	status appendStatus
	seq    uint64
}
type readInput struct{}
type readOutput struct{ log string }

const idWidth = 4

var logModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{""} },
	Step: func(state, input, output any) []any {
		log := state.(string)
		switch in := input.(type) {
		case appendInput:
			out := output.(appendOutput)
			switch out.status {
			case statusOK:
				if uint64(len(log)/idWidth) != out.seq {
					return nil
				}
				return []any{log + in.ids}
			case statusFailed:
				return []any{log}
			default:
				return []any{log, log + in.ids}
			}
		case readInput:
			if output.(readOutput).log == log {
				return []any{log}
			}
			return nil
		}
		return nil
	},
	Equal: func(a, b any) bool { return a.(string) == b.(string) },
	DescribeOperation: func(input, output any) string {
		if _, ok := input.(readInput); ok {
			return fmt.Sprintf("read -> %d records", len(output.(readOutput).log)/idWidth)
		}
		o := output.(appendOutput)
		return fmt.Sprintf("append %d -> status %d seq %d", len(input.(appendInput).ids)/idWidth, o.status, o.seq)
	},
}

// history records Append operations and their outcomes for checking.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	// per record ID: what its group's caller was told
	status map[uint32]appendOutput
	next   uint32
}

func newHistory() *history {
	return &history{start: time.Now(), status: map[uint32]appendOutput{}}
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

// ids reserves n fresh record IDs and returns the records carrying them.
func (h *history) ids(n int) ([]uint32, [][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]uint32, n)
	recs := make([][]byte, n)
	for i := range ids {
		h.next++
		ids[i] = h.next
		recs[i] = binary.BigEndian.AppendUint32(nil, h.next)
	}
	return ids, recs
}

// classify maps what Append or Wait returned to a model status.
func classify(t *testing.T, err error) appendStatus {
	switch {
	case err == nil:
		return statusOK
	case errors.Is(err, wal.ErrOutcomeUnknown):
		if errors.Is(err, wal.ErrHalted) || errors.Is(err, wal.ErrFenced) {
			t.Errorf("an unknown outcome also claims the records are out: %v", err)
		}
		return statusUnknown
	case errors.Is(err, wal.ErrFenced), errors.Is(err, wal.ErrHalted), errors.Is(err, wal.ErrClosed):
		return statusFailed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return statusUnknown // the caller stopped waiting; the group's fate is open
	}
	t.Errorf("unexpected error class: %v", err)
	return statusUnknown
}

// appendAndWait runs one Append+Wait on p and records it.
func (h *history) appendAndWait(t *testing.T, ctx context.Context, client int, p *wal.Producer, n int) appendStatus {
	ids, recs := h.ids(n)
	call := h.now()
	d, err := p.Append(ctx, recs, nil)
	var seq uint64
	if err == nil {
		seq, err = d.Wait(ctx)
	}
	st := classify(t, err)
	ret := h.now()
	if st == statusUnknown {
		ret = int64(1) << 62 // may take effect at any later time
	}
	out := appendOutput{status: st, seq: seq}
	var sb strings.Builder
	for _, id := range ids {
		sb.Write(binary.BigEndian.AppendUint32(nil, id))
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: appendInput{sb.String()}, Call: call, Output: out, Return: ret})
	for i, id := range ids {
		o := out
		o.seq += uint64(i)
		h.status[id] = o
	}
	h.mu.Unlock()
	return st
}

// check verifies a final replica read against every outcome, directly
// (for readable failures) and with porcupine.
func (h *history) check(t *testing.T, final []wal.Record) {
	t.Helper()
	var sb strings.Builder
	seen := map[uint32]bool{}
	acked, unknownIn := 0, 0
	for i, r := range final {
		if r.Sequence != uint64(i) || len(r.Data) != idWidth {
			t.Fatalf("final read: record %d has sequence %d, %d bytes", i, r.Sequence, len(r.Data))
		}
		id := binary.BigEndian.Uint32(r.Data)
		if seen[id] {
			t.Fatalf("record %d appears twice (again at %d)", id, i)
		}
		seen[id] = true
		st, ok := h.status[id]
		switch {
		case !ok:
			t.Fatalf("record %d at %d was never appended", id, i)
		case st.status == statusFailed:
			t.Fatalf("record %d at %d was reported not in the log", id, i)
		case st.status == statusOK && st.seq != uint64(i):
			t.Fatalf("record %d acknowledged at %d but found at %d", id, st.seq, i)
		case st.status == statusUnknown:
			unknownIn++
		}
		sb.Write(r.Data)
	}
	for id, st := range h.status {
		if st.status == statusOK {
			acked++
			if !seen[id] {
				t.Fatalf("acknowledged record %d (seq %d) is lost", id, st.seq)
			}
		}
	}
	t.Logf("history: %d operations, %d records acknowledged, %d in the log, %d of unknown outcome made it",
		len(h.ops), acked, len(final), unknownIn)
	ops := append([]porcupine.Operation(nil), h.ops...)
	at := h.now()
	ops = append(ops, porcupine.Operation{ClientId: 0, Input: readInput{}, Call: at, Output: readOutput{sb.String()}, Return: at + 1})
	res, _ := porcupine.CheckOperationsVerbose(logModel.ToModel(), ops, 60*time.Second)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Logf("porcupine timed out; the direct checks above passed")
	default:
		t.Fatalf("history is not linearizable as an append-only log")
	}
}
