package wal

import (
	"errors"
	"fmt"
)

// The sentinel errors of package wal, matched with errors.Is. Every error
// that comes from an object names its key.
var (
	// ErrFenced: a newer producer claimed the log (bumped the epoch). The
	// fenced producer commits nothing more. From Durability.Wait it means
	// the group is not in the log and never will be (it also matches
	// ErrHalted).
	ErrFenced = errors.New("wal: producer fenced by a newer claim")
	// ErrHalted: the producer stopped after a fatal error (a failure that
	// outlasted ProducerConfig.RetryWindow, corruption, fencing). From
	// Durability.Wait it means the group is not in the log and never will
	// be; the error also wraps the cause.
	ErrHalted = errors.New("wal: producer halted")
	// ErrOutcomeUnknown: the producer stopped while a manifest commit that
	// carried the group had an unknown outcome (a lost reply it could not
	// resolve). The records may or may not be in the log; a replica may
	// see them. Such an error does not match ErrHalted or ErrFenced, so a
	// caller never mistakes it for "not in the log"; its message names the
	// cause.
	ErrOutcomeUnknown = errors.New("wal: commit outcome unknown; the records may or may not be in the log")
	// ErrCorrupt: an object failed its checksum or did not decode (any
	// format error: truncated, corrupt, unsupported version). Producers and
	// replicas stop at once. The error also wraps the format package's
	// error.
	ErrCorrupt = errors.New("wal: corrupt object")
	// ErrClosed: the producer was closed. From Append: no records taken.
	// From Wait: Close gave up (its context ended) before the group was
	// committed, and the group is not in the log.
	ErrClosed = errors.New("wal: producer closed")
	// ErrTooLarge: an Append group does not fit in one segment
	// (ProducerConfig.SegmentMaxBytes) or in the in-flight budget
	// (MaxInFlightBytes). Nothing was appended.
	ErrTooLarge = errors.New("wal: append group too large")
	// ErrLegacyManifest: the manifest is format v1 (an opendata buffer
	// queue). Claiming it would rewrite it as v4, which a buffer consumer
	// can no longer read; set ProducerConfig.AllowManifestUpgrade to do it
	// anyway. Replicas tail v1 manifests without any opt-in.
	ErrLegacyManifest = errors.New("wal: manifest is format v1 (opendata buffer); claiming it needs AllowManifestUpgrade")
	// ErrLogTruncated: the replica's cursor points before the first entry
	// the manifest still holds; the records in between are gone and the
	// replica must be rebuilt from a snapshot.
	ErrLogTruncated = errors.New("wal: log truncated past the replica cursor")
	// ErrApply: the Applier returned an error; the error wraps it and says
	// which sequence failed. The cursor stays at that record.
	ErrApply = errors.New("wal: applier failed")
)

// fencedError is a fencing error: it matches both ErrFenced and ErrHalted.
type fencedError struct{ msg string }

func (e *fencedError) Error() string { return e.msg }

func (e *fencedError) Is(target error) bool { return target == ErrFenced || target == ErrHalted }

func newFenced(key string, mine, theirs uint64) error {
	return &fencedError{msg: fmt.Sprintf("wal: producer fenced by a newer claim: manifest %q has epoch %d, this producer claimed %d", key, theirs, mine)}
}

// haltedError wraps a halt cause so that it matches ErrHalted and the cause.
func haltedError(cause error) error {
	if errors.Is(cause, ErrHalted) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrHalted, cause)
}

// outcomeUnknownError says a group's fate is undetermined. It matches
// ErrOutcomeUnknown only; Cause is the error that stopped the producer.
type outcomeUnknownError struct{ cause error }

func (e *outcomeUnknownError) Error() string {
	return ErrOutcomeUnknown.Error() + " (producer stopped: " + e.cause.Error() + ")"
}

func (e *outcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// corruptError wraps a decoding failure of the object at key so that it
// matches ErrCorrupt and the format error.
func corruptError(kind, key string, err error) error {
	return fmt.Errorf("%w: %s %q: %w", ErrCorrupt, kind, key, err)
}
