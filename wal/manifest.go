package wal

import (
	"context"
	"errors"
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
// an empty manifest with epoch 0. A parse failure is read once more before
// it is reported as ErrCorrupt, so a fault in transit is not mistaken for a
// damaged object.
func loadManifest(ctx context.Context, s casstore.Store, key string, timeout time.Duration) (loadedManifest, error) {
	var lastErr error
	for range 2 {
		b, info, err := getObject(ctx, s, key, timeout)
		if errors.Is(err, casstore.ErrNotFound) {
			return loadedManifest{m: format.NewManifest()}, nil
		}
		if err != nil {
			return loadedManifest{}, err
		}
		m, err := parseManifest(b)
		if err == nil {
			return loadedManifest{m: m, version: info.Version, exists: true}, nil
		}
		lastErr = err
	}
	return loadedManifest{}, corruptError("manifest", key, lastErr)
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
