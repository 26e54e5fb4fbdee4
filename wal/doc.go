// Package wal is objwal's replication log over a casstore.Store: one
// epoch-fenced Producer appends records, many read-only Replicas tail them.
// The log is a manifest object (the ordering authority, replaced by CAS) and
// immutable segment objects named <SegmentPrefix>/<runID>/<ordinal:016x>;
// the formats are in package format.
//
// # Producer
//
// A record travels Append → pending buffer → sealed segment (flusher) →
// parallel PUTs (uploaders) → manifest CAS (committer) → Durability.Wait.
// The stages run concurrently. The committer is one persistent goroutine:
// while its CAS for one flush is in flight the next flush is already
// uploading, and its next CAS takes every segment that is ready, in ordinal
// order (group commit). It commits with IfMatch on the version it last
// wrote and reloads the manifest only when that fails, so the latency floor
// is one segment PUT plus one manifest CAS, and the commit rate is bounded
// by the manifest round trip while bytes per commit grow with load. Flush
// triggers and the backpressure budget are in bytes (FlushBytes,
// MaxInFlightBytes), never a count of batches.
//
// Transient failures (5xx, 409 conflicts, timeouts, lost replies,
// throttling) are retried with backoff for RetryWindow; fencing and
// corruption halt at once. A CAS whose reply was lost is resolved by
// reloading the manifest and looking for this producer's own segment keys
// at the sequence the CAS would have appended at: keys are unique, so they
// are there if and only if the CAS landed. Acknowledged records are never
// lost, duplicated or reordered, and every error from Wait is truthful:
// ErrFenced, ErrHalted and ErrClosed mean "not in the log, ever";
// ErrOutcomeUnknown means the producer stopped before it could tell.
//
// # Replica
//
// A Replica polls the manifest (a Stat when nothing changed), prefetches up
// to Prefetch segments in parallel, applies their records strictly in
// sequence order through an Applier, and saves its cursor after applying.
// Delivery is at least once, so Apply must be idempotent. Corruption stops
// it with ErrCorrupt before anything of the damaged object is applied; it
// is declared only when two reads agree on the damaged bytes, so a flip in
// transit is retried instead.
//
// Replicas tail opendata buffer (v1) manifests as they are; a producer
// refuses to claim one unless ProducerConfig.AllowManifestUpgrade is set,
// because rewriting it as v4 shuts buffer consumers out.
package wal
