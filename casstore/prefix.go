package casstore

import (
	"context"
	"iter"
	"strings"
)

// WithPrefix returns a Store that prepends prefix to every key it is given
// and strips it from every key it lists, so that several logs can share one
// bucket. An empty prefix returns s itself. Openers use it for the path part
// of a URL ("s3://bucket/logs/app" → prefix "logs/app/").
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

func (p *prefixed) Get(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	b, info, err := p.inner.Get(ctx, p.prefix+key)
	info.Key = key
	return b, info, err
}

func (p *prefixed) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return p.inner.GetRange(ctx, p.prefix+key, off, n)
}

func (p *prefixed) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	info, err := p.inner.Stat(ctx, p.prefix+key)
	info.Key = key
	return info, err
}

func (p *prefixed) Put(ctx context.Context, key string, data []byte, cond Condition) (Version, error) {
	return p.inner.Put(ctx, p.prefix+key, data, cond)
}

func (p *prefixed) Delete(ctx context.Context, key string, cond Condition) error {
	return p.inner.Delete(ctx, p.prefix+key, cond)
}

func (p *prefixed) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		for info, err := range p.inner.List(ctx, p.prefix+prefix) {
			info.Key = strings.TrimPrefix(info.Key, p.prefix)
			if !yield(info, err) || err != nil {
				return
			}
		}
	}
}

func (p *prefixed) Capabilities() Capabilities { return p.inner.Capabilities() }

func (p *prefixed) Close() error { return p.inner.Close() }
