package wal

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/objwal/objwal/format"
)

// Defaults of ProducerConfig and ReplicaConfig, applied to zero fields.
const (
	DefaultManifestPath            = "wal/manifest"
	DefaultSegmentPrefix           = "wal/seg"
	DefaultFlushInterval           = 20 * time.Millisecond
	DefaultFlushBytes              = 4 << 20
	DefaultSegmentMaxBytes         = 8 << 20
	DefaultUploadConcurrency       = 16
	DefaultManifestAppendBatchSize = 1024
	DefaultMaxInFlightBytes        = 256 << 20
	DefaultRetryWindow             = 30 * time.Second
	DefaultRequestTimeout          = 30 * time.Second
	DefaultPollInterval            = 100 * time.Millisecond
	DefaultPrefetch                = 8
)

// ProducerConfig configures a Producer. Every zero field takes the default
// named in its comment.
type ProducerConfig struct {
	// ManifestPath is the key of the manifest object. Default
	// DefaultManifestPath ("wal/manifest").
	ManifestPath string
	// SegmentPrefix is prepended to segment keys:
	// <SegmentPrefix>/<runID>/<ordinal:016x>. Default "wal/seg".
	SegmentPrefix string
	// FlushInterval is the longest a record waits in the pending buffer
	// before its segment is sealed and uploaded. Default 20ms. It bounds the
	// added commit latency at low load; at high load FlushBytes seals first.
	FlushInterval time.Duration
	// FlushBytes seals the pending buffer early once it holds this many
	// record bytes. Default 4 MiB.
	FlushBytes int
	// SegmentMaxBytes caps the encoded record block of one segment. One
	// Append group must fit in one segment, so this is also the largest
	// group (ErrTooLarge beyond). Default 8 MiB.
	SegmentMaxBytes int
	// UploadConcurrency is the number of segment uploads in flight. Default
	// 16.
	UploadConcurrency int
	// ManifestAppendBatchSize caps the segments committed by one manifest
	// CAS. Default 1024.
	ManifestAppendBatchSize int
	// MaxInFlightBytes caps the bytes appended but not yet resolved
	// (committed or failed). Append blocks beyond it: that is the
	// backpressure signal. Records count their length plus a small fixed
	// overhead, so tiny records are budgeted fairly. Default 256 MiB.
	MaxInFlightBytes int64
	// Compression of segment record blocks. Default format.CompressionNone.
	Compression format.Compression
	// LegacySegmentFormat writes segment footer v1 (no checksum) for
	// consumers that read segments as opendata buffer batches. Default
	// false (footer v2 with CRC-32C).
	LegacySegmentFormat bool
	// AllowManifestUpgrade lets NewProducer claim a v1 (opendata buffer)
	// manifest, rewriting it as v4, which buffer consumers cannot read.
	// Default false: such a claim fails with ErrLegacyManifest.
	AllowManifestUpgrade bool
	// RetryWindow is how long one operation may keep failing with transient
	// errors (5xx, lost replies, 409 conflicts, timeouts, throttling) before
	// the producer halts. Fencing and corruption halt at once. Default 30s.
	RetryWindow time.Duration
	// RequestTimeout bounds each store request; a timeout is a transient
	// error. Default 30s.
	RequestTimeout time.Duration
	// Logger receives claims, flushes and commits at Debug/Info, retries at
	// Warn, halts and fencing at Error. Default: text on stderr at Warn.
	Logger *slog.Logger
	// Meter creates the objwal.wal.* instruments. Default:
	// otel.GetMeterProvider().Meter("github.com/objwal/objwal/wal").
	Meter metric.Meter

	// serialFlushes makes each flush wait until its segments are committed
	// before the next one seals: the seed's one-flush-at-a-time pipeline.
	// Only BenchmarkPipelining sets it (export_test.go), to measure the
	// pipelined committer against that baseline on the same code.
	serialFlushes bool
}

// ReplicaConfig configures a Replica. Every zero field takes the default
// named in its comment.
type ReplicaConfig struct {
	// ManifestPath is the key of the manifest object. Default
	// "wal/manifest".
	ManifestPath string
	// Cursor persists the next sequence to apply. Default: a new memory
	// cursor store (the replica starts over after a restart).
	Cursor CursorStore
	// PollInterval is how long Run waits between polls that found nothing
	// new. Default 100ms.
	PollInterval time.Duration
	// StartAt is the first sequence to apply when the cursor store holds
	// none (for example through_seq+1 of a snapshot the application
	// restored). Default 0: the start of the log.
	StartAt uint64
	// Prefetch is how many segments are fetched in parallel ahead of the
	// one being applied. Default 8.
	Prefetch int
	// RetryWindow is how long Run keeps retrying store errors with
	// backoff before it returns one; corruption and applier errors return
	// at once. Default 0: retry until the context ends.
	RetryWindow time.Duration
	// RequestTimeout bounds each store request. Default 30s.
	RequestTimeout time.Duration
	// Logger: as ProducerConfig.Logger.
	Logger *slog.Logger
	// Meter: as ProducerConfig.Meter.
	Meter metric.Meter
}

const meterName = "github.com/objwal/objwal/wal"

func defaultLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func defaultMeter() metric.Meter { return otel.GetMeterProvider().Meter(meterName) }

// withDefaults returns c with every zero field set, or an error for a
// negative or inconsistent value.
func (c ProducerConfig) withDefaults() (ProducerConfig, error) {
	if c.ManifestPath == "" {
		c.ManifestPath = DefaultManifestPath
	}
	if c.SegmentPrefix == "" {
		c.SegmentPrefix = DefaultSegmentPrefix
	}
	setDur(&c.FlushInterval, DefaultFlushInterval)
	setInt(&c.FlushBytes, DefaultFlushBytes)
	setInt(&c.SegmentMaxBytes, DefaultSegmentMaxBytes)
	setInt(&c.UploadConcurrency, DefaultUploadConcurrency)
	setInt(&c.ManifestAppendBatchSize, DefaultManifestAppendBatchSize)
	if c.MaxInFlightBytes == 0 {
		c.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	setDur(&c.RetryWindow, DefaultRetryWindow)
	setDur(&c.RequestTimeout, DefaultRequestTimeout)
	if c.Logger == nil {
		c.Logger = defaultLogger()
	}
	if c.Meter == nil {
		c.Meter = defaultMeter()
	}
	switch {
	case c.FlushInterval < 0, c.FlushBytes < 0, c.SegmentMaxBytes < 0, c.UploadConcurrency < 0,
		c.ManifestAppendBatchSize < 0, c.MaxInFlightBytes < 0, c.RetryWindow < 0, c.RequestTimeout < 0:
		return c, fmt.Errorf("wal: negative value in ProducerConfig")
	case c.Compression != format.CompressionNone && c.Compression != format.CompressionZstd:
		return c, fmt.Errorf("wal: unknown compression %d", c.Compression)
	case int64(c.SegmentMaxBytes) > c.MaxInFlightBytes:
		return c, fmt.Errorf("wal: SegmentMaxBytes %d exceeds MaxInFlightBytes %d", c.SegmentMaxBytes, c.MaxInFlightBytes)
	}
	return c, nil
}

func (c ReplicaConfig) withDefaults() ReplicaConfig {
	if c.ManifestPath == "" {
		c.ManifestPath = DefaultManifestPath
	}
	if c.Cursor == nil {
		c.Cursor = NewMemoryCursorStore()
	}
	setDur(&c.PollInterval, DefaultPollInterval)
	setInt(&c.Prefetch, DefaultPrefetch)
	setDur(&c.RequestTimeout, DefaultRequestTimeout)
	if c.Logger == nil {
		c.Logger = defaultLogger()
	}
	if c.Meter == nil {
		c.Meter = defaultMeter()
	}
	return c
}

func setDur(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

func setInt(v *int, def int) {
	if *v <= 0 {
		*v = def
	}
}
