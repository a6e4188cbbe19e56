# bench/lib.sh — what the bench/*.sh scripts share. Sourced, never run:
#
#   source "$(dirname "$0")/lib.sh" NAME
#
# leaves the shell at the repository's top with
#   OUT          a directory for binaries, logs and results: $OUT from the environment
#                (kept), else a new temporary one named after NAME;
#   log MSG      a progress line on stderr;
#   track PID    a process killed when the script exits, however it exits;
#   build [peer] guests (cached), $OUT/execd, $OUT/load (LOAD) and, with peer, $OUT/peer;
#   free_port    a free TCP port on 127.0.0.1;
#   wait_ready URL   polls URL (a /healthz) for up to 10 s;
#   start_execd NAME [SERVER_TOML]
#                a fresh execd on a free port with its own data directory $OUT/data-NAME
#                (max_workspaces = 4096, idle_ttl = 1h, no disk quota) and SERVER_TOML added
#                to [server]; sets EXECD_PID, EXECD_PORT and EXECD_URL (.../mcp); logs to
#                $OUT/execd-NAME.log;
#   stop PID     SIGTERM, then waits for it.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$(mktemp -d -t "execd-${1:-bench}.XXXXXX")}
mkdir -p "$OUT"

PIDS=()
track() { PIDS+=("$1"); }
_bench_cleanup() {
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
}
trap _bench_cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

build() {
	make -s guests >&2
	go build -ldflags "-X main.version=bench" -o "$OUT/execd" ./cmd/execd
	go build -o "$OUT/load" ./bench/load
	if [ "${1:-}" = peer ]; then
		(cd bench/peer && go build -o "$OUT/peer" .)
	fi
	LOAD=$OUT/load
}

free_port() { "$LOAD" -free-port; }

wait_ready() {
	local url=$1
	for _ in $(seq 1 100); do
		if curl -fsS -o /dev/null "$url" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "$(basename "$0"): $url did not come up" >&2
	return 1
}

start_execd() {
	local name=$1 server=${2:-}
	EXECD_PORT=$(free_port)
	rm -rf "$OUT/data-$name"
	cat >"$OUT/execd-$name.toml" <<TOML
[server]
listen = "127.0.0.1:$EXECD_PORT"
$server
[workspace]
data_dir = "$OUT/data-$name"
max_workspaces = 4096
idle_ttl = "1h"
max_disk_mib = 0
TOML
	"$OUT/execd" -config "$OUT/execd-$name.toml" 2>"$OUT/execd-$name.log" &
	EXECD_PID=$!
	track "$EXECD_PID"
	EXECD_URL="http://127.0.0.1:$EXECD_PORT/mcp"
	wait_ready "http://127.0.0.1:$EXECD_PORT/healthz"
}

stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
