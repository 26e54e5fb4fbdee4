package casstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/conformance"
)

func TestFileConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) casstore.Store {
		return newFile(t, t.TempDir())
	})
}

func newFile(t *testing.T, dir string) *casstore.File {
	t.Helper()
	s, err := casstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The helper process: the test binary re-executed by the cross-process
// tests, doing one job selected by OBJWAL_FILE_HELPER. It is not a test of
// its own; run normally it returns at once.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("OBJWAL_FILE_HELPER")
	if mode == "" {
		return
	}
	err := runHelper(mode, os.Getenv("OBJWAL_FILE_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

func runHelper(mode, dir string) error {
	ctx := context.Background()
	s, err := casstore.NewFile(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	switch mode {
	case "increment":
		// IfMatch increments of "counter"; print how many won.
		attempts, _ := strconv.Atoi(os.Getenv("OBJWAL_FILE_ATTEMPTS"))
		wins := 0
		for range attempts {
			b, info, err := s.Get(ctx, "counter")
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(string(b))
			if err != nil {
				return err
			}
			_, err = s.Put(ctx, "counter", []byte(strconv.Itoa(n+1)), casstore.IfMatch(info.Version))
			switch {
			case err == nil:
				wins++
			case errors.Is(err, casstore.ErrPreconditionFailed):
			default:
				return fmt.Errorf("IfMatch lost with %w, want ErrPreconditionFailed", err)
			}
		}
		fmt.Printf("wins=%d\n", wins)
		return nil
	case "duel":
		// For each line "<version>" on stdin, try one IfMatch write of
		// this process's name from that version; answer "won" or "lost".
		fmt.Println("ready")
		name := os.Getenv("OBJWAL_FILE_NAME")
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			_, err := s.Put(ctx, "duel", []byte(name), casstore.IfMatch(casstore.Version(in.Text())))
			switch {
			case err == nil:
				fmt.Println("won")
			case errors.Is(err, casstore.ErrPreconditionFailed):
				fmt.Println("lost")
			default:
				return err
			}
		}
		return in.Err()
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

func helperCmd(ctx context.Context, t *testing.T, dir, mode string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{"OBJWAL_FILE_HELPER=" + mode, "OBJWAL_FILE_DIR=" + dir}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// Four processes increment one counter with IfMatch: every acknowledged
// increment is in the final value.
func TestFileCrossProcessIncrements(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the multi-process test")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // guard against hangs only
	defer cancel()
	dir := t.TempDir()
	s := newFile(t, dir)
	if _, err := s.Put(ctx, "counter", []byte("0"), casstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	const procs, attempts = 4, 60
	outs := make([][]byte, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			outs[i], errs[i] = helperCmd(ctx, t, dir, "increment", "OBJWAL_FILE_ATTEMPTS="+strconv.Itoa(attempts)).Output()
		})
	}
	wg.Wait()
	total := 0
	for i := range procs {
		if errs[i] != nil {
			t.Fatalf("helper %d: %v", i, errs[i])
		}
		var w int
		if _, err := fmt.Sscanf(string(outs[i]), "wins=%d", &w); err != nil {
			t.Fatalf("helper %d printed %q: %v", i, outs[i], err)
		}
		total += w
	}
	b, _, err := s.Get(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d processes × %d attempts: %d increments won; counter %s", procs, attempts, total, b)
	if string(b) != strconv.Itoa(total) {
		t.Errorf("counter = %s, but the processes won %d increments", b, total)
	}
	if total == 0 {
		t.Error("no increment won")
	}
}

// Two processes race an IfMatch from the same version, round after round:
// exactly one wins each round, and the object holds the winner's bytes.
func TestFileCrossProcessDuel(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the multi-process test")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // guard against hangs only
	defer cancel()
	dir := t.TempDir()
	s := newFile(t, dir)
	type duelist struct {
		name string
		in   io.WriteCloser
		out  *bufio.Scanner
		cmd  *exec.Cmd
	}
	var ds []*duelist
	for _, name := range []string{"left", "right"} {
		cmd := helperCmd(ctx, t, dir, "duel", "OBJWAL_FILE_NAME="+name)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		d := &duelist{name: name, in: in, out: bufio.NewScanner(out), cmd: cmd}
		ds = append(ds, d)
		if !d.out.Scan() || d.out.Text() != "ready" {
			t.Fatalf("%s did not start: %q %v", name, d.out.Text(), d.out.Err())
		}
	}
	wins := map[string]int{}
	const rounds = 30
	for r := range rounds {
		v, err := s.Put(ctx, "duel", []byte(fmt.Sprintf("round %d", r)), casstore.None())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if _, err := fmt.Fprintln(d.in, v); err != nil {
				t.Fatal(err)
			}
		}
		var winners []string
		for _, d := range ds {
			if !d.out.Scan() {
				t.Fatalf("round %d: %s stopped: %v", r, d.name, d.out.Err())
			}
			if d.out.Text() == "won" {
				winners = append(winners, d.name)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", r, winners)
		}
		wins[winners[0]]++
		if b, _, err := s.Get(ctx, "duel"); err != nil || string(b) != winners[0] {
			t.Fatalf("round %d: object = %q, %v; want the winner's %q", r, b, err, winners[0])
		}
	}
	for _, d := range ds {
		d.in.Close()
		if err := d.cmd.Wait(); err != nil {
			t.Errorf("%s: %v", d.name, err)
		}
	}
	t.Logf("%d rounds, exactly one winner each: %v", rounds, wins)
}

// Two File values on one directory in one process exclude each other too
// (flock locks belong to the open file, not the process).
func TestFileTwoHandlesRace(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // guard against hangs only
	defer cancel()
	dir := t.TempDir()
	handles := []*casstore.File{newFile(t, dir), newFile(t, dir)}
	if _, err := handles[0].Put(ctx, "c", []byte("0"), casstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		s := handles[g%2]
		wg.Go(func() {
			for range 25 {
				b, info, err := s.Get(ctx, "c")
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(string(b))
				_, err = s.Put(ctx, "c", []byte(strconv.Itoa(n+1)), casstore.IfMatch(info.Version))
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, casstore.ErrPreconditionFailed) {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b, _, err := handles[1].Get(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != strconv.FormatInt(wins.Load(), 10) {
		t.Errorf("counter = %s, want %d acknowledged increments", b, wins.Load())
	}
}

func TestFileInvalidKeys(t *testing.T) {
	ctx := t.Context()
	s := newFile(t, t.TempDir())
	for _, tc := range []struct{ key, reason string }{
		{"", "empty key"},
		{"/abs", "empty path segment"},
		{"a/", "empty path segment"},
		{"a//b", "empty path segment"},
		{".", `"." path segment`},
		{"./a", `"." path segment`},
		{"a/./b", `"." path segment`},
		{"..", `".." path segment`},
		{"../escape", `".." path segment`},
		{"a/../../escape", `".." path segment`},
		{"a\x00b", "NUL"},
		{strings.Repeat("x", 254), "allows 253"},
		{strings.Repeat("%", 100), "allows 253"}, // 300 bytes once escaped
	} {
		_, err := s.Put(ctx, tc.key, []byte("x"), casstore.None())
		if !errors.Is(err, casstore.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", tc.key, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), "put") {
			t.Errorf("Put(%q) error %q does not say %q and name the operation", tc.key, err, tc.reason)
		}
		_, _, err = s.Get(ctx, tc.key)
		if !errors.Is(err, casstore.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", tc.key, err)
		}
		if err := s.Delete(ctx, tc.key, casstore.None()); !errors.Is(err, casstore.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", tc.key, err)
		}
	}
	// Keys that look dangerous but are plain names stay inside objects/.
	root := s.Dir()
	odd := []string{"..a", "a..", "...", "%2e%2e", "%2F", "a#d", "b#o", "tmp", "locks/x", "objects", "~", strings.Repeat("y", 253)}
	for _, k := range odd {
		if _, err := s.Put(ctx, k, []byte(k), casstore.IfAbsent()); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	var got []string
	for info, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, info.Key)
	}
	if want := slices.Sorted(slices.Values(odd)); !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		top := strings.Split(rel, string(filepath.Separator))[0]
		if !slices.Contains([]string{".", "objects", "tmp", "locks"}, top) {
			t.Errorf("file %s outside the store's subdirectories", p)
		}
		if top == "tmp" && !d.IsDir() {
			t.Errorf("temp file %s left behind", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFileLayoutAndStrayFiles(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := newFile(t, dir)
	if _, err := s.Put(ctx, "a", []byte("1"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "a/b", []byte("2"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"objects/a#o", "objects/a#d/b#o"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("expected %s: %v", p, err)
		}
	}
	// Files that are not objects (a crashed writer's temp file, something
	// a person dropped in) are never listed.
	for _, p := range []string{"tmp/put-123", "objects/junk", "objects/a#d/notes.txt", "objects/bad%zz#o"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("stray"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for info, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, info.Key)
	}
	if !slices.Equal(got, []string{"a", "a/b"}) {
		t.Errorf("List = %q, want [a a/b]", got)
	}
	// Deleting the last key of a directory removes the emptied directories.
	if _, err := s.Put(ctx, "x/y/z", []byte("3"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "x/y/z", casstore.None()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "objects", "x#d")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty directory objects/x#d not removed: %v", err)
	}
}

func TestFileCorruptObject(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := newFile(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "objects", "bad#o"), []byte("no header"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Get(ctx, "bad")
	if err == nil || errors.Is(err, casstore.ErrNotFound) || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("Get(corrupt) = %v, want a corruption error", err)
	}
	if _, err := s.Put(ctx, "bad", []byte("x"), casstore.IfMatch("fdeadbeef")); err == nil || errors.Is(err, casstore.ErrPreconditionFailed) {
		t.Errorf("IfMatch over a corrupt object = %v, want the corruption error", err)
	}
}

func TestFileSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s1, err := casstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s1.Put(ctx, "k", []byte("kept"), casstore.None())
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s1.Get(ctx, "k"); !errors.Is(err, casstore.ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	s2 := newFile(t, dir)
	b, info, err := s2.Get(ctx, "k")
	if err != nil || string(b) != "kept" || info.Version != v {
		t.Fatalf("after reopening: %q %q %v; want %q %q", b, info.Version, err, "kept", v)
	}
	if _, err := s2.Put(ctx, "k", []byte("next"), casstore.IfMatch(v)); err != nil {
		t.Errorf("IfMatch with the version from before the restart: %v", err)
	}
}

func TestFileStaleTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	s := newFile(t, dir)
	if _, err := s.Put(t.Context(), "k", []byte("old"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	// A crash between writing and renaming leaves a temp file and the old
	// object. Reopening removes day-old temps and keeps recent ones, which
	// a live writer in another process may still own.
	stale, fresh := filepath.Join(dir, "tmp", "put-stale"), filepath.Join(dir, "tmp", "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("OWF1 half written"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	s2 := newFile(t, dir)
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temp file not removed: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("recent temp file removed: %v", err)
	}
	if b, _, err := s2.Get(t.Context(), "k"); err != nil || string(b) != "old" {
		t.Errorf("object after crash = %q, %v; want old", b, err)
	}
}

func TestFileOpenURL(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "created", "on", "open")
	s, err := casstore.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put(ctx, "k", []byte("via url"), casstore.None()); err != nil {
		t.Fatal(err)
	}
	direct := newFile(t, dir)
	if b, _, err := direct.Get(ctx, "k"); err != nil || string(b) != "via url" {
		t.Errorf("NewFile on the URL's directory sees %q, %v", b, err)
	}
	if s2, err := casstore.Open(ctx, "file://localhost"+dir); err != nil {
		t.Errorf("file://localhost/...: %v", err)
	} else {
		s2.Close()
	}
	for _, tc := range []struct{ url, says string }{
		{"file://relative/dir", "host"},
		{"file:relative/dir", "relative"},
		{"file://", "absolute"},
		{"file:///" + dir + "?bogus=1", "bogus"},
	} {
		_, err := casstore.Open(ctx, tc.url)
		if !errors.Is(err, casstore.ErrInvalidURL) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL saying %q", tc.url, err, tc.says)
		}
	}
	if _, err := casstore.NewFile("relative"); !errors.Is(err, casstore.ErrInvalidURL) {
		t.Errorf("NewFile(relative) = %v, want ErrInvalidURL", err)
	}
	if _, err := casstore.NewFile(""); !errors.Is(err, casstore.ErrInvalidURL) {
		t.Errorf(`NewFile("") = %v, want ErrInvalidURL`, err)
	}
}
