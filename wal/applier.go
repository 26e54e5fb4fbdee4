package wal

import (
	"context"
	"fmt"
)

// Record is one record delivered to an Applier.
type Record struct {
	// Sequence is the record's position in the log. Records of a legacy
	// (v1 manifest) entry all carry that entry's sequence.
	Sequence uint64
	// GroupMeta is the meta passed to the Append that carried the record
	// (nil if none).
	GroupMeta []byte
	// Data is the record's bytes. It is only valid during Apply: copy it to
	// keep it.
	Data []byte
}

// Applier applies records to the replica's own system. Delivery is at least
// once (a record may be delivered again after a failure or restart), so
// Apply must be idempotent. Records arrive strictly in sequence order.
type Applier interface {
	Apply(ctx context.Context, r Record) error
}

// ApplyFunc adapts a function to Applier.
type ApplyFunc func(ctx context.Context, r Record) error

// Apply implements Applier.
func (f ApplyFunc) Apply(ctx context.Context, r Record) error { return f(ctx, r) }

// TypedApplier builds an Applier from a decoder of the application's record
// frame and a handler of the decoded operation. A decode error is an apply
// error: the replica stops at that record.
func TypedApplier[Op any](decode func([]byte) (Op, error), handle func(ctx context.Context, seq uint64, op Op) error) Applier {
	return ApplyFunc(func(ctx context.Context, r Record) error {
		op, err := decode(r.Data)
		if err != nil {
			return fmt.Errorf("decode record %d: %w", r.Sequence, err)
		}
		return handle(ctx, r.Sequence, op)
	})
}
