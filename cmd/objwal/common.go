package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/objwal/objwal/casstore"
	// Every adapter, so that --url accepts s3://, gs://, azblob://, blob+...
	_ "github.com/objwal/objwal/casstore/cloud"
)

// openStore opens the store a --url names, with an error that says which
// schemes exist when the URL is wrong.
func openStore(ctx context.Context, rawURL string) (casstore.Store, error) {
	if rawURL == "" {
		return nil, errors.New("no store URL given (for example mem://name, file:///abs/dir, s3://bucket/prefix)")
	}
	return casstore.Open(ctx, rawURL)
}

// runID returns a short random name used to keep one run's objects apart
// from every other run's in a shared bucket.
func runID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// newFlagSet returns a flag set that reports errors to stderr and prints
// usage (the verb's own text) on -h or a bad flag.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args (flags may follow positional arguments) and returns
// the positional ones. The exit code is meaningful only when ok is false: 0
// for -h, 2 for a bad flag.
func parseFlags(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0, false
		}
		return nil, 2, false
	}
	return pos, 0, true
}

// quietLogger drops the wal's own log lines below Error: the tools report
// what matters themselves, and a warning in the middle of a progress bar
// helps nobody.
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelError}))
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// sorted returns a sorted copy of what was collected.
func (l *latencies) sorted() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s
}

// percentile returns the q-quantile (0..1) of sorted by the nearest-rank
// method, or 0 for an empty slice.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ms renders a duration in milliseconds with a precision that suits it.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// mbps is bytes per second in MB/s (10^6 bytes).
func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / d.Seconds() / 1e6
}

// humanBytes renders n bytes with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		u = s
		if f < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f %s", f, u)
}

// isTerminal reports whether w is a character device (a terminal), where a
// progress line that rewrites itself makes sense.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress draws a single, self-rewriting status line on a terminal every
// tick until stop is called; on anything else it draws nothing.
type progress struct {
	stop func()
}

// startProgress calls line every 200ms and draws what it returns with a bar
// of done/total. stop erases the line and waits for the drawing goroutine.
func startProgress(w io.Writer, total int64, line func() (done int64, text string)) *progress {
	if !isTerminal(w) || total <= 0 {
		return &progress{stop: func() {}}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	draw := func() {
		done, text := line()
		const width = 30
		filled := int(min(done, total) * width / total)
		fmt.Fprintf(w, "\r[%s%s] %3d%% %s\x1b[K", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), min(done, total)*100/total, text)
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				draw()
			case <-quit:
				fmt.Fprint(w, "\r\x1b[K")
				return
			}
		}
	}()
	var once sync.Once
	return &progress{stop: func() {
		once.Do(func() { close(quit); <-finished })
	}}
}

// countKeys lists the keys under prefix and returns how many objects and
// bytes it found.
func countKeys(ctx context.Context, s casstore.Store, prefix string) (n int, size int64, err error) {
	var seq iter.Seq2[casstore.ObjectInfo, error] = s.List(ctx, prefix)
	for info, err := range seq {
		if err != nil {
			return n, size, err
		}
		n++
		size += info.Size
	}
	return n, size, nil
}
