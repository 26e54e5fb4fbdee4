package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// CursorStore persists a replica's position: the next sequence to apply.
// Implementations must be safe for concurrent use.
type CursorStore interface {
	// Load returns the saved next sequence; ok is false when none was
	// saved yet.
	Load(ctx context.Context) (next uint64, ok bool, err error)
	// Save records next durably before returning.
	Save(ctx context.Context, next uint64) error
}

// MemoryCursorStore keeps the cursor in memory: it survives Replica
// restarts within one process (share the store), not process restarts.
type MemoryCursorStore struct {
	mu    sync.Mutex
	next  uint64
	saved bool
}

// NewMemoryCursorStore returns an empty in-memory cursor store.
func NewMemoryCursorStore() *MemoryCursorStore { return &MemoryCursorStore{} }

// Load implements CursorStore.
func (m *MemoryCursorStore) Load(context.Context) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next, m.saved, nil
}

// Save implements CursorStore.
func (m *MemoryCursorStore) Save(_ context.Context, next uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next, m.saved = next, true
	return nil
}

// FileCursorStore keeps the cursor in a small file. Save writes a temporary
// file, fsyncs it, renames it over the cursor file and fsyncs the directory,
// so a crash leaves either the old or the new cursor, never a torn one. The
// file holds the sequence and a CRC-32C of it (12 bytes), so a damaged file
// is an error rather than a silent jump.
type FileCursorStore struct {
	path string
	mu   sync.Mutex
}

// NewFileCursorStore returns a cursor store at path. The directory must
// exist; the file is created on the first Save.
func NewFileCursorStore(path string) *FileCursorStore { return &FileCursorStore{path: path} }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Load implements CursorStore.
func (f *FileCursorStore) Load(context.Context) (uint64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("wal: load cursor %q: %w", f.path, err)
	}
	if len(b) != 12 || crc32.Checksum(b[:8], crcTable) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, false, fmt.Errorf("%w: cursor file %q", ErrCorrupt, f.path)
	}
	return binary.LittleEndian.Uint64(b), true, nil
}

// Save implements CursorStore.
func (f *FileCursorStore) Save(_ context.Context, next uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:], next)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[:8], crcTable))
	if err := writeFileAtomic(f.path, b[:]); err != nil {
		return fmt.Errorf("wal: save cursor %q: %w", f.path, err)
	}
	return nil
}

// writeFileAtomic replaces path with data durably: temp file, fsync,
// rename, fsync of the directory (so the rename itself survives a crash).
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		_ = os.Remove(name)
		return werr
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
