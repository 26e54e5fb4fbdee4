// Command objwal is the tool a user runs against an objwal log: demo runs
// the main job (a producer and two replicas) on an embedded store, bench
// measures the producer and a replica over any store, tail prints a log's
// records, and inspect decodes segment and manifest objects from a file or a
// store.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
)

// command is one verb of the tool. run returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands maps each verb to its implementation; every verb lives in a file
// of its own (inspect.go, demo.go, ...).
func commands() map[string]command {
	return map[string]command{
		"inspect": {summary: "decode a segment or manifest object from a file or a store URL and print it (--json for scripts)", run: runInspectCmd},
		"demo":    {summary: "run a producer and two replicas on a key-value workload and print what it cost", run: runDemo},
		"bench":   {summary: "measure write throughput, commit latency and replica catch-up over a store", run: runBench},
		"tail":    {summary: "print the records of a log in a store (--follow to keep reading)", run: runTail},

		"conformance": {summary: "check that a store (your bucket) honours objwal's CAS contract, with the suite the project's tests run", run: runConformance},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout, cmds)
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "objwal: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: objwal <command> [arguments]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
}
