// Package format encodes and decodes the two objwal object kinds byte for
// byte, in every version that exists (the contract is FORMATS.md in the shared
// spec):
//
//   - segments: a block of opaque records plus a footer; v1 (7-byte footer,
//     the buffer "data batch") and v2 (11-byte footer with a CRC-32C), each
//     uncompressed or zstd-compressed as a whole;
//   - manifests: the single ordering object that lists segments; v1 (buffer),
//     v2 and v3 (older objwal) and v4 (current objwal, CRC-32C).
//
// The readers are the strict readers of FORMATS.md §2.7 and §3.7. Every error
// they return wraps exactly one of ErrTruncated, ErrCorrupt,
// ErrUnsupportedVersion or ErrUnsupportedCompression (match with errors.Is)
// together with a reason; the object key is added by the caller. Readers
// never panic and never allocate from a count stored in the object: every
// count is bounded by the bytes actually present first.
//
// Writers produce segment v1 or v2 and manifest v4 (and, for tests and
// buffer interoperability, manifest v1 through EncodeManifestV1). Errors from
// writers (a value that does not fit its field, count 0, a location that is
// not UTF-8) wrap ErrInvalid.
//
// The package does no I/O. Its only state is the shared zstd encoder and
// decoder, which are safe for concurrent use.
package format
