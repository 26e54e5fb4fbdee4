package wal_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/faultstore"
	"github.com/objwal/objwal/wal"
)

// TestMetricsAndLogs: the instruments report under objwal.wal.*, and a
// healthy run logs nothing at Warn while a fenced one does.
func TestMetricsAndLogs(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fs := faultstore.New(casstore.NewMemory(), faultstore.Config{})
	cfg := fastConfig()
	cfg.Meter, cfg.Logger = meter, logger
	p, err := wal.NewProducer(ctx, fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := p.Append(ctx, [][]byte{rec(0), rec(1)}, nil)
	if _, err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	rep := wal.NewReplica(fs, &collector{}, wal.ReplicaConfig{Meter: meter, Logger: logger})
	if _, err := rep.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Fatalf("a healthy run logged at Warn: %s", logs.String())
	}
	if _, err := wal.NewProducer(ctx, fs, fastConfig()); err != nil { // fences p
		t.Fatal(err)
	}
	d, _ = p.Append(ctx, [][]byte{rec(2)}, nil)
	d.Wait(ctx)
	p.Close(ctx)
	if !strings.Contains(logs.String(), "fenced") {
		t.Fatalf("fencing was not logged: %q", logs.String())
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					sums[m.Name] += dp.Value
				}
			}
		}
	}
	for name, want := range map[string]int64{
		wal.MetricAppendRecords:  3,
		wal.MetricReplicaApplied: 2,
		wal.MetricFenced:         1,
		wal.MetricClaimCount:     1,
	} {
		if sums[name] != want {
			t.Errorf("%s = %d, want %d", name, sums[name], want)
		}
	}
	for _, name := range []string{wal.MetricCommitDuration, wal.MetricBatchBytes, wal.MetricReplicaPoll, wal.MetricReplicaLag, wal.MetricHalted} {
		if !seen[name] {
			t.Errorf("%s not reported", name)
		}
	}
}
