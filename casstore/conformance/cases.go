package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/objwal/objwal/casstore"
)

// pattern returns n deterministic, non-repeating-looking bytes.
func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func testRoundTrip(t T, e *env) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", []byte{}},
		{"one-byte", []byte{0x7f}},
		{"large", pattern(e.cfg.largeSize, 1)},
	} {
		key := e.k("roundtrip/" + tc.name)
		v := e.put(t, key, tc.data, casstore.None())
		e.wantObject(t, key, tc.data, v)
		info, err := e.s.Stat(t.Context(), key)
		if err != nil {
			t.Fatalf("Stat(%q): %v", key, err)
		}
		if info.Size != int64(len(tc.data)) || info.Version != v || info.Key != key {
			t.Errorf("Stat(%q) = {Key %q Size %d Version %q}, want {Key %q Size %d Version %q}",
				key, info.Key, info.Size, info.Version, key, len(tc.data), v)
		}
	}
	// Get must hand out its own copy: changing it does not change the object.
	key := e.k("roundtrip/one-byte")
	b, _ := e.get(t, key)
	if len(b) == 1 {
		b[0] = 0
		if again, _ := e.get(t, key); !bytes.Equal(again, []byte{0x7f}) {
			t.Errorf("modifying the slice Get returned changed the stored object: now %q", again)
		}
	}
}

func testOddKeys(t T, e *env) {
	names := []string{
		"with space/a b c",
		"unicode/héllo-世界-🙂",
		"equals=sign",
		"plus+sign",
		"percent%20sign%",
		"percent%2Fslash",
		"hash#and?query&amp",
		"tilde~quote'dq\"",
		".leading-dot",
		"..double-leading-dot",
		"trailing-dot.",
		"UPPER/lower",
		"deep/a/b/c/d/e/f/g/h/i/j/leaf",
		strings.Repeat("x", 200),
	}
	versions := map[string]casstore.Version{}
	for i, name := range names {
		key := e.k(name)
		versions[key] = e.put(t, key, []byte(fmt.Sprintf("object %d: %s", i, name)), casstore.IfAbsent())
	}
	for i, name := range names {
		key := e.k(name)
		e.wantObject(t, key, []byte(fmt.Sprintf("object %d: %s", i, name)), versions[key])
	}
	// Listing gives the keys back exactly, sorted byte-wise.
	var want []string
	for _, n := range names {
		want = append(want, e.k(n))
	}
	slices.Sort(want)
	got := e.listKeys(t, e.p)
	if !slices.Equal(got, want) {
		t.Errorf("List(%q) =\n  %q\nwant\n  %q", e.p, got, want)
	}
}

// testBackslashKey: a backslash is an ordinary key byte on S3, GCS and local
// disks, but Azure Blob Storage turns it into '/', so a store may refuse such
// keys with ErrInvalidKey (reported as a skip). A store that accepts one must
// keep it distinct from the '/' key.
func testBackslashKey(t T, e *env) {
	key, slash := e.k(`back\slash`), e.k("back/slash")
	v, err := e.s.Put(t.Context(), key, []byte("backslash"), casstore.IfAbsent())
	if errors.Is(err, casstore.ErrInvalidKey) {
		t.Skipf("store refuses keys with a backslash: %v", err)
	}
	if err != nil {
		t.Fatalf("Put(%q): %v (refusing is allowed only as ErrInvalidKey)", key, err)
	}
	vs := e.put(t, slash, []byte("slash"), casstore.IfAbsent())
	e.wantObject(t, key, []byte("backslash"), v)
	e.wantObject(t, slash, []byte("slash"), vs)
	if got, want := e.listKeys(t, e.k("back")), []string{slash, key}; !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
}

// testKeyAndDirectory: S3, GCS and Azure let "a" and "a/b" coexist, and so
// must every store that declares NestedKeys. It is the only case that writes
// a key and keys below it; a store that declares the gap must refuse such a
// write with an error and keep what it holds (no silent loss), and the case
// then skips with the declared reason.
func testKeyAndDirectory(t T, e *env) {
	if !e.caps.NestedKeys {
		e.checkNestedRefused(t, "flat/a", "flat/a/b") // the key first, then one below it
		e.checkNestedRefused(t, "flat/d/e", "flat/d") // a key below first, then the key
		t.Skipf("store declares NestedKeys unsupported: %s", e.gaps())
	}
	keys := []string{e.k("a"), e.k("a/b"), e.k("a/b/c"), e.k("a-"), e.k("a0")}
	for _, k := range keys {
		e.put(t, k, []byte(k), casstore.None())
	}
	for _, k := range keys {
		if b, _ := e.get(t, k); string(b) != k {
			t.Errorf("Get(%q) = %q, want %q", k, b, k)
		}
	}
	want := slices.Sorted(slices.Values(keys))
	if got := e.listKeys(t, e.k("a")); !slices.Equal(got, want) {
		t.Errorf("List(%q) = %q, want %q", e.k("a"), got, want)
	}
	if got := e.listKeys(t, e.k("a/")); !slices.Equal(got, []string{e.k("a/b"), e.k("a/b/c")}) {
		t.Errorf("List(%q) = %q, want [a/b a/b/c]", e.k("a/"), got)
	}
	// Deleting the "directory" key leaves the keys beneath it, and the
	// other way round.
	if err := e.s.Delete(t.Context(), e.k("a/b"), casstore.None()); err != nil {
		t.Fatalf("Delete(a/b): %v", err)
	}
	if b, _ := e.get(t, e.k("a/b/c")); string(b) != e.k("a/b/c") {
		t.Errorf("after deleting a/b, a/b/c = %q", b)
	}
	if err := e.s.Delete(t.Context(), e.k("a/b/c"), casstore.None()); err != nil {
		t.Fatalf("Delete(a/b/c): %v", err)
	}
	if b, _ := e.get(t, e.k("a")); string(b) != e.k("a") {
		t.Errorf("after deleting a/b/c, a = %q", b)
	}
	e.wantAbsent(t, e.k("a/b"))
}

// checkNestedRefused writes first and then second, one of which is a key
// below the other, on a store without NestedKeys. The second write may fail
// with any error; if it succeeds, the store must hold both objects after all
// (then it should declare NestedKeys). Either way, first must be unharmed.
func (e *env) checkNestedRefused(t T, first, second string) {
	t.Helper()
	ctx := t.Context()
	first, second = e.k(first), e.k(second)
	v := e.put(t, first, []byte(first), casstore.None())
	v2, err := e.s.Put(ctx, second, []byte(second), casstore.None())
	if err == nil {
		t.Logf("Put(%q) after Put(%q) succeeded although the store declares no NestedKeys; checking both survived", second, first)
		e.wantObject(t, second, []byte(second), v2)
	} else {
		t.Logf("Put(%q) after Put(%q) refused: %v", second, first, err)
		e.wantAbsent(t, second)
	}
	e.wantObject(t, first, []byte(first), v)
}

func testOverwrite(t T, e *env) {
	key := e.k("overwrite")
	v1 := e.put(t, key, []byte("first, longer value"), casstore.None())
	v2 := e.put(t, key, []byte("second"), casstore.None())
	if v1 == v2 {
		t.Errorf("two writes of different bytes share version %q", v1)
	}
	e.wantObject(t, key, []byte("second"), v2)
}

func testEmptyKey(t T, e *env) {
	ctx := t.Context()
	_, err := e.s.Put(ctx, "", []byte("x"), casstore.None())
	wantErr(t, `Put("")`, err, casstore.ErrInvalidKey)
	_, _, err = e.s.Get(ctx, "")
	wantErr(t, `Get("")`, err, casstore.ErrInvalidKey)
}

func testGetRange(t T, e *env) {
	ctx := t.Context()
	data := pattern(100, 2)
	key := e.k("range")
	e.put(t, key, data, casstore.None())
	for _, tc := range []struct {
		name   string
		off, n int64
		want   []byte
	}{
		{"inside", 10, 20, data[10:30]},
		{"whole", 0, 100, data},
		{"at-end", 90, 10, data[90:]},
		{"last-byte", 99, 1, data[99:]},
		{"past-end-short", 95, 10, data[95:]},
		{"huge-n", 50, math.MaxInt64, data[50:]},
		{"at-size", 100, 5, []byte{}},
		{"beyond-size", 200, 5, []byte{}},
		{"zero-length", 10, 0, []byte{}},
		{"zero-length-at-end", 100, 0, []byte{}},
	} {
		got, err := e.s.GetRange(ctx, key, tc.off, tc.n)
		if err != nil {
			t.Errorf("%s: GetRange(%d, %d): %v", tc.name, tc.off, tc.n, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: GetRange(%d, %d) = %s, want %s", tc.name, tc.off, tc.n, describe(got), describe(tc.want))
		}
	}
	_, err := e.s.GetRange(ctx, key, -1, 5)
	wantErr(t, "GetRange(off -1)", err, casstore.ErrInvalidRange)
	_, err = e.s.GetRange(ctx, key, 0, -1)
	wantErr(t, "GetRange(n -1)", err, casstore.ErrInvalidRange)
	_, err = e.s.GetRange(ctx, e.k("range-absent"), 0, 10)
	wantErr(t, "GetRange(absent)", err, casstore.ErrNotFound)
	_, err = e.s.GetRange(ctx, e.k("range-absent"), 0, 0)
	wantErr(t, "GetRange(absent, n 0)", err, casstore.ErrNotFound)

	empty := e.k("range-empty")
	e.put(t, empty, nil, casstore.None())
	if got, err := e.s.GetRange(ctx, empty, 0, 10); err != nil || len(got) != 0 {
		t.Errorf("GetRange(empty object, 0, 10) = %q, %v; want empty, nil", got, err)
	}
}

func testStatGetAgree(t T, e *env) {
	ctx := t.Context()
	for i, size := range []int{0, 1, 4096, 100_000} {
		key := e.k(fmt.Sprintf("stat/%d", i))
		data := pattern(size, uint64(10+i))
		v := e.put(t, key, data, casstore.None())
		st, err := e.s.Stat(ctx, key)
		if err != nil {
			t.Fatalf("Stat(%q): %v", key, err)
		}
		b, gi := e.get(t, key)
		if st.Size != int64(len(b)) || gi.Size != int64(len(b)) || st.Size != int64(size) {
			t.Errorf("%q: Stat size %d, Get info size %d, Get body %d bytes; want all %d", key, st.Size, gi.Size, len(b), size)
		}
		if st.Version != gi.Version || st.Version != v {
			t.Errorf("%q: Stat version %q, Get version %q, Put version %q; want all equal", key, st.Version, gi.Version, v)
		}
		if st.Key != key || gi.Key != key {
			t.Errorf("%q: Stat key %q, Get key %q", key, st.Key, gi.Key)
		}
		if st.ModTime.IsZero() {
			t.Errorf("%q: Stat ModTime is zero", key)
		}
	}
}

func testNotFound(t T, e *env) {
	ctx := t.Context()
	for _, key := range []string{e.k("absent"), e.k("absent/deep/key")} {
		_, _, err := e.s.Get(ctx, key)
		wantErr(t, fmt.Sprintf("Get(%q)", key), err, casstore.ErrNotFound)
		_, err = e.s.GetRange(ctx, key, 0, 1)
		wantErr(t, fmt.Sprintf("GetRange(%q)", key), err, casstore.ErrNotFound)
		_, err = e.s.Stat(ctx, key)
		wantErr(t, fmt.Sprintf("Stat(%q)", key), err, casstore.ErrNotFound)
		err = e.s.Delete(ctx, key, casstore.None())
		wantErr(t, fmt.Sprintf("Delete(%q)", key), err, casstore.ErrNotFound)
	}
	// A key that is only a "directory" of other keys is not an object.
	e.put(t, e.k("dir/child"), []byte("x"), casstore.None())
	_, _, err := e.s.Get(ctx, e.k("dir"))
	wantErr(t, "Get(dir of another key)", err, casstore.ErrNotFound)
	// Every error names the operation and key.
	var oe *casstore.OpError
	if _, _, err := e.s.Get(ctx, e.k("absent")); !errors.As(err, &oe) || oe.Key != e.k("absent") {
		t.Errorf("Get(absent) error %v is not an *OpError naming the key", err)
	}
}

// listKeys lists prefix and returns the keys, failing on an error.
func (e *env) listKeys(t T, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range e.s.List(t.Context(), prefix) {
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

// putMany writes keys concurrently (bounded), each with data(i).
func (e *env) putMany(t T, keys []string, data func(i int) []byte) {
	t.Helper()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for i, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := e.s.Put(t.Context(), k, data(i), casstore.None()); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("writing listing fixtures: %v", err)
	}
}

// testList checks prefixes and byte-wise order. No key in it is also a
// "directory" of other keys (that is KeyAndDirectoryCoexist's business), so
// it runs on stores without NestedKeys too; the order around '/' is still
// tested by siblings that sort just before it ('-' 0x2d, '.' 0x2e) and just
// after it ('0' 0x30), and by a key that equals a listed prefix ("l/ab").
func testList(t T, e *env) {
	ctx := t.Context()
	inside := []string{"l/b", "l/a-", "l/a.b", "l/a/x", "l/a0", "l/c/d/e", "l/ab", "l/abc", "l/B", "l/é", "l/~"}
	outside := []string{"l-", "l.", "l0", "la", "k/l/a", "m/l/a"}
	all := append(slices.Clone(inside), outside...)
	var keys []string
	for _, n := range all {
		keys = append(keys, e.k(n))
	}
	e.putMany(t, keys, func(i int) []byte { return make([]byte, i) })
	size := map[string]int64{}
	for i, k := range keys {
		size[k] = int64(i)
	}

	check := func(prefix string, want []string) {
		t.Helper()
		var got []string
		for info, err := range e.s.List(ctx, prefix) {
			if err != nil {
				t.Fatalf("List(%q): %v", prefix, err)
			}
			if !strings.HasPrefix(info.Key, prefix) {
				t.Errorf("List(%q) yielded %q outside the prefix", prefix, info.Key)
			}
			if info.Size != size[info.Key] {
				t.Errorf("List(%q): %q has size %d, want %d", prefix, info.Key, info.Size, size[info.Key])
			}
			if info.Version != "" {
				if st, err := e.s.Stat(ctx, info.Key); err == nil && st.Version != info.Version {
					t.Errorf("List(%q): %q has version %q, Stat says %q", prefix, info.Key, info.Version, st.Version)
				}
			}
			got = append(got, info.Key)
		}
		if !slices.Equal(got, want) {
			t.Errorf("List(%q) =\n  %q\nwant\n  %q", prefix, got, want)
		}
	}
	var want []string
	for _, n := range inside {
		want = append(want, e.k(n))
	}
	slices.Sort(want)
	check(e.k("l/"), want)
	check(e.k("l/a"), []string{e.k("l/a-"), e.k("l/a.b"), e.k("l/a/x"), e.k("l/a0"), e.k("l/ab"), e.k("l/abc")})
	check(e.k("l/a/"), []string{e.k("l/a/x")})
	check(e.k("l/ab"), []string{e.k("l/ab"), e.k("l/abc")})
	check(e.k("l/c/d/e"), []string{e.k("l/c/d/e")})
	check(e.k("l/nothing"), nil)
	check(e.k("zzz/"), nil)
	all2 := slices.Sorted(slices.Values(keys))
	check(e.p, all2)

	// Stopping early is allowed and stops the iteration.
	n := 0
	for _, err := range e.s.List(ctx, e.p) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("early break: saw %d keys, want 2", n)
	}
}

func testListPagination(t T, e *env) {
	count := e.cfg.listCount
	keys := make([]string, count)
	for i := range keys {
		keys[i] = e.k(fmt.Sprintf("page/%06d", i))
	}
	// Write in a shuffled order so an insertion-ordered listing fails.
	shuffled := slices.Clone(keys)
	r := rand.New(rand.NewPCG(3, 4))
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	sizeOf := func(k string) int { return len(k) % 7 }
	e.putMany(t, shuffled, func(i int) []byte { return make([]byte, sizeOf(shuffled[i])) })
	// Siblings outside the prefix on both sides of "page/" in byte order:
	// "page." sorts just before it and "page0" just after it. (A key equal
	// to "page" would be a key and a directory at once; that is
	// KeyAndDirectoryCoexist's business.)
	e.put(t, e.k("page."), []byte("sibling just before the prefix"), casstore.None())
	e.put(t, e.k("page0"), []byte("sibling just after the prefix"), casstore.None())
	e.put(t, e.k("pagf"), []byte("sibling outside the prefix"), casstore.None())

	var got []string
	for info, err := range e.s.List(t.Context(), e.k("page/")) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if info.Size != int64(sizeOf(info.Key)) {
			t.Errorf("%q: size %d, want %d", info.Key, info.Size, sizeOf(info.Key))
		}
		got = append(got, info.Key)
	}
	if len(got) != count {
		t.Errorf("List(%q) yielded %d keys, want %d", e.k("page/"), len(got), count)
	}
	if !slices.Equal(got, keys) {
		for i := range min(len(got), len(keys)) {
			if got[i] != keys[i] {
				t.Fatalf("List(%q): key %d is %q, want %q (order or content wrong)", e.k("page/"), i, got[i], keys[i])
			}
		}
		t.Fatalf("List(%q): got %d keys, want %d", e.k("page/"), len(got), len(keys))
	}
	// A prefix that ends inside a segment selects a sub-range.
	sub := e.listKeys(t, e.k("page/00001"))
	if want := keys[10:min(20, count)]; len(want) > 0 && !slices.Equal(sub, want) {
		t.Errorf("List(%q) = %d keys %q…, want %d keys", e.k("page/00001"), len(sub), sub[:min(3, len(sub))], len(want))
	}
}

func testListWithoutPrefix(t T, e *env) {
	ctx := t.Context()
	names := []string{"z", "a/b", "a.", "a0", "m/n/o"} // no key is also a directory
	var want []string
	for _, n := range names {
		k := e.k(n)
		e.put(t, k, []byte(n), casstore.None())
		want = append(want, k)
	}
	slices.Sort(want)
	// List("") over the whole store: it must be sorted throughout and
	// contain this case's keys. On a shared bucket, stop once past them.
	var got []string
	prev, first := "", true
	for info, err := range e.s.List(ctx, "") {
		if err != nil {
			t.Fatalf(`List(""): %v`, err)
		}
		if !first && info.Key <= prev {
			t.Errorf(`List(""): %q after %q is out of order`, info.Key, prev)
		}
		prev, first = info.Key, false
		if strings.HasPrefix(info.Key, e.p) {
			got = append(got, info.Key)
		} else if info.Key > e.p {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf(`List("") restricted to %s = %q, want %q`, e.p, got, want)
	}
}

func testIfAbsent(t T, e *env) {
	if !e.caps.IfAbsent {
		t.Skipf("store declares IfAbsent unsupported: %s", e.gaps())
	}
	key := e.k("ifabsent")
	v := e.put(t, key, []byte("winner"), casstore.IfAbsent())
	_, err := e.s.Put(t.Context(), key, []byte("loser"), casstore.IfAbsent())
	wantErr(t, "second IfAbsent Put", err, casstore.ErrAlreadyExists)
	e.wantObject(t, key, []byte("winner"), v)
	// An empty object still counts as existing.
	empty := e.k("ifabsent-empty")
	ve := e.put(t, empty, nil, casstore.IfAbsent())
	_, err = e.s.Put(t.Context(), empty, []byte("x"), casstore.IfAbsent())
	wantErr(t, "IfAbsent over an empty object", err, casstore.ErrAlreadyExists)
	e.wantObject(t, empty, []byte{}, ve)
	// After a delete the key is absent again.
	if err := e.s.Delete(t.Context(), key, casstore.None()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	e.put(t, key, []byte("again"), casstore.IfAbsent())
}

func testIfMatch(t T, e *env) {
	if !e.caps.IfMatch {
		t.Skipf("store declares IfMatch unsupported (see UnsupportedConditions): %s", e.gaps())
	}
	ctx := t.Context()
	key := e.k("ifmatch")
	v1 := e.put(t, key, []byte("one"), casstore.None())
	v2 := e.put(t, key, []byte("two"), casstore.IfMatch(v1))
	if v2 == v1 {
		t.Fatalf("IfMatch write of different bytes kept version %q", v1)
	}
	e.wantObject(t, key, []byte("two"), v2)

	// A stale version loses and leaves the object alone.
	_, err := e.s.Put(ctx, key, []byte("stale"), casstore.IfMatch(v1))
	wantErr(t, "IfMatch with a stale version", err, casstore.ErrPreconditionFailed)
	e.wantObject(t, key, []byte("two"), v2)
	// So does the empty version.
	_, err = e.s.Put(ctx, key, []byte("empty-version"), casstore.IfMatch(""))
	wantErr(t, "IfMatch with an empty version", err, casstore.ErrPreconditionFailed)
	e.wantObject(t, key, []byte("two"), v2)

	// A missing key loses, even with a version that once existed.
	missing := e.k("ifmatch-missing")
	_, err = e.s.Put(ctx, missing, []byte("x"), casstore.IfMatch(v2))
	wantErr(t, "IfMatch on a missing key", err, casstore.ErrPreconditionFailed)
	e.wantAbsent(t, missing)
	gone := e.k("ifmatch-gone")
	vg := e.put(t, gone, []byte("soon deleted"), casstore.None())
	if err := e.s.Delete(ctx, gone, casstore.None()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err = e.s.Put(ctx, gone, []byte("x"), casstore.IfMatch(vg))
	wantErr(t, "IfMatch with the version of a deleted object", err, casstore.ErrPreconditionFailed)
	e.wantAbsent(t, gone)

	// A rewrite of identical bytes through IfMatch succeeds.
	v3, err := e.s.Put(ctx, key, []byte("two"), casstore.IfMatch(v2))
	if err != nil {
		t.Fatalf("IfMatch rewrite of identical bytes: %v", err)
	}
	e.wantObject(t, key, []byte("two"), v3)
	if e.caps.DistinctVersions {
		if v3 == v2 {
			t.Errorf("store declares DistinctVersions but rewriting identical bytes kept version %q", v2)
		}
		_, err = e.s.Put(ctx, key, []byte("two"), casstore.IfMatch(v2))
		wantErr(t, "IfMatch with the version before an identical rewrite", err, casstore.ErrPreconditionFailed)
	} else {
		t.Logf("store does not declare DistinctVersions: identical rewrite gave version %q (was %q): %s", v3, v2, e.gaps())
	}
}

func testUnsupportedConditions(t T, e *env) {
	if e.caps.IfAbsent && e.caps.IfMatch {
		t.Skip("store declares IfAbsent and IfMatch: no Put condition to refuse")
	}
	ctx := t.Context()
	if !e.caps.IfAbsent {
		key := e.k("unsupported-ifabsent")
		_, err := e.s.Put(ctx, key, []byte("x"), casstore.IfAbsent())
		wantErr(t, "Put IfAbsent on a store without IfAbsent", err, casstore.ErrUnsupported)
		e.wantAbsent(t, key)
	}
	if !e.caps.IfMatch {
		key := e.k("unsupported-ifmatch")
		v := e.put(t, key, []byte("before"), casstore.None())
		_, err := e.s.Put(ctx, key, []byte("after"), casstore.IfMatch(v))
		wantErr(t, "Put IfMatch on a store without IfMatch", err, casstore.ErrUnsupported)
		e.wantObject(t, key, []byte("before"), v)
	}
	t.Logf("declared gaps: %s", e.gaps())
}

func testVersionsChange(t T, e *env) {
	key := e.k("versions")
	seen := map[casstore.Version]int{}
	for i := range 8 {
		v := e.put(t, key, []byte(fmt.Sprintf("write %d", i)), casstore.None())
		if j, dup := seen[v]; dup {
			t.Errorf("write %d got version %q, already given to write %d", i, v, j)
		}
		seen[v] = i
	}
	// Versions differ across keys too, or IfMatch could cross keys.
	other := e.put(t, e.k("versions-other"), []byte("write 7"), casstore.None())
	if _, dup := seen[other]; dup && e.caps.DistinctVersions {
		t.Logf("note: version %q of another key equals one of %q (allowed; versions are per key)", other, key)
	}
	if e.caps.DistinctVersions {
		v1 := e.put(t, key, []byte("same"), casstore.None())
		v2 := e.put(t, key, []byte("same"), casstore.None())
		if v1 == v2 {
			t.Errorf("store declares DistinctVersions, but two writes of identical bytes share version %q", v1)
		}
	}
}

func testDelete(t T, e *env) {
	ctx := t.Context()
	key := e.k("delete/me")
	e.put(t, key, []byte("x"), casstore.None())
	e.put(t, e.k("delete/keep"), []byte("y"), casstore.None())
	if err := e.s.Delete(ctx, key, casstore.None()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	e.wantAbsent(t, key)
	_, _, err := e.s.Get(ctx, key)
	wantErr(t, "Get after Delete", err, casstore.ErrNotFound)
	err = e.s.Delete(ctx, key, casstore.None())
	wantErr(t, "second Delete", err, casstore.ErrNotFound)
	if got := e.listKeys(t, e.k("delete/")); !slices.Equal(got, []string{e.k("delete/keep")}) {
		t.Errorf("List after Delete = %q, want only delete/keep", got)
	}
	// IfAbsent is not a delete condition.
	err = e.s.Delete(ctx, e.k("delete/keep"), casstore.IfAbsent())
	wantErr(t, "Delete IfAbsent", err, casstore.ErrUnsupported)
	e.get(t, e.k("delete/keep"))
}

func testDeleteIfMatch(t T, e *env) {
	ctx := t.Context()
	key := e.k("delete-ifmatch")
	v1 := e.put(t, key, []byte("one"), casstore.None())
	if !e.caps.DeleteIfMatch {
		// The contract: refuse rather than delete blindly.
		err := e.s.Delete(ctx, key, casstore.IfMatch(v1))
		wantErr(t, "Delete IfMatch on a store without DeleteIfMatch", err, casstore.ErrUnsupported)
		e.wantObject(t, key, []byte("one"), v1)
		t.Skipf("store declares conditional delete unsupported: %s", e.gaps())
	}
	v2 := e.put(t, key, []byte("two"), casstore.None())
	err := e.s.Delete(ctx, key, casstore.IfMatch(v1))
	wantErr(t, "Delete IfMatch with a stale version", err, casstore.ErrPreconditionFailed)
	e.wantObject(t, key, []byte("two"), v2)
	err = e.s.Delete(ctx, key, casstore.IfMatch(""))
	wantErr(t, "Delete IfMatch with an empty version", err, casstore.ErrPreconditionFailed)
	e.wantObject(t, key, []byte("two"), v2)
	if err := e.s.Delete(ctx, key, casstore.IfMatch(v2)); err != nil {
		t.Fatalf("Delete IfMatch with the current version: %v", err)
	}
	e.wantAbsent(t, key)
	err = e.s.Delete(ctx, key, casstore.IfMatch(v2))
	wantErr(t, "Delete IfMatch on a missing key", err, casstore.ErrPreconditionFailed)
}

func testCancelledContext(t T, e *env) {
	key := e.k("cancelled")
	e.put(t, key, []byte("x"), casstore.None())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(what string, err error) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s with a cancelled context succeeded", what)
		case !errors.Is(err, context.Canceled):
			t.Logf("%s with a cancelled context: %v (not context.Canceled; accepted)", what, err)
		}
	}
	_, _, err := e.s.Get(ctx, key)
	check("Get", err)
	_, err = e.s.GetRange(ctx, key, 0, 1)
	check("GetRange", err)
	_, err = e.s.Stat(ctx, key)
	check("Stat", err)
	fresh := e.k("cancelled-put")
	_, err = e.s.Put(ctx, fresh, []byte("x"), casstore.None())
	check("Put", err)
	e.wantAbsent(t, fresh)
	err = e.s.Delete(ctx, key, casstore.None())
	check("Delete", err)
	var listErr error
	for _, err := range e.s.List(ctx, e.p) {
		if err != nil {
			listErr = err
			break
		}
	}
	check("List", listErr)
}

func testClose(t T, e *env) {
	key := e.k("closed")
	e.put(t, key, []byte("x"), casstore.None())
	if err := e.s.Delete(t.Context(), key, casstore.None()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := e.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, _, err := e.s.Get(t.Context(), key)
	if err == nil {
		t.Fatal("Get after Close succeeded")
	}
	if !errors.Is(err, casstore.ErrClosed) {
		t.Logf("Get after Close: %v (not ErrClosed; accepted)", err)
	}
	if _, err := e.s.Put(t.Context(), key, []byte("y"), casstore.None()); err == nil {
		t.Error("Put after Close succeeded")
	}
}
