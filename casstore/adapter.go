package casstore

import (
	"context"
	"errors"
	"fmt"
)

// This file holds the pieces of the contract that every Store
// implementation repeats: the guard at the top of each call and the
// mapping of a backend's "not found" and "precondition failed" answers onto
// the sentinels. Adapters outside this package (casstore/s3, casstore/gcs,
// casstore/azure, casstore/blob) call the exported helpers so that they all
// refuse and report alike.

// CheckCall is the guard a Store implementation runs first in every method:
// it returns ErrClosed when closed is true (the store was used after Close),
// the context's error when ctx is already done, and ErrInvalidKey for an
// empty key, except for op "list", where key is a prefix and may be empty.
// Each is wrapped in an *OpError for op and key. It returns nil when the
// call may go ahead. Stores with further key rules (Azure refuses
// backslashes) check them after CheckCall.
func CheckCall(ctx context.Context, closed bool, op, key string) error {
	if err := checkLive(ctx, closed, op, key); err != nil {
		return err
	}
	if key == "" && op != "list" {
		return Wrap(op, key, ErrInvalidKey)
	}
	return nil
}

// checkLive is CheckCall without the empty-key rule: the file store
// validates keys itself (keyPath), with a reason, after its other argument
// checks.
func checkLive(ctx context.Context, closed bool, op, key string) error {
	if closed {
		return Wrap(op, key, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return Wrap(op, key, err)
	}
	return nil
}

// NotFoundSentinel is the sentinel for a backend's "no such object" answer
// (404) to op under cond: ErrPreconditionFailed for an IfMatch "put" or
// "delete", whose version is gone with the object, and ErrNotFound
// otherwise. Adapters use it in their error mapping.
func NotFoundSentinel(op string, cond Condition) error {
	if cond.Kind() == CondIfMatch && (op == "put" || op == "delete") {
		return ErrPreconditionFailed
	}
	return ErrNotFound
}

// PreconditionSentinel is the sentinel for a backend's "precondition
// failed" answer (412) under cond: ErrAlreadyExists for a create-only
// (IfAbsent) write, ErrPreconditionFailed otherwise. Adapters use it in
// their error mapping.
func PreconditionSentinel(cond Condition) error {
	if cond.Kind() == CondIfAbsent {
		return ErrAlreadyExists
	}
	return ErrPreconditionFailed
}

// WrapBackendError ends an adapter's error mapping: it wraps err, an error
// from the backend, in an *OpError for op and key, under sentinel when
// sentinel is non-nil, so that errors.Is finds the sentinel and errors.As
// still finds the backend's own error. A cancelled or expired context is
// never put under a sentinel: it is the caller's doing, not the backend's
// answer.
func WrapBackendError(op, key string, sentinel, err error) error {
	if sentinel == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Wrap(op, key, err)
	}
	return Wrap(op, key, fmt.Errorf("%w: %w", sentinel, err))
}
