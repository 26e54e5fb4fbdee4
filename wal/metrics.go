package wal

import (
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names. Every instrument is created on the configured Meter;
// with the default (global, no-op until the process sets a provider) they
// cost nothing.
const (
	MetricAppendRecords  = "objwal.wal.append.records"        // counter: records appended
	MetricAppendBytes    = "objwal.wal.append.bytes"          // counter: record bytes appended
	MetricBatchRecords   = "objwal.wal.batch.records"         // histogram: records per segment
	MetricBatchBytes     = "objwal.wal.batch.bytes"           // histogram: encoded bytes per segment
	MetricCommitCount    = "objwal.wal.commit.count"          // counter by outcome (ok, error)
	MetricCommitDuration = "objwal.wal.commit.duration"       // histogram (s): one manifest CAS
	MetricCommitEntries  = "objwal.wal.commit.entries"        // histogram: segments per CAS
	MetricCommitRetries  = "objwal.wal.commit.retries"        // counter by reason (load, cas_conflict, write_conflict, unknown)
	MetricClaimCount     = "objwal.wal.claim.count"           // counter by outcome (ok, fenced, error)
	MetricClaimRetries   = "objwal.wal.claim.retries"         // counter
	MetricFenced         = "objwal.wal.fenced"                // counter
	MetricHalted         = "objwal.wal.halted"                // counter by outcome (fenced, corrupt, error)
	MetricUploadFailures = "objwal.wal.upload.failures"       // counter: failed segment PUT attempts
	MetricReplicaApplied = "objwal.wal.replica.applied"       // counter: records applied
	MetricReplicaPoll    = "objwal.wal.replica.poll.duration" // histogram (s)
	MetricReplicaLag     = "objwal.wal.replica.lag"           // gauge: records committed but not applied
	MetricReplicaFetched = "objwal.wal.replica.fetched.bytes" // counter: segment bytes fetched
)

// Retry reasons of MetricCommitRetries.
const (
	reasonLoad          = "load"           // reloading the manifest failed
	reasonCASConflict   = "cas_conflict"   // IfMatch lost: the manifest changed
	reasonWriteConflict = "write_conflict" // the store refused a concurrent write (409)
	reasonUnknown       = "unknown"        // the reply was lost: outcome unknown
)

type producerMetrics struct {
	appendRecords, appendBytes metric.Int64Counter
	batchRecords, batchBytes   metric.Int64Histogram
	commitCount                metric.Int64Counter
	commitDuration             metric.Float64Histogram
	commitEntries              metric.Int64Histogram
	commitRetries              metric.Int64Counter
	claimCount, claimRetries   metric.Int64Counter
	fenced, halted             metric.Int64Counter
	uploadFailures             metric.Int64Counter
}

type replicaMetrics struct {
	applied metric.Int64Counter
	poll    metric.Float64Histogram
	lag     metric.Int64Gauge
	fetched metric.Int64Counter
}

// instruments collects the first instrument-creation error; OpenTelemetry
// returns a usable no-op instrument alongside such an error, so a bad meter
// degrades metrics but never the log.
type instruments struct {
	m   metric.Meter
	err error
}

func (in *instruments) counter(name, desc, unit string) metric.Int64Counter {
	c, err := in.m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	in.err = errors.Join(in.err, err)
	return c
}

func (in *instruments) histogram(name, desc, unit string) metric.Int64Histogram {
	h, err := in.m.Int64Histogram(name, metric.WithDescription(desc), metric.WithUnit(unit))
	in.err = errors.Join(in.err, err)
	return h
}

func (in *instruments) seconds(name, desc string) metric.Float64Histogram {
	h, err := in.m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"))
	in.err = errors.Join(in.err, err)
	return h
}

func newProducerMetrics(m metric.Meter) (producerMetrics, error) {
	in := &instruments{m: m}
	pm := producerMetrics{
		appendRecords:  in.counter(MetricAppendRecords, "Records appended.", "{record}"),
		appendBytes:    in.counter(MetricAppendBytes, "Record bytes appended.", "By"),
		batchRecords:   in.histogram(MetricBatchRecords, "Records per sealed segment.", "{record}"),
		batchBytes:     in.histogram(MetricBatchBytes, "Encoded bytes per sealed segment.", "By"),
		commitCount:    in.counter(MetricCommitCount, "Manifest commits by outcome.", "{commit}"),
		commitDuration: in.seconds(MetricCommitDuration, "Duration of one manifest CAS."),
		commitEntries:  in.histogram(MetricCommitEntries, "Segments committed per manifest CAS.", "{segment}"),
		commitRetries:  in.counter(MetricCommitRetries, "Commit retries by reason.", "{retry}"),
		claimCount:     in.counter(MetricClaimCount, "Log claims by outcome.", "{claim}"),
		claimRetries:   in.counter(MetricClaimRetries, "Claim attempts retried.", "{retry}"),
		fenced:         in.counter(MetricFenced, "Producers fenced by a newer claim.", "{event}"),
		halted:         in.counter(MetricHalted, "Producer halts by outcome.", "{event}"),
		uploadFailures: in.counter(MetricUploadFailures, "Failed segment upload attempts.", "{attempt}"),
	}
	return pm, in.err
}

func newReplicaMetrics(m metric.Meter) (replicaMetrics, error) {
	in := &instruments{m: m}
	rm := replicaMetrics{
		applied: in.counter(MetricReplicaApplied, "Records applied by replicas.", "{record}"),
		poll:    in.seconds(MetricReplicaPoll, "Duration of one replica Poll."),
		fetched: in.counter(MetricReplicaFetched, "Segment bytes fetched by replicas.", "By"),
	}
	g, err := m.Int64Gauge(MetricReplicaLag, metric.WithDescription("Records committed but not yet applied, as of the last manifest read."), metric.WithUnit("{record}"))
	rm.lag = g
	return rm, errors.Join(in.err, err)
}

func outcome(o string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("outcome", o))
}

func reason(r string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("reason", r))
}

func since(t time.Time) float64 { return time.Since(t).Seconds() }
