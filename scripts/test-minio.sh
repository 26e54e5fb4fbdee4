#!/usr/bin/env bash
# Runs the S3 adapter's conformance suite (casstore/s3 and the blob+s3 lift)
# against a MinIO server, for users who have MinIO. MinIO (AGPL-3.0) is only
# ever run as an external server, never imported or linked.
#
# It uses `minio` from PATH or .tools/bin, or installs it with
#   GOBIN=.tools/bin go install github.com/minio/minio@latest   (~5 min)
# starts it on a free 127.0.0.1 port with a temporary data directory, creates
# the test bucket, runs the suite through OBJWAL_TEST_S3_URL and stops it.
# MinIO ignores If-Match on DeleteObject, so the URL declares
# conditional_delete=false and that case shows as a skip with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN="$ROOT/.tools/bin"
mkdir -p "$BIN" "$ROOT/.tools/logs"
MINIO=$(command -v minio || true)
if [[ -z $MINIO ]]; then
	if [[ ! -x $BIN/minio ]]; then
		echo "test-minio: installing minio (go install github.com/minio/minio@latest; takes minutes)" >&2
		GOBIN="$BIN" flock /tmp/objwal-go.lock go install github.com/minio/minio@latest
	fi
	MINIO="$BIN/minio"
fi
port=$((20000 + RANDOM % 40000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((20000 + RANDOM % 40000)); done
data=$(mktemp -d)
log="$ROOT/.tools/logs/minio.log"
export MINIO_ROOT_USER=objwal-minio-user MINIO_ROOT_PASSWORD=objwal-minio-password
"$MINIO" server "$data" --address "127.0.0.1:$port" --console-address "127.0.0.1:0" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 150); do
	if curl -s -o /dev/null "http://127.0.0.1:$port/minio/health/live"; then break; fi
	kill -0 "$pid" 2>/dev/null || { tail -n 40 "$log" >&2; echo "test-minio: minio exited" >&2; exit 1; }
	sleep 0.2
done
curl -s -o /dev/null "http://127.0.0.1:$port/minio/health/live" || { tail -n 40 "$log" >&2; echo "test-minio: minio not ready" >&2; exit 1; }
# The test bucket is a directory in MinIO's data folder.
mkdir -p "$data/objwal-test"
export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export OBJWAL_TEST_S3_URL="s3://objwal-test/minio?endpoint=http://127.0.0.1:$port&use_path_style=true&region=us-east-1&conditional_delete=false&nested_keys=false"
flock /tmp/objwal-go.lock go test -count=1 -v -run 'TestConformanceRealBucket' ./casstore/s3/
