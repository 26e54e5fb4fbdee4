// Package casstore is objwal's narrow compare-and-swap blob contract.
//
// A Store is one bucket (plus an optional key prefix) that can read whole
// objects and byte ranges, list keys in lexical order, and write or delete
// objects under a Condition: unconditionally, create-only (IfAbsent), or only
// when the current object still has a given Version (IfMatch). That is all the
// write-ahead log needs from S3, GCS, Azure Blob or a local disk, and it is
// small enough that every adapter can be proven against one conformance suite
// (package casstore/conformance).
//
// Every method takes a context first. Failures are reported with the sentinel
// errors of this package (ErrNotFound, ErrAlreadyExists, ErrPreconditionFailed,
// ErrConflict, ErrUnsupported, ErrInvalidKey), matched with errors.Is and
// wrapped in an *OpError that names the operation and the key. Any other error
// is a transport or permission failure; for a conditional write it means the
// outcome is unknown, and the caller must read the object to learn what
// happened. Adapters never retry a conditional write blindly.
package casstore

import (
	"context"
	"fmt"
	"iter"
	"time"
)

// Version identifies one write of one object: the ETag on S3 and Azure, the
// generation on GCS, a counter in the memory and file stores. It is opaque:
// compare it only for equality and pass it back in IfMatch. The empty Version
// means "no version".
type Version string

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	// Key is the object's key relative to the store (without any URL prefix).
	Key string
	// Size is the object's length in bytes.
	Size int64
	// Version is the object's current version token. List may leave it
	// empty on backends that do not report versions in listings.
	Version Version
	// ModTime is the time of the last write, as the backend reports it.
	ModTime time.Time
}

// Store is the compare-and-swap blob contract. Implementations must be safe
// for concurrent use by multiple goroutines.
type Store interface {
	// Get returns the whole object and its info. It returns ErrNotFound if no
	// object exists at key.
	Get(ctx context.Context, key string) ([]byte, ObjectInfo, error)

	// GetRange returns the bytes [off, off+n) of the object at key. A range
	// that runs past the end of the object is cut short: the result holds the
	// bytes that exist, and is empty when off is at or past the end. n == 0
	// returns an empty slice (the object must still exist). A negative off or
	// n is ErrInvalidRange. It returns ErrNotFound if no object exists at key.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)

	// Stat returns the object's info without its body, or ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// Put writes data at key if cond holds and returns the new version.
	// IfAbsent loses with ErrAlreadyExists when any object exists at key.
	// IfMatch loses with ErrPreconditionFailed when the object's version is
	// not the given one, including when the object does not exist. A losing
	// Put leaves the stored object unchanged. A store that cannot honour
	// cond returns ErrUnsupported without writing.
	Put(ctx context.Context, key string, data []byte, cond Condition) (Version, error)

	// Delete removes the object at key if cond holds. Deleting an absent key
	// unconditionally returns ErrNotFound. IfMatch loses with
	// ErrPreconditionFailed. IfAbsent is not a valid delete condition
	// (ErrUnsupported). A store whose Capabilities().DeleteIfMatch is false
	// returns ErrUnsupported for IfMatch rather than deleting blindly.
	Delete(ctx context.Context, key string, cond Condition) error

	// List yields the objects whose key starts with prefix, in lexical
	// (byte-wise) key order. Pagination is the store's business. On failure
	// it yields one non-nil error and stops.
	List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error]

	// Capabilities says which parts of the contract this store honours.
	Capabilities() Capabilities

	// Close releases the store's resources. Calls after Close fail.
	Close() error
}

// Capabilities declares which conditional operations a store honours, so
// that callers and the conformance suite can see a gap instead of meeting it
// as a silent wrong answer.
type Capabilities struct {
	// IfAbsent: Put honours IfAbsent (create-only).
	IfAbsent bool
	// IfMatch: Put honours IfMatch (replace exactly one version).
	IfMatch bool
	// DeleteIfMatch: Delete honours IfMatch.
	DeleteIfMatch bool
	// DistinctVersions: every write gets a new version, even when it stores
	// the same bytes again. False where the version is a content hash (S3
	// ETags are MD5s), so IfMatch cannot tell two writes of identical bytes
	// apart; callers that rely on versions must make every write differ.
	DistinctVersions bool
	// NestedKeys: a key may coexist with keys below it, that is with keys
	// that start with key+"/" ("a" and "a/b"), as on S3, GCS and Azure.
	// False on stores that keep each key as a file (versitygw's posix
	// backend, MinIO on a file system, gocloud.dev's fileblob). There a Put
	// that would make a key and a "directory" of the same name fails with an
	// error (versitygw) or succeeds while List no longer shows the keys below
	// (MinIO). Portable callers never write such pairs; the WAL does not.
	NestedKeys bool
	// Gaps explains, for people and test output, why a capability is false
	// (for example "fake-gcs-server ignores ifGenerationMatch on delete").
	Gaps []string
}

// ConditionKind says which kind of condition a Condition carries.
type ConditionKind uint8

const (
	// Unconditional: write or delete whatever is there.
	Unconditional ConditionKind = iota
	// CondIfAbsent: succeed only if no object exists at the key.
	CondIfAbsent
	// CondIfMatch: succeed only if the object's version equals Version().
	CondIfMatch
)

// Condition guards a Put or Delete. The zero value is unconditional.
type Condition struct {
	kind    ConditionKind
	version Version
}

// None is the unconditional Condition.
func None() Condition { return Condition{} }

// IfAbsent is the create-only Condition.
func IfAbsent() Condition { return Condition{kind: CondIfAbsent} }

// IfMatch is the Condition that the object's current version is v. An empty
// v never matches (stores report ErrPreconditionFailed).
func IfMatch(v Version) Condition { return Condition{kind: CondIfMatch, version: v} }

// Kind reports which kind of condition c is.
func (c Condition) Kind() ConditionKind { return c.kind }

// Version reports the version an IfMatch condition expects ("" otherwise).
func (c Condition) Version() Version { return c.version }

// String renders c for logs and error messages.
func (c Condition) String() string {
	switch c.kind {
	case CondIfAbsent:
		return "if-absent"
	case CondIfMatch:
		return fmt.Sprintf("if-match(%s)", c.version)
	default:
		return "unconditional"
	}
}
