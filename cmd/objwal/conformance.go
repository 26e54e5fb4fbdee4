package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/casstore/conformance"
)

const conformanceUsage = `usage: objwal conformance URL [--run REGEXP] [--quick] [--json]

Runs objwal's conformance suite (package casstore/conformance, the cases the
project's own tests run on every adapter) against the store at URL (mem://,
file:///dir, s3://, gs://, azblob://, blob+...) and reports whether it
honours objwal's compare-and-swap contract: one line per case, PASS, FAIL or
SKIP with its duration (a FAIL or SKIP with its messages below it), then a
summary. A SKIP is a capability the store declares missing, after the case
checked that the store refuses it cleanly.

The suite WRITES AND DELETES OBJECTS: every case works under its own
conformance-<random>/ below the URL's prefix (s3://bucket/prefix writes
under prefix/conformance-<random>/) and deletes what it wrote when it ends;
nothing else in the bucket is read or changed, but listings without a
prefix are made. Each case opens its own store handle. Credentials come from
the cloud's usual chain, as for every other verb; a URL printed here never
shows user information or secret-looking query values.

By default the heavy cases are as large as in the project's tests: an 8 MiB
object, a listing of 1,100 keys (more than one 1,000-key page), 16 writers
racing 20 IfMatch increments each of one counter, and a history of 4
clients doing 40 operations each over 3 keys. Real GCS and Cloudflare R2
allow about one write per second to one object, so the Race (and possibly
Linearizability) case may fail there with throttling errors; use --quick.

--quick changes exactly this: a 1 MiB large object instead of 8 MiB, 200
listed keys instead of 1,100 (pagination is then checked across pages only
where the store's pages are smaller than 200), 4 race writers making 5
attempts each instead of 16 x 20, and 2 linearizability clients doing 20
operations each instead of 4 x 40 (still over 3 keys). Every case still
runs and checks the same promises.

--run REGEXP runs only the cases whose name it matches (as go test -run).

Before the cases run, the tool opens the store and lists a prefix that
holds nothing; an error there (a missing bucket, refused credentials) stops
it with that error.

Exit status: 0 when no case failed, 1 when a case failed (or the run was
interrupted), 2 for a usage error, a bad URL or a store that cannot be
opened or read.
`

// Quick-mode sizes; conformanceUsage documents them.
const (
	quickLargeObject = 1 << 20
	quickListCount   = 200
	quickRaceWriters = 4
	quickRaceTries   = 5
	quickLinClients  = 2
	quickLinOps      = 20
	quickLinKeys     = 3
)

// conformanceJSON is the --json document.
type conformanceJSON struct {
	URL         string            `json:"url"`
	Cases       []conformanceCase `json:"cases"`
	Passed      int               `json:"passed"`
	Failed      int               `json:"failed"`
	Skipped     int               `json:"skipped"`
	Interrupted bool              `json:"interrupted,omitempty"`
}

type conformanceCase struct {
	Name       string   `json:"name"`
	Outcome    string   `json:"outcome"`
	DurationMS float64  `json:"duration_ms"`
	Messages   []string `json:"messages"`
}

func runConformance(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("conformance", conformanceUsage, stderr)
	runPattern := fs.String("run", "", "run only the cases whose name matches this regular expression")
	asJSON := fs.Bool("json", false, "print one JSON document instead of a line per case")
	quick := fs.Bool("quick", false, "shrink the heavy cases for slow or rate-limited buckets (see above)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, conformanceUsage)
		return 2
	}
	rawURL := pos[0]
	shown := casstore.RedactURL(rawURL)

	var opts []conformance.Option
	if *runPattern != "" {
		re, err := regexp.Compile(*runPattern)
		if err != nil {
			fmt.Fprintf(stderr, "objwal conformance: --run: %v\n", err)
			return 2
		}
		if !anyMatch(re, conformance.Cases()) {
			fmt.Fprintf(stderr, "objwal conformance: --run %q matches no case (cases: %s)\n", *runPattern, strings.Join(conformance.Cases(), ", "))
			return 2
		}
		opts = append(opts, conformance.WithMatch(re))
	}
	if *quick {
		opts = append(opts,
			conformance.WithLargeObjectSize(quickLargeObject),
			conformance.WithListCount(quickListCount),
			conformance.WithRaceWriters(quickRaceWriters, quickRaceTries),
			conformance.WithLinearizability(quickLinClients, quickLinOps, quickLinKeys))
	}

	// Open once up front and list a prefix that holds nothing, so that a
	// bad URL, a missing bucket or refused credentials is one clear error
	// instead of a failure of every case. (A listing, not a Stat: S3
	// answers a HEAD in a missing bucket with a bare 404, which reads as a
	// missing key.)
	probe, err := openStore(ctx, rawURL)
	if err != nil {
		fmt.Fprintf(stderr, "objwal conformance: %v\n", err)
		return 2
	}
	for _, lerr := range probe.List(ctx, "conformance-probe-"+runID()+"/") {
		err = lerr
		break
	}
	_ = probe.Close()
	if err != nil {
		fmt.Fprintf(stderr, "objwal conformance: cannot use the store at %s (does the bucket exist, may these credentials read it?): %v\n", shown, err)
		return 2
	}

	if !*asJSON {
		fmt.Fprintf(stdout, "conformance of %s (each case under conformance-<random>/ of its prefix)\n", shown)
	}
	report := func(r conformance.Result) {
		if *asJSON {
			return
		}
		fmt.Fprintf(stdout, "%-4s  %s (%s)\n", strings.ToUpper(string(r.Outcome)), r.Name, seconds(r.Duration))
		if r.Outcome == conformance.Pass {
			return
		}
		for _, m := range r.Messages {
			for _, line := range strings.Split(m, "\n") {
				fmt.Fprintf(stdout, "      %s\n", line)
			}
		}
	}
	start := time.Now()
	sum := conformance.Check(ctx, func(ctx context.Context) (casstore.Store, error) {
		return openStore(ctx, rawURL)
	}, report, opts...)
	elapsed := time.Since(start)

	if *asJSON {
		doc := conformanceJSON{URL: shown, Cases: []conformanceCase{}, Passed: sum.Passed, Failed: sum.Failed, Skipped: sum.Skipped, Interrupted: sum.Err != nil}
		for _, r := range sum.Results {
			msgs := r.Messages
			if msgs == nil {
				msgs = []string{}
			}
			doc.Cases = append(doc.Cases, conformanceCase{
				Name:       r.Name,
				Outcome:    string(r.Outcome),
				DurationMS: math.Round(float64(r.Duration)/float64(time.Microsecond)) / 1000,
				Messages:   msgs,
			})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			fmt.Fprintf(stderr, "objwal conformance: %v\n", err)
			return 1
		}
	} else {
		verdict := "the store honours objwal's contract in every case that ran"
		if sum.Failed > 0 {
			verdict = "the store does NOT honour objwal's contract"
		}
		fmt.Fprintf(stdout, "%d cases in %s: %d passed, %d failed, %d skipped: %s\n",
			len(sum.Results), seconds(elapsed), sum.Passed, sum.Failed, sum.Skipped, verdict)
	}
	if sum.Err != nil {
		fmt.Fprintf(stderr, "objwal conformance: interrupted (%v); the remaining cases did not run\n", sum.Err)
		return 1
	}
	if sum.Failed > 0 {
		return 1
	}
	return 0
}

func anyMatch(re *regexp.Regexp, names []string) bool {
	for _, n := range names {
		if re.MatchString(n) {
			return true
		}
	}
	return false
}

// seconds renders d as seconds with two decimals ("0.12s").
func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
