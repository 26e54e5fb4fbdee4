package wal

// WithSerialFlushes returns cfg with the seed's one-flush-at-a-time
// pipeline switched on: each flush waits until its segments are committed
// before the next one seals. It exists only for BenchmarkPipelining's
// baseline and is not part of the package's API.
func WithSerialFlushes(cfg ProducerConfig) ProducerConfig {
	cfg.serialFlushes = true
	return cfg
}
