package format

import (
	"errors"
	"fmt"
)

// The error classes of FORMATS.md §6. Every error returned by a decoder wraps
// exactly one of the first four; match them with errors.Is.
var (
	// ErrTruncated: the object is too short for its footer, or a length or
	// count runs past the end of its block.
	ErrTruncated = errors.New("truncated")
	// ErrCorrupt: a CRC does not match, or the content is inconsistent
	// (zstd failure, bytes left over, an entry overrunning its body, a
	// location that is not UTF-8, entries_count disagreeing with the region).
	ErrCorrupt = errors.New("corrupt")
	// ErrUnsupportedVersion: the version word names a format this package
	// does not know (usually a newer writer, or a cut-off object).
	ErrUnsupportedVersion = errors.New("unsupported version")
	// ErrUnsupportedCompression: a segment's compression code is not 0
	// (none) or 1 (zstd).
	ErrUnsupportedCompression = errors.New("unsupported compression")

	// ErrInvalid is returned by encoders and mutators, never by decoders: a
	// value does not fit its field (a record or payload over 4 GiB, a
	// location over 65,535 bytes, more than 2^32-1 items), a count is 0, a
	// location is not UTF-8, or a sequence would overflow.
	ErrInvalid = errors.New("invalid argument")
)

// errorf returns an error wrapping class whose text is "class: reason".
func errorf(class error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{class}, args...)...)
}

// ErrorClass names the §6 class of err: "truncated", "corrupt",
// "unsupported-version", "unsupported-compression", "invalid", or "" when
// err wraps none of this package's sentinels.
func ErrorClass(err error) string {
	switch {
	case errors.Is(err, ErrTruncated):
		return "truncated"
	case errors.Is(err, ErrCorrupt):
		return "corrupt"
	case errors.Is(err, ErrUnsupportedVersion):
		return "unsupported-version"
	case errors.Is(err, ErrUnsupportedCompression):
		return "unsupported-compression"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	}
	return ""
}
