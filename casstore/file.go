package casstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// File is a Store in a directory on local disk (URL file:///abs/dir). Its
// conditions hold across processes, not only across goroutines: any number of
// processes may open the same directory, and of two that race an IfMatch on
// one key exactly one wins.
//
// # Layout
//
// The directory holds three subdirectories, created by NewFile if missing:
//
//	objects/  one file per object, at the key's path (see below)
//	tmp/      objects being written; never listed, never a key
//	locks/    lock files, one per stripe of keys
//
// A key is a '/'-separated path. Each segment is escaped (the bytes '%' and
// '#', control bytes and DEL become %XX) and tagged: the last segment becomes
// the file "<segment>#o", every other segment the directory "<segment>#d".
// So the object "a" (objects/a#o) and the object "a/b" (objects/a#d/b#o)
// coexist as they do on S3, and no key can name a file outside objects/.
// Keys must be valid for that mapping: not empty, no NUL byte, no empty
// segment (a leading, trailing or doubled '/'), no "." or ".." segment, and
// each escaped segment at most 253 bytes (a file name is at most 255).
// Anything else is ErrInvalidKey. The store needs a case-sensitive file
// system (keys "A" and "a" are different objects).
//
// # Objects and versions
//
// An object file is a 20-byte header (the magic "OWF1" and a random 128-bit
// write token) followed by the object's bytes. The token is the Version
// ("f" + 32 hex digits): it changes on every write, even of identical bytes,
// and survives restarts because it lives in the same file as the bytes, so
// version and bytes change together in one rename.
//
// # Writes
//
// Put writes the new file in tmp/, fsyncs it, then takes the key's stripe
// lock (an in-process mutex and an exclusive flock on locks/<stripe>),
// reads the current version, checks the condition, renames the file over
// the object and fsyncs the directory. A reader holds an open file, so it
// sees one whole version; a crash mid-write leaves the old object (and at
// worst a stray file in tmp/, which NewFile removes once it is a day old).
// Delete takes the same lock and removes emptied parent directories best
// effort. Reads take no lock.
//
// File is safe for concurrent use. It needs flock(2), so it works on Linux
// and the BSDs (macOS included); elsewhere NewFile returns ErrUnsupported.
type File struct {
	root    string // absolute directory
	objects string // root/objects
	tmp     string // root/tmp
	locks   string // root/locks
	closed  atomic.Bool
	stripes [fileStripes]fileStripe
}

// fileStripes is the number of lock stripes: keys hash onto them, so two
// keys may share a lock (and briefly wait on each other), never the reverse.
const fileStripes = 64

// fileStripe serializes writers of a stripe: mu within the process, an
// exclusive flock on f across processes. f is opened on first use and
// closed by Close, both under mu.
type fileStripe struct {
	mu sync.Mutex
	f  *os.File
}

const (
	fileMagic     = "OWF1"
	fileHeaderLen = len(fileMagic) + 16
	fileObjSuffix = "#o"
	fileDirSuffix = "#d"
	fileTmpMaxAge = 24 * time.Hour
	// maxSegment is the longest escaped segment: a file name holds 255
	// bytes, two of which are the suffix.
	maxSegment = 253
)

func init() {
	Register("file", openFile)
}

// openFile opens file:///abs/dir. The path is the store's directory; there
// is no further key prefix and no query parameter.
func openFile(_ context.Context, u *url.URL) (Store, error) {
	if err := NewQuery(u).Err(); err != nil {
		return nil, err
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("%w: file URL %q has a relative path; want file:///absolute/dir", ErrInvalidURL, u.Opaque)
	}
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("%w: file URL names host %q; want file:///absolute/dir (three slashes; relative paths are not allowed)", ErrInvalidURL, u.Host)
	}
	if u.Path == "" || !filepath.IsAbs(u.Path) {
		return nil, fmt.Errorf("%w: file URL needs an absolute directory, as in file:///var/lib/objwal", ErrInvalidURL)
	}
	return NewFile(u.Path)
}

// NewFile opens the file store in dir, creating dir and its subdirectories
// if they do not exist. dir must be an absolute path (ErrInvalidURL
// otherwise, as Open reports it). Several File values, in one process or
// many, may share a directory.
func NewFile(dir string) (*File, error) {
	if !fileLocking {
		return nil, fmt.Errorf("casstore: file store: %w: no flock(2) on this platform", ErrUnsupported)
	}
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("casstore: file store: %w: directory %q is not an absolute path", ErrInvalidURL, dir)
	}
	dir = filepath.Clean(dir)
	f := &File{
		root:    dir,
		objects: filepath.Join(dir, "objects"),
		tmp:     filepath.Join(dir, "tmp"),
		locks:   filepath.Join(dir, "locks"),
	}
	for _, d := range []string{f.objects, f.tmp, f.locks} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("casstore: file store: %w", err)
		}
	}
	f.removeStaleTemps()
	return f, nil
}

// Dir returns the store's directory.
func (f *File) Dir() string { return f.root }

// removeStaleTemps deletes temp files old enough that no live writer can
// still own them (a crash between write and rename leaves them behind).
func (f *File) removeStaleTemps() {
	entries, err := os.ReadDir(f.tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > fileTmpMaxAge {
			_ = os.Remove(filepath.Join(f.tmp, e.Name()))
		}
	}
}

// check refuses calls after Close or with a done context. Unlike
// CheckCall it lets an empty key through: keyPath refuses it with a reason.
func (f *File) check(ctx context.Context, op, key string) error {
	return checkLive(ctx, f.closed.Load(), op, key)
}

// escapeSegment escapes the bytes that may not appear in a file name as we
// use it: '%' (the escape), '#' (the type tag), control bytes and DEL.
func escapeSegment(seg string) string {
	const hexdig = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c == '%' || c == '#' || c < 0x20 || c == 0x7f {
			b.WriteByte('%')
			b.WriteByte(hexdig[c>>4])
			b.WriteByte(hexdig[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// unescapeSegment reverses escapeSegment; ok is false for a name that
// escapeSegment cannot have produced.
func unescapeSegment(name string) (string, bool) {
	if !strings.Contains(name, "%") {
		return name, !strings.Contains(name, "#")
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '#':
			return "", false
		case c == '%':
			if i+2 >= len(name) {
				return "", false
			}
			v, err := hex.DecodeString(name[i+1 : i+3])
			if err != nil {
				return "", false
			}
			b.WriteByte(v[0])
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// keyPath maps a key to its object file, or returns an ErrInvalidKey error
// saying why the key cannot be stored.
func (f *File) keyPath(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.IndexByte(key, 0) >= 0 {
		return "", fmt.Errorf("%w: key contains a NUL byte", ErrInvalidKey)
	}
	segs := strings.Split(key, "/")
	parts := make([]string, 0, len(segs)+1)
	parts = append(parts, f.objects)
	for i, seg := range segs {
		switch seg {
		case "":
			return "", fmt.Errorf("%w: empty path segment (key starts or ends with '/' or contains \"//\")", ErrInvalidKey)
		case ".", "..":
			return "", fmt.Errorf("%w: %q path segment", ErrInvalidKey, seg)
		}
		esc := escapeSegment(seg)
		if len(esc) > maxSegment {
			return "", fmt.Errorf("%w: path segment %d is %d bytes escaped; the file store allows %d", ErrInvalidKey, i, len(esc), maxSegment)
		}
		if i == len(segs)-1 {
			parts = append(parts, esc+fileObjSuffix)
		} else {
			parts = append(parts, esc+fileDirSuffix)
		}
	}
	return filepath.Join(parts...), nil
}

// lock takes the key's stripe lock, in-process then cross-process, and
// returns the function that releases it.
func (f *File) lock(key string) (func(), error) {
	h := fnv.New32a()
	h.Write([]byte(key))
	idx := h.Sum32() % fileStripes
	s := &f.stripes[idx]
	s.mu.Lock()
	if f.closed.Load() {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.f == nil {
		lf, err := os.OpenFile(filepath.Join(f.locks, fmt.Sprintf("stripe-%02d", idx)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		s.f = lf
	}
	if err := flockRetry(s.f, true); err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("lock %s: %w", s.f.Name(), err)
	}
	return func() {
		_ = flockRetry(s.f, false)
		s.mu.Unlock()
	}, nil
}

// flockRetry takes (or releases) an exclusive flock, retrying on EINTR.
func flockRetry(lf *os.File, exclusive bool) error {
	for {
		err := flock(lf, exclusive)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// openObject opens the object file at p and reads its header. It returns
// fs.ErrNotExist (wrapped) when there is no object.
func openObject(p string) (*os.File, Version, os.FileInfo, error) {
	fh, err := os.Open(p)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			err = fs.ErrNotExist
		}
		return nil, "", nil, err
	}
	v, st, err := readHeader(fh)
	if err != nil {
		fh.Close()
		return nil, "", nil, err
	}
	return fh, v, st, nil
}

// readHeader reads and checks an object file's header.
func readHeader(fh *os.File) (Version, os.FileInfo, error) {
	st, err := fh.Stat()
	if err != nil {
		return "", nil, err
	}
	if !st.Mode().IsRegular() {
		return "", nil, fs.ErrNotExist
	}
	var hdr [fileHeaderLen]byte
	if _, err := io.ReadFull(fh, hdr[:]); err != nil || string(hdr[:len(fileMagic)]) != fileMagic {
		return "", nil, fmt.Errorf("corrupt object file %s: bad or short header", fh.Name())
	}
	return Version("f" + hex.EncodeToString(hdr[len(fileMagic):])), st, nil
}

func fileInfo(key string, v Version, st os.FileInfo) ObjectInfo {
	return ObjectInfo{Key: key, Size: st.Size() - int64(fileHeaderLen), Version: v, ModTime: st.ModTime()}
}

// mapErr turns a file-system error into the contract's sentinel where one
// applies.
func mapErr(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	return err
}

// Get implements Store.
func (f *File) Get(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	const op = "get"
	if err := f.check(ctx, op, key); err != nil {
		return nil, ObjectInfo{}, err
	}
	p, err := f.keyPath(key)
	if err != nil {
		return nil, ObjectInfo{}, Wrap(op, key, err)
	}
	fh, v, st, err := openObject(p)
	if err != nil {
		return nil, ObjectInfo{}, Wrap(op, key, mapErr(err))
	}
	defer fh.Close()
	info := fileInfo(key, v, st)
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, ObjectInfo{}, Wrap(op, key, err)
	}
	return data, info, nil
}

// GetRange implements Store. It reads only the requested bytes.
func (f *File) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	const op = "get-range"
	if err := f.check(ctx, op, key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, Wrap(op, key, ErrInvalidRange)
	}
	p, err := f.keyPath(key)
	if err != nil {
		return nil, Wrap(op, key, err)
	}
	fh, _, st, err := openObject(p)
	if err != nil {
		return nil, Wrap(op, key, mapErr(err))
	}
	defer fh.Close()
	size := st.Size() - int64(fileHeaderLen)
	if off >= size {
		return []byte{}, nil
	}
	end := off + min(n, size-off)
	buf := make([]byte, end-off)
	if _, err := fh.ReadAt(buf, int64(fileHeaderLen)+off); err != nil {
		return nil, Wrap(op, key, err)
	}
	return buf, nil
}

// Stat implements Store.
func (f *File) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	const op = "stat"
	if err := f.check(ctx, op, key); err != nil {
		return ObjectInfo{}, err
	}
	p, err := f.keyPath(key)
	if err != nil {
		return ObjectInfo{}, Wrap(op, key, err)
	}
	fh, v, st, err := openObject(p)
	if err != nil {
		return ObjectInfo{}, Wrap(op, key, mapErr(err))
	}
	fh.Close()
	return fileInfo(key, v, st), nil
}

// currentVersion reads the version of the object at p, or "" if there is
// none. The caller holds the key's lock.
func currentVersion(p string) (Version, error) {
	fh, v, _, err := openObject(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	fh.Close()
	return v, nil
}

// Put implements Store.
func (f *File) Put(ctx context.Context, key string, data []byte, cond Condition) (Version, error) {
	const op = "put"
	if err := f.check(ctx, op, key); err != nil {
		return "", err
	}
	p, err := f.keyPath(key)
	if err != nil {
		return "", Wrap(op, key, err)
	}
	// Write the new object in full before taking the lock.
	var hdr [fileHeaderLen]byte
	copy(hdr[:], fileMagic)
	if _, err := rand.Read(hdr[len(fileMagic):]); err != nil {
		return "", Wrap(op, key, err)
	}
	v := Version("f" + hex.EncodeToString(hdr[len(fileMagic):]))
	tmp, err := f.writeTemp(hdr[:], data)
	if err != nil {
		return "", Wrap(op, key, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = os.Remove(tmp)
		}
	}()
	if err := ctx.Err(); err != nil {
		return "", Wrap(op, key, err)
	}

	unlock, err := f.lock(key)
	if err != nil {
		return "", Wrap(op, key, err)
	}
	defer unlock()
	cur, err := currentVersion(p)
	if err != nil {
		return "", Wrap(op, key, mapErr(err))
	}
	switch cond.Kind() {
	case CondIfAbsent:
		if cur != "" {
			return "", Wrap(op, key, ErrAlreadyExists)
		}
	case CondIfMatch:
		if cur == "" || cond.Version() == "" || cur != cond.Version() {
			return "", Wrap(op, key, ErrPreconditionFailed)
		}
	}
	if err := f.install(tmp, p); err != nil {
		return "", Wrap(op, key, mapErr(err))
	}
	renamed = true
	return v, nil
}

// writeTemp writes header and data to a new file in tmp/ and fsyncs it.
func (f *File) writeTemp(header, data []byte) (string, error) {
	fh, err := os.CreateTemp(f.tmp, "put-*")
	if err != nil {
		return "", err
	}
	name := fh.Name()
	_, err = fh.Write(header)
	if err == nil {
		_, err = fh.Write(data)
	}
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

// install renames tmp over the object file p, creating p's parent
// directories, and makes the rename durable. A concurrent Delete may remove
// a directory it created while it was still empty, so it retries.
func (f *File) install(tmp, p string) error {
	dir := filepath.Dir(p)
	var err error
	for range 100 {
		var created []string
		created, err = f.mkdirs(dir)
		if err != nil {
			return err
		}
		err = os.Rename(tmp, p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a parent vanished under us; create it again
		}
		if err != nil {
			return err
		}
		// Make the rename and any new directory entries durable.
		if err := syncDir(dir); err != nil {
			return err
		}
		for _, d := range created {
			if err := syncDir(filepath.Dir(d)); err != nil {
				return err
			}
		}
		return nil
	}
	return err
}

// mkdirs creates dir and its missing parents below f.objects and returns the
// directories it created.
func (f *File) mkdirs(dir string) ([]string, error) {
	rel, err := filepath.Rel(f.objects, dir)
	if err != nil || rel == "." {
		return nil, err
	}
	var created []string
	cur := f.objects
	for seg := range strings.SplitSeq(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, seg)
		err := os.Mkdir(cur, 0o755)
		switch {
		case err == nil:
			created = append(created, cur)
		case errors.Is(err, fs.ErrExist):
		default:
			return created, err
		}
	}
	return created, nil
}

// syncDir fsyncs a directory so that entries created or removed in it
// survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Delete implements Store.
func (f *File) Delete(ctx context.Context, key string, cond Condition) error {
	const op = "delete"
	if err := f.check(ctx, op, key); err != nil {
		return err
	}
	if cond.Kind() == CondIfAbsent {
		return Wrap(op, key, fmt.Errorf("%w: IfAbsent is not a delete condition", ErrUnsupported))
	}
	p, err := f.keyPath(key)
	if err != nil {
		return Wrap(op, key, err)
	}
	unlock, err := f.lock(key)
	if err != nil {
		return Wrap(op, key, err)
	}
	cur, err := currentVersion(p)
	if err != nil {
		unlock()
		return Wrap(op, key, mapErr(err))
	}
	switch {
	case cond.Kind() == CondIfMatch && (cur == "" || cond.Version() == "" || cur != cond.Version()):
		err = ErrPreconditionFailed
	case cur == "":
		err = ErrNotFound
	default:
		err = os.Remove(p)
		if err == nil {
			err = syncDir(filepath.Dir(p))
		}
	}
	unlock()
	if err != nil {
		return Wrap(op, key, mapErr(err))
	}
	// Remove directories the delete emptied, best effort: Remove fails on
	// a directory that is not empty, and a racing Put recreates what it
	// needs.
	for dir := filepath.Dir(p); dir != f.objects && strings.HasPrefix(dir, f.objects); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// List implements Store. It walks the directories below the prefix in key
// order, so it yields keys in byte-wise order without sorting them all, and
// sees each object as it is when it reaches it.
func (f *File) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		const op = "list"
		if err := f.check(ctx, op, prefix); err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		// The prefix's complete segments name a directory; its last,
		// partial segment filters that directory's entries.
		segs := strings.Split(prefix, "/")
		partial := segs[len(segs)-1]
		dir, base := f.objects, ""
		for _, seg := range segs[:len(segs)-1] {
			if seg == "" || seg == "." || seg == ".." || strings.IndexByte(seg, 0) >= 0 {
				return // no valid key has this prefix
			}
			dir = filepath.Join(dir, escapeSegment(seg)+fileDirSuffix)
			base += seg + "/"
		}
		f.walk(ctx, dir, base, partial, prefix, yield)
	}
}

// fileEntry is one directory entry decoded back into key space.
type fileEntry struct {
	name  string // the decoded segment
	isDir bool
	disk  string // the on-disk name
}

// sortKey orders entries so that the keys they hold come out in byte-wise
// order: a directory "x" holds keys "x/…", so it sorts as "x/".
func (e fileEntry) sortKey() string {
	if e.isDir {
		return e.name + "/"
	}
	return e.name
}

// walk yields, in key order, the objects below dir whose segment in dir
// starts with filter. base is the key prefix that dir stands for. It
// returns false when the caller should stop.
func (f *File) walk(ctx context.Context, dir, base, filter, prefix string, yield func(ObjectInfo, error) bool) bool {
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return true // nothing there (or removed by a Delete meanwhile)
		}
		yield(ObjectInfo{}, Wrap("list", prefix, err))
		return false
	}
	entries := make([]fileEntry, 0, len(des))
	for _, de := range des {
		disk := de.Name()
		var e fileEntry
		switch {
		case strings.HasSuffix(disk, fileObjSuffix) && de.Type().IsRegular():
			e.name = strings.TrimSuffix(disk, fileObjSuffix)
		case strings.HasSuffix(disk, fileDirSuffix) && de.IsDir():
			e.name, e.isDir = strings.TrimSuffix(disk, fileDirSuffix), true
		default:
			continue // not ours
		}
		name, ok := unescapeSegment(e.name)
		if !ok || !strings.HasPrefix(name, filter) {
			continue
		}
		e.name, e.disk = name, disk
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b fileEntry) int { return strings.Compare(a.sortKey(), b.sortKey()) })
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			yield(ObjectInfo{}, Wrap("list", prefix, err))
			return false
		}
		p := filepath.Join(dir, e.disk)
		if e.isDir {
			if !f.walk(ctx, p, base+e.name+"/", "", prefix, yield) {
				return false
			}
			continue
		}
		key := base + e.name
		fh, v, st, err := openObject(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since ReadDir
		}
		if err != nil {
			yield(ObjectInfo{}, Wrap("list", prefix, fmt.Errorf("%s: %w", key, err)))
			return false
		}
		fh.Close()
		if !yield(fileInfo(key, v, st), nil) {
			return false
		}
	}
	return true
}

// Capabilities implements Store: the file store honours every condition.
func (f *File) Capabilities() Capabilities {
	return Capabilities{IfAbsent: true, IfMatch: true, DeleteIfMatch: true, DistinctVersions: true, NestedKeys: true}
}

// Close implements Store: it releases the lock files. Later calls fail with
// ErrClosed; other File values on the same directory are unaffected.
func (f *File) Close() error {
	if f.closed.Swap(true) {
		return nil
	}
	var errs []error
	for i := range f.stripes {
		s := &f.stripes[i]
		s.mu.Lock()
		if s.f != nil {
			errs = append(errs, s.f.Close())
			s.f = nil
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}
