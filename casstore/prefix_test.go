package casstore_test

import (
	"errors"
	"testing"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/conformance"
)

// TestConformancePrefixed runs the shared suite on a prefixed store: every
// URL with a path (s3://bucket/logs/app, mem://name/pre) is one, so the
// wrapper must keep the whole contract, errors and the empty key included.
func TestConformancePrefixed(t *testing.T) {
	conformance.Run(t, func(t *testing.T) casstore.Store {
		s := casstore.WithPrefix(casstore.NewMemory(), "tenant/log/")
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestPrefixedErrorsNameCallersKey: an error names the key the caller
// passed, not the inner store's key, like ObjectInfo.Key does.
func TestPrefixedErrorsNameCallersKey(t *testing.T) {
	ctx := t.Context()
	p := casstore.WithPrefix(casstore.NewMemory(), "pre/")
	_, _, err := p.Get(ctx, "absent")
	var oe *casstore.OpError
	if !errors.As(err, &oe) || oe.Key != "absent" || oe.Op != "get" || !errors.Is(err, casstore.ErrNotFound) {
		t.Fatalf("Get(absent) = %v; want an *OpError for get of key \"absent\" wrapping ErrNotFound", err)
	}
	if _, err := p.Put(ctx, "k", nil, casstore.IfMatch("stale")); !errors.As(err, &oe) || oe.Key != "k" {
		t.Fatalf("Put(k, stale) = %v; want an *OpError naming \"k\"", err)
	}
}

// TestPrefixedEmptyKey: the empty key would name the prefix itself (a
// "directory" on most backends); the prefixed store refuses it.
func TestPrefixedEmptyKey(t *testing.T) {
	ctx := t.Context()
	inner := casstore.NewMemory()
	p := casstore.WithPrefix(inner, "pre/")
	if _, err := p.Put(ctx, "", []byte("x"), casstore.None()); !errors.Is(err, casstore.ErrInvalidKey) {
		t.Fatalf("Put(\"\") = %v; want ErrInvalidKey", err)
	}
	if _, err := inner.Stat(ctx, "pre/"); !errors.Is(err, casstore.ErrNotFound) {
		t.Fatalf("a refused Put(\"\") left an object at the prefix: %v", err)
	}
	if _, _, err := p.Get(ctx, ""); !errors.Is(err, casstore.ErrInvalidKey) {
		t.Fatalf("Get(\"\") = %v; want ErrInvalidKey", err)
	}
}
