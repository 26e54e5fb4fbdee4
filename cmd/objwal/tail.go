package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/wal"
)

const tailUsage = `usage: objwal tail URL [--manifest KEY] [--from SEQ] [--follow] [--json]

Reads the log whose manifest is KEY (default wal/manifest) in the store at
URL and prints its committed records in sequence order, one per line:

  <sequence> <group meta> <data>

where meta and data are printed as a quoted string when they are text and as
base64:<...> otherwise ("-" for no meta). With --json each line is instead
{"sequence": N, "meta": "<base64>", "data": "<base64>"}.

Without --follow it prints what is committed now and exits; with --follow it
keeps polling for new records until interrupted.
`

type tailConfig struct {
	url      string
	manifest string
	from     uint64
	follow   bool
	asJSON   bool
	poll     time.Duration
}

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c tailConfig
	fs := newFlagSet("tail", tailUsage, stderr)
	fs.StringVar(&c.manifest, "manifest", wal.DefaultManifestPath, "key of the log's manifest")
	fs.Uint64Var(&c.from, "from", 0, "first sequence to print")
	fs.BoolVar(&c.follow, "follow", false, "keep printing new records until interrupted")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object per record")
	fs.DurationVar(&c.poll, "poll-interval", 200*time.Millisecond, "with --follow, how often to look for new records")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, tailUsage)
		return 2
	}
	if c.poll <= 0 {
		fmt.Fprintln(stderr, "objwal tail: --poll-interval must be positive")
		return 2
	}
	c.url = pos[0]
	if err := tail(ctx, c, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "objwal tail: %v\n", err)
		return 1
	}
	return 0
}

func tail(ctx context.Context, c tailConfig, stdout, stderr io.Writer) error {
	store, err := openStore(ctx, c.url)
	if err != nil {
		return err
	}
	defer store.Close()
	// Say plainly when there is no log rather than wait forever.
	if _, err := store.Stat(ctx, c.manifest); err != nil {
		if errors.Is(err, casstore.ErrNotFound) {
			return fmt.Errorf("no log at %s: manifest %q does not exist", c.url, c.manifest)
		}
		return err
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	apply := wal.ApplyFunc(func(_ context.Context, r wal.Record) error {
		if c.asJSON {
			if err := enc.Encode(tailJSON{Sequence: r.Sequence, Meta: r.GroupMeta, Data: r.Data}); err != nil {
				return err
			}
		} else if _, err := fmt.Fprintf(out, "%d %s %s\n", r.Sequence, tailText(r.GroupMeta, "-"), tailText(r.Data, `""`)); err != nil {
			return err
		}
		if c.follow { // lines appear as their records commit
			return out.Flush()
		}
		return nil
	})
	r := wal.NewReplica(store, apply, wal.ReplicaConfig{
		ManifestPath: c.manifest, StartAt: c.from, PollInterval: c.poll, Logger: quietLogger(stderr),
	})
	if c.follow {
		// Run retries store errors and returns nil when ctx ends.
		return r.Run(ctx)
	}
	for {
		n, err := r.Poll(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return out.Flush()
		}
	}
}

// tailJSON is one line of tail --json; []byte fields encode as base64.
type tailJSON struct {
	Sequence uint64 `json:"sequence"`
	Meta     []byte `json:"meta,omitempty"`
	Data     []byte `json:"data"`
}

// tailText renders b as a quoted string when it is printable text and as
// base64 otherwise; empty renders as empty.
func tailText(b []byte, empty string) string {
	if len(b) == 0 {
		return empty
	}
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return strconv.Quote(string(b))
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}
