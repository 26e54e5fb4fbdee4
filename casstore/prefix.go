package casstore

import (
	"context"
	"errors"
	"iter"
	"strings"
)

// WithPrefix returns a Store that prepends prefix to every key it is given
// and strips it from every key it lists, so that several logs can share one
// bucket. An empty prefix returns s itself. Openers use it for the path part
// of a URL ("s3://bucket/logs/app" → prefix "logs/app/").
//
// The prefixed store speaks only in its own keys: ObjectInfo.Key and the Key
// of every *OpError it returns are relative to the prefix, and the empty key
// is ErrInvalidKey here even though prefix+"" would be a valid inner key.
func WithPrefix(s Store, prefix string) Store {
	if prefix == "" {
		return s
	}
	return &prefixed{inner: s, prefix: prefix}
}

type prefixed struct {
	inner  Store
	prefix string
}

// full maps a caller's key to the inner store's key, refusing the empty key
// (it would name the prefix itself, a "directory" on most backends).
func (p *prefixed) full(op, key string) (string, error) {
	if key == "" {
		return "", Wrap(op, key, ErrInvalidKey)
	}
	return p.prefix + key, nil
}

// relErr rewrites the key of an *OpError from the inner store back to the
// caller's key, so errors name the key the caller passed.
func (p *prefixed) relErr(err error) error {
	var oe *OpError
	if err == nil || !errors.As(err, &oe) || !strings.HasPrefix(oe.Key, p.prefix) {
		return err
	}
	return &OpError{Op: oe.Op, Key: strings.TrimPrefix(oe.Key, p.prefix), Err: oe.Err}
}

func (p *prefixed) Get(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	k, err := p.full("get", key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	b, info, err := p.inner.Get(ctx, k)
	info.Key = key
	return b, info, p.relErr(err)
}

func (p *prefixed) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	k, err := p.full("get-range", key)
	if err != nil {
		return nil, err
	}
	b, err := p.inner.GetRange(ctx, k, off, n)
	return b, p.relErr(err)
}

func (p *prefixed) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	k, err := p.full("stat", key)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := p.inner.Stat(ctx, k)
	info.Key = key
	return info, p.relErr(err)
}

func (p *prefixed) Put(ctx context.Context, key string, data []byte, cond Condition) (Version, error) {
	k, err := p.full("put", key)
	if err != nil {
		return "", err
	}
	v, err := p.inner.Put(ctx, k, data, cond)
	return v, p.relErr(err)
}

func (p *prefixed) Delete(ctx context.Context, key string, cond Condition) error {
	k, err := p.full("delete", key)
	if err != nil {
		return err
	}
	return p.relErr(p.inner.Delete(ctx, k, cond))
}

func (p *prefixed) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		for info, err := range p.inner.List(ctx, p.prefix+prefix) {
			info.Key = strings.TrimPrefix(info.Key, p.prefix)
			if !yield(info, p.relErr(err)) || err != nil {
				return
			}
		}
	}
}

func (p *prefixed) Capabilities() Capabilities { return p.inner.Capabilities() }

func (p *prefixed) Close() error { return p.inner.Close() }
