package casstore

import (
	"errors"
	"fmt"
)

// The sentinel errors of the contract. Match them with errors.Is: stores wrap
// them in an *OpError that names the operation and key.
var (
	// ErrNotFound: no object at the key.
	ErrNotFound = errors.New("object not found")
	// ErrAlreadyExists: a create-only (IfAbsent) write lost; the key exists.
	ErrAlreadyExists = errors.New("object already exists")
	// ErrPreconditionFailed: an IfMatch write or delete lost; the version
	// changed or the object is gone.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrConflict: the backend refused a concurrent conditional write that
	// may be retried as is (S3's 409 ConditionalRequestConflict). The write
	// did not happen.
	ErrConflict = errors.New("conflicting concurrent write")
	// ErrUnsupported: the store cannot honour the requested condition or
	// operation; nothing was written.
	ErrUnsupported = errors.New("operation not supported by this store")
	// ErrInvalidKey: the key is empty or not representable on this store
	// (for example it would escape a file store's root).
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidRange: a negative offset or length was passed to GetRange.
	ErrInvalidRange = errors.New("invalid range")
	// ErrClosed: the store was used after Close.
	ErrClosed = errors.New("store is closed")
	// ErrInvalidURL: casstore.Open was given a URL it cannot open (unknown
	// scheme, unknown query parameter, missing bucket).
	ErrInvalidURL = errors.New("invalid store URL")
)

// OpError records the operation and key of a failed store call. Err is a
// sentinel of this package or the backend's own error.
type OpError struct {
	Op  string // "get", "get-range", "stat", "put", "delete", "list"
	Key string // the key (or, for list, the prefix)
	Err error
}

// Error implements error.
func (e *OpError) Error() string { return fmt.Sprintf("casstore: %s %q: %v", e.Op, e.Key, e.Err) }

// Unwrap lets errors.Is and errors.As see the cause.
func (e *OpError) Unwrap() error { return e.Err }

// Wrap returns err wrapped in an *OpError for op and key, or nil if err is
// nil. An error that is already an *OpError for the same op and key is
// returned as is, so wrapping layers (prefixes, fault injection) do not stack.
func Wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) && oe.Op == op && oe.Key == key {
		return err
	}
	return &OpError{Op: op, Key: key, Err: err}
}
