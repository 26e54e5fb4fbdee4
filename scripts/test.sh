#!/usr/bin/env bash
# Runs every test under the race detector, with the object-store emulators
# that the cloud adapters' conformance suites need: scripts/emulators.sh
# installs (or reuses) the pinned Azurite, fake-gcs-server and versitygw in
# .tools/, starts each on a free 127.0.0.1 port, runs the tests with their
# environment and stops each by its PID, also when the tests fail.
# OBJWAL_REQUIRE_EMULATORS=1 makes a cloud test fail, not skip, if its
# emulator's variable is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export OBJWAL_REQUIRE_EMULATORS=1
exec bash scripts/emulators.sh run go test -race -count=1 -timeout 45m ./...
