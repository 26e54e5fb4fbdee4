#!/usr/bin/env bash
# Runs every fuzz target in the repository for a bounded time each:
#   scripts/fuzz.sh [duration]     (default 20s, any `go test -fuzztime` value)
# Targets are discovered from the source (func FuzzXxx(f *testing.F) in
# *_test.go files), so packages added later are picked up without edits.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-20s}"
GO="${GO:-go}"

found=0
while IFS= read -r file; do
	dir="./$(dirname "${file#./}")"
	for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/'); do
		found=$((found + 1))
		echo "== $dir $target ($fuzztime)"
		# Minimizing a new input is bounded (FUZZMINIMIZETIME, default 3s):
		# the targets measure allocations on every run, and the default 60s
		# minimization left the fuzzer idle for most of a short budget.
		"$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "${FUZZMINIMIZETIME:-3s}" "$dir"
	done
done < <(find . \( -name '.?*' -o -name testdata -o -name vendor \) -prune -o -name '*_test.go' -type f -print |
	xargs -r grep -lE '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' | sort)

if [ "$found" -eq 0 ]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
echo "ran $found fuzz targets for $fuzztime each"
