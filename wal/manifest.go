package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/format"
)

// loadedManifest is a manifest as read from the store.
type loadedManifest struct {
	m       *format.Manifest
	version casstore.Version // "" when the object does not exist
	exists  bool
}

// loadManifest reads and parses the manifest at key. A missing object is
// an empty manifest with epoch 0. A manifest that does not parse is
// reported as ErrCorrupt only when a second read returns the same bytes:
// damage in transit (which differs between reads) must not halt anyone.
func loadManifest(ctx context.Context, s casstore.Store, key string, timeout time.Duration) (loadedManifest, error) {
	var lm loadedManifest
	err := readConsistent(ctx, s, "manifest", key, timeout, func(b []byte, info casstore.ObjectInfo) error {
		m, err := parseManifest(b)
		if err == nil {
			lm = loadedManifest{m: m, version: info.Version, exists: true}
		}
		return err
	})
	if errors.Is(err, casstore.ErrNotFound) {
		return loadedManifest{m: format.NewManifest()}, nil
	}
	if err != nil {
		return loadedManifest{}, err
	}
	return lm, nil
}

// errInconsistentReads: reads of one object kept failing to decode, with
// different bytes each time; it is transient (a flaky path), not damage.
var errInconsistentReads = errors.New("object did not decode and reads disagree")

// readConsistent reads key and hands the bytes to decode until decode
// accepts them. Two reads that fail to decode with identical bytes are
// stored damage: ErrCorrupt. Up to three reads are made.
func readConsistent(ctx context.Context, s casstore.Store, kind, key string, timeout time.Duration, decode func([]byte, casstore.ObjectInfo) error) error {
	var bad [][]byte
	var lastErr error
	for range 3 {
		b, info, err := getObject(ctx, s, key, timeout)
		if err != nil {
			return err
		}
		if lastErr = decode(b, info); lastErr == nil {
			return nil
		}
		for _, prev := range bad {
			if bytes.Equal(prev, b) {
				return corruptError(kind, key, lastErr)
			}
		}
		bad = append(bad, b)
	}
	return fmt.Errorf("wal: %s %q: %w: %w", kind, key, errInconsistentReads, lastErr)
}

// parseManifest is format.ParseManifest plus the sequence tiling check: a
// manifest whose entries overlap or leave gaps would misdirect replicas.
func parseManifest(b []byte) (*format.Manifest, error) {
	m, err := format.ParseManifest(b)
	if err != nil {
		return nil, err
	}
	if err := m.CheckSequences(); err != nil {
		return nil, err
	}
	return m, nil
}

type getResult struct {
	b    []byte
	info casstore.ObjectInfo
}

func getObject(ctx context.Context, s casstore.Store, key string, timeout time.Duration) ([]byte, casstore.ObjectInfo, error) {
	r, err := withTimeout(ctx, timeout, func(c context.Context) (getResult, error) {
		b, info, err := s.Get(c, key)
		return getResult{b, info}, err
	})
	return r.b, r.info, casstore.Wrap("get", key, err)
}

func putObject(ctx context.Context, s casstore.Store, key string, data []byte, cond casstore.Condition, timeout time.Duration) (casstore.Version, error) {
	v, err := withTimeout(ctx, timeout, func(c context.Context) (casstore.Version, error) {
		return s.Put(c, key, data, cond)
	})
	return v, casstore.Wrap("put", key, err)
}

func statObject(ctx context.Context, s casstore.Store, key string, timeout time.Duration) (casstore.ObjectInfo, error) {
	info, err := withTimeout(ctx, timeout, func(c context.Context) (casstore.ObjectInfo, error) {
		return s.Stat(c, key)
	})
	return info, casstore.Wrap("stat", key, err)
}
