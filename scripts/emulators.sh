#!/usr/bin/env bash
# Installs, starts and stops the object-store emulators that the cloud
# adapters' conformance suites run against, all on 127.0.0.1:
#
#   Azurite 3.37.0          (npm)        Azure Blob   -> OBJWAL_AZURITE_ENDPOINT
#   fake-gcs-server v1.56.1 (go install) GCS          -> STORAGE_EMULATOR_HOST
#   versitygw v1.8.0        (go install) S3           -> OBJWAL_S3_EMULATOR_ENDPOINT
#
# Everything lands in .tools/ at the repository root (git-ignored); a version
# marker beside each install lets a second run reuse it.
#
# Usage:
#   scripts/emulators.sh install          install (or reuse) the pinned versions
#   scripts/emulators.sh run CMD [ARG..]  start all three, run CMD with their
#                                         environment, stop them (also when CMD
#                                         fails or the script is interrupted);
#                                         exits with CMD's status
#   scripts/emulators.sh start            start all three in the background and
#                                         write .tools/run/env.sh
#   scripts/emulators.sh env              print the exports of a started set
#                                         (use: source <(scripts/emulators.sh env))
#   scripts/emulators.sh stop             stop what `start` started, by PID
#
# An emulator that fails to install or to become ready within its timeout
# fails the script loudly with the tail of its log.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="$ROOT/.tools"
BIN="$TOOLS/bin"
RUN="$TOOLS/run"
LOGS="$TOOLS/logs"
GO="${GO:-go}"

AZURITE_VERSION=3.37.0
FAKE_GCS_VERSION=v1.56.1
VERSITYGW_VERSION=v1.8.0

# Credentials of the local emulators only: versitygw's are chosen here, and
# Azurite's account key is the public, documented devstoreaccount1 key.
S3_ACCESS_KEY=objwal-test-access
S3_SECRET_KEY=objwal-test-secret
AZURITE_ACCOUNT=devstoreaccount1

READY_TIMEOUT="${OBJWAL_EMULATOR_READY_TIMEOUT:-60}" # seconds per emulator

log() { printf 'emulators: %s\n' "$*" >&2; }

die() {
	log "ERROR: $*"
	exit 1
}

# tail_log NAME prints the end of an emulator's log, for failures.
tail_log() {
	local f="$LOGS/$1.log"
	if [[ -f $f ]]; then
		log "---- last lines of $f ----"
		tail -n 40 "$f" >&2 || true
		log "---- end of $f ----"
	fi
}

# gocmd runs a go command under the shared build lock when flock exists, so
# that parallel builds on a small machine do not starve each other.
gocmd() {
	if command -v flock >/dev/null 2>&1; then
		flock /tmp/objwal-go.lock "$GO" "$@"
	else
		"$GO" "$@"
	fi
}

install_go_tool() { # NAME MODULE@VERSION VERSION
	local name=$1 mod=$2 version=$3 marker="$BIN/.$1.version"
	if [[ -x $BIN/$name && -f $marker && $(cat "$marker") == "$version" ]]; then
		return 0
	fi
	log "installing $name $version (go install $mod)"
	mkdir -p "$BIN" "$LOGS"
	if ! GOBIN="$BIN" gocmd install "$mod" >"$LOGS/$name-install.log" 2>&1; then
		tail_log "$name-install"
		die "go install $mod failed"
	fi
	echo "$version" >"$marker"
}

# ensure_npm installs Node.js and npm from Debian's packages when the machine
# lacks them (as root, with apt-get), so a fresh machine needs nothing by hand.
ensure_npm() {
	command -v npm >/dev/null 2>&1 && return 0
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		log "npm not found: installing nodejs and npm with apt-get"
		mkdir -p "$LOGS"
		if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm; } >"$LOGS/apt-npm.log" 2>&1; then
			tail_log apt-npm
			die "apt-get install nodejs npm failed"
		fi
	fi
	command -v npm >/dev/null 2>&1 || die "npm is required to install Azurite $AZURITE_VERSION (install Node.js and npm)"
}

install_azurite() {
	local marker="$TOOLS/azurite/.version"
	if [[ -x $TOOLS/azurite/node_modules/.bin/azurite-blob && -f $marker && $(cat "$marker") == "$AZURITE_VERSION" ]]; then
		return 0
	fi
	ensure_npm
	log "installing Azurite $AZURITE_VERSION (npm)"
	mkdir -p "$TOOLS/azurite" "$LOGS"
	if ! npm install --prefix "$TOOLS/azurite" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" >"$LOGS/azurite-install.log" 2>&1; then
		tail_log azurite-install
		die "npm install azurite@$AZURITE_VERSION failed"
	fi
	echo "$AZURITE_VERSION" >"$marker"
}

install_all() {
	install_azurite
	install_go_tool fake-gcs-server "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION" "$FAKE_GCS_VERSION"
	install_go_tool versitygw "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" "$VERSITYGW_VERSION"
}

# port_in_use PORT: something already listens on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port prints a port on 127.0.0.1 that nothing listens on now.
free_port() {
	local p i
	for ((i = 0; i < 200; i++)); do
		p=$((20000 + RANDOM % 40000))
		if ! port_in_use "$p"; then
			echo "$p"
			return 0
		fi
	done
	die "no free port found on 127.0.0.1"
}

# wait_ready NAME PID URL: poll URL until it answers any HTTP status, the
# process dies, or READY_TIMEOUT passes.
wait_ready() {
	local name=$1 pid=$2 url=$3 deadline code
	deadline=$((SECONDS + READY_TIMEOUT))
	while ((SECONDS < deadline)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail_log "$name"
			die "$name exited before it became ready"
		fi
		code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" 2>/dev/null || true)
		if [[ -n $code && $code != 000 ]]; then
			return 0
		fi
		sleep 0.2
	done
	tail_log "$name"
	die "$name did not become ready at $url within ${READY_TIMEOUT}s"
}

# start_one NAME: start one emulator on a free port, wait until it is ready,
# record its PID and append its exports to the env file.
start_one() {
	local name=$1 port pid url
	port=$(free_port)
	: >"$LOGS/$name.log"
	case $name in
	versitygw)
		local root="$RUN/versitygw-posix"
		rm -rf "$root"
		mkdir -p "$root"
		"$BIN/versitygw" --port "127.0.0.1:$port" --access "$S3_ACCESS_KEY" --secret "$S3_SECRET_KEY" \
			--region us-east-1 --health /health posix "$root" >"$LOGS/$name.log" 2>&1 &
		pid=$!
		url="http://127.0.0.1:$port/health"
		{
			echo "export OBJWAL_S3_EMULATOR_ENDPOINT=http://127.0.0.1:$port"
			echo "export OBJWAL_S3_EMULATOR_ACCESS_KEY=$S3_ACCESS_KEY"
			echo "export OBJWAL_S3_EMULATOR_SECRET_KEY=$S3_SECRET_KEY"
		} >>"$RUN/env.sh"
		;;
	fake-gcs-server)
		"$BIN/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$port" -public-host "127.0.0.1:$port" \
			-backend memory -log-level warn >"$LOGS/$name.log" 2>&1 &
		pid=$!
		url="http://127.0.0.1:$port/_internal/healthcheck"
		echo "export STORAGE_EMULATOR_HOST=127.0.0.1:$port" >>"$RUN/env.sh"
		;;
	azurite)
		mkdir -p "$RUN/azurite"
		# Run from its own folder so that nothing it writes lands elsewhere;
		# exec keeps the recorded PID that of the server itself.
		(cd "$RUN/azurite" && exec "$TOOLS/azurite/node_modules/.bin/azurite-blob" \
			--blobHost 127.0.0.1 --blobPort "$port" --inMemoryPersistence \
			--skipApiVersionCheck --disableTelemetry --silent) >"$LOGS/$name.log" 2>&1 &
		pid=$!
		url="http://127.0.0.1:$port/$AZURITE_ACCOUNT?comp=list"
		echo "export OBJWAL_AZURITE_ENDPOINT=http://127.0.0.1:$port/$AZURITE_ACCOUNT" >>"$RUN/env.sh"
		;;
	*) die "unknown emulator $name" ;;
	esac
	echo "$pid" >"$RUN/$name.pid"
	wait_ready "$name" "$pid" "$url"
	log "$name ready on 127.0.0.1:$port (pid $pid, log $LOGS/$name.log)"
}

start_all() {
	install_all
	stop_all quiet
	mkdir -p "$RUN" "$LOGS"
	: >"$RUN/env.sh"
	local name
	for name in versitygw fake-gcs-server azurite; do
		start_one "$name"
	done
}

# stop_all [quiet]: stop every emulator whose PID file exists, by its PID.
stop_all() {
	local f pid name
	for f in "$RUN"/*.pid; do
		[[ -e $f ]] || continue
		pid=$(cat "$f")
		name=$(basename "$f" .pid)
		if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			# Give it a moment to exit; then insist.
			for _ in 1 2 3 4 5 6 7 8 9 10; do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.2
			done
			kill -9 "$pid" 2>/dev/null || true
			[[ ${1:-} == quiet ]] || log "stopped $name (pid $pid)"
		fi
		rm -f "$f"
	done
}

cmd=${1:-}
shift || true
case $cmd in
install) install_all ;;
start)
	# A failed start leaves nothing running.
	trap 'stop_all quiet' EXIT
	start_all
	trap - EXIT
	;;
stop) stop_all ;;
env)
	[[ -f $RUN/env.sh ]] || die "no emulators started (run: scripts/emulators.sh start)"
	cat "$RUN/env.sh"
	;;
run)
	[[ $# -gt 0 ]] || die "usage: scripts/emulators.sh run CMD [ARG...]"
	trap 'stop_all' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	start_all
	# shellcheck disable=SC1091
	source "$RUN/env.sh"
	status=0
	"$@" || status=$?
	exit "$status"
	;;
*)
	sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
