package cloudtest

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"testing"

	"github.com/objwal/objwal/casstore"
)

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestTornMD5ETag(t *testing.T) {
	for _, tc := range []struct {
		data, etag string
		torn       bool
	}{
		{"new", md5hex("new"), false},
		{"new", `"` + md5hex("new") + `"`, false},
		{"new", md5hex("old"), true},
		{"new", md5hex("new") + "-2", false}, // multipart: not an MD5 of the bytes
		{"new", "", false},
		{"new", "18ed0a6b4e2c0b39-7", false},
		{"new", "zz" + md5hex("new")[2:], false}, // not hex
	} {
		if got := TornMD5ETag([]byte(tc.data), tc.etag); got != tc.torn {
			t.Errorf("TornMD5ETag(%q, %q) = %v, want %v", tc.data, tc.etag, got, tc.torn)
		}
	}
}

// tornOnce answers its first n Gets with the previous version's ETag.
type tornOnce struct {
	casstore.Store
	n int
}

func (s *tornOnce) Get(ctx context.Context, key string) ([]byte, casstore.ObjectInfo, error) {
	info := casstore.ObjectInfo{Key: key, Version: casstore.Version(md5hex("new"))}
	if s.n > 0 {
		s.n--
		info.Version = casstore.Version(md5hex("old"))
	}
	return []byte("new"), info, nil
}

func TestGuardTornGets(t *testing.T) {
	g := GuardTornGets(t, &tornOnce{Store: casstore.NewMemory(), n: 2})
	_, info, err := g.Get(context.Background(), "k")
	if err != nil || info.Version != casstore.Version(md5hex("new")) {
		t.Fatalf("Get = %q, %v; want the untorn answer after two re-reads", info.Version, err)
	}
	if n := g.(*tornGuard).torn.Load(); n != 2 {
		t.Fatalf("counted %d torn answers, want 2", n)
	}
	// An answer torn every time comes through as it is, for the suite to judge.
	g = GuardTornGets(t, &tornOnce{Store: casstore.NewMemory(), n: 1000})
	if _, info, _ := g.Get(context.Background(), "k"); info.Version != casstore.Version(md5hex("old")) {
		t.Fatalf("always-torn Get = %q; want the torn answer passed through", info.Version)
	}
}
