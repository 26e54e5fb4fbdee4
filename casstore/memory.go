package casstore

import (
	"context"
	"iter"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is an in-process Store: the in-memory twin of every cloud adapter,
// for tests, examples and the demo. It is safe for concurrent use, honours
// every condition, and gives every write a new version even when the bytes are
// identical. Get returns copies, so callers may modify what they receive.
type Memory struct {
	data   *memData
	closed atomic.Bool
}

type memData struct {
	mu      sync.RWMutex
	objects map[string]memObject
	next    uint64 // last version number handed out
}

type memObject struct {
	data    []byte
	version Version
	modTime time.Time
}

// NewMemory returns a new, empty memory store.
func NewMemory() *Memory {
	return &Memory{data: &memData{objects: map[string]memObject{}}}
}

// namedMemory holds the stores opened as mem://name, so that every Open of
// the same name in one process shares one store (as a bucket would). It is
// part of the "mem" scheme's registration.
var (
	namedMemoryMu sync.Mutex
	namedMemory   = map[string]*memData{}
)

func init() {
	Register("mem", openMemory)
}

// openMemory opens mem://name[/prefix]. Each Open returns its own handle (so
// closing one does not close the others) on the shared data of that name.
func openMemory(_ context.Context, u *url.URL) (Store, error) {
	if err := NewQuery(u).Err(); err != nil {
		return nil, err
	}
	name := u.Host
	namedMemoryMu.Lock()
	d, ok := namedMemory[name]
	if !ok {
		d = &memData{objects: map[string]memObject{}}
		namedMemory[name] = d
	}
	namedMemoryMu.Unlock()
	return WithPrefix(&Memory{data: d}, PrefixFromPath(u.Path)), nil
}

func (m *Memory) check(ctx context.Context, op, key string) error {
	return CheckCall(ctx, m.closed.Load(), op, key)
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	if err := m.check(ctx, "get", key); err != nil {
		return nil, ObjectInfo{}, err
	}
	m.data.mu.RLock()
	o, ok := m.data.objects[key]
	m.data.mu.RUnlock()
	if !ok {
		return nil, ObjectInfo{}, Wrap("get", key, ErrNotFound)
	}
	return slices.Clone(o.data), o.info(key), nil
}

// GetRange implements Store.
func (m *Memory) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := m.check(ctx, "get-range", key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, Wrap("get-range", key, ErrInvalidRange)
	}
	m.data.mu.RLock()
	o, ok := m.data.objects[key]
	m.data.mu.RUnlock()
	if !ok {
		return nil, Wrap("get-range", key, ErrNotFound)
	}
	size := int64(len(o.data))
	if off >= size {
		return []byte{}, nil
	}
	end := min(size, off+min(n, size)) // min(n, size) keeps off+n from overflowing
	return slices.Clone(o.data[off:end]), nil
}

// Stat implements Store.
func (m *Memory) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := m.check(ctx, "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	m.data.mu.RLock()
	o, ok := m.data.objects[key]
	m.data.mu.RUnlock()
	if !ok {
		return ObjectInfo{}, Wrap("stat", key, ErrNotFound)
	}
	return o.info(key), nil
}

// Put implements Store.
func (m *Memory) Put(ctx context.Context, key string, data []byte, cond Condition) (Version, error) {
	if err := m.check(ctx, "put", key); err != nil {
		return "", err
	}
	d := m.data
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, exists := d.objects[key]
	switch cond.Kind() {
	case CondIfAbsent:
		if exists {
			return "", Wrap("put", key, ErrAlreadyExists)
		}
	case CondIfMatch:
		if !exists || cond.Version() == "" || cur.version != cond.Version() {
			return "", Wrap("put", key, ErrPreconditionFailed)
		}
	}
	d.next++
	v := Version("m" + strconv.FormatUint(d.next, 10))
	d.objects[key] = memObject{data: slices.Clone(data), version: v, modTime: time.Now()}
	return v, nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, key string, cond Condition) error {
	if err := m.check(ctx, "delete", key); err != nil {
		return err
	}
	d := m.data
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, exists := d.objects[key]
	switch cond.Kind() {
	case CondIfAbsent:
		return Wrap("delete", key, ErrUnsupported)
	case CondIfMatch:
		if !exists || cond.Version() == "" || cur.version != cond.Version() {
			return Wrap("delete", key, ErrPreconditionFailed)
		}
	default:
		if !exists {
			return Wrap("delete", key, ErrNotFound)
		}
	}
	delete(d.objects, key)
	return nil
}

// List implements Store. It lists a snapshot taken when iteration starts.
func (m *Memory) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		if err := m.check(ctx, "list", prefix); err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		m.data.mu.RLock()
		infos := make([]ObjectInfo, 0)
		for k, o := range m.data.objects {
			if strings.HasPrefix(k, prefix) {
				infos = append(infos, o.info(k))
			}
		}
		m.data.mu.RUnlock()
		slices.SortFunc(infos, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
		for _, info := range infos {
			if err := ctx.Err(); err != nil {
				yield(ObjectInfo{}, Wrap("list", prefix, err))
				return
			}
			if !yield(info, nil) {
				return
			}
		}
	}
}

// Capabilities implements Store: the memory store honours everything.
func (m *Memory) Capabilities() Capabilities {
	return Capabilities{IfAbsent: true, IfMatch: true, DeleteIfMatch: true, DistinctVersions: true, NestedKeys: true}
}

// Close implements Store. Later calls on this handle fail with ErrClosed;
// other handles on the same mem://name are unaffected.
func (m *Memory) Close() error {
	m.closed.Store(true)
	return nil
}

func (o memObject) info(key string) ObjectInfo {
	return ObjectInfo{Key: key, Size: int64(len(o.data)), Version: o.version, ModTime: o.modTime}
}
