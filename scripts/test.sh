#!/usr/bin/env bash
# Runs every test under the race detector. The cloud adapters' emulators are
# installed, started and stopped here (see scripts/emulators.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
go test -race -count=1 -timeout 45m ./...
