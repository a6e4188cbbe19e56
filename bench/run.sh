#!/usr/bin/env bash
# bench/run.sh — execd against the mcp-go peer, one command.
#
# Builds execd (guest from the cache after the first `make guests`), the peer
# (bench/peer, its own module) and the load tool; starts both servers on free
# 127.0.0.1 ports; runs interleaved rounds of execd execute_code `1+1` against
# the peer's echo at 1, 8 and 64 clients in both eras, 8 clients on one
# workspace, the cancellation scenario, and execd's RSS with 1, 100 and 1000
# idle workspaces; prints the table of medians (see BENCHMARKS.md), with each
# server's CPU time per call, the load tool's, and the share of the machine
# the hypervisor stole meanwhile.
#
# Knobs (environment): ROUNDS (3), DURATION per run (3s), CANCELS per run (20),
# IDLE_STEPS (1,100,1000), OUT (a directory to keep logs and raw results).
# The whole run takes about 5 minutes on 2 cores.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3s}
CANCELS=${CANCELS:-20}
IDLE_STEPS=${IDLE_STEPS:-1,100,1000}
OUT=${OUT:-$(mktemp -d -t execd-bench.XXXXXX)}
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"

PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
}
trap cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

log "building (results and logs in $OUT)"
make -s guests >&2
go build -ldflags "-X main.version=bench" -o "$OUT/execd" ./cmd/execd
go build -o "$OUT/load" ./bench/load
(cd bench/peer && go build -o "$OUT/peer" .)
LOAD=$OUT/load

# wait_ready URL: poll /healthz until it answers.
wait_ready() {
	local url=$1
	for _ in $(seq 1 100); do
		if curl -fsS -o /dev/null "$url" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "run.sh: $url did not come up" >&2
	return 1
}

# start_execd NAME: a fresh execd with its own data directory; sets EXECD_PID
# and EXECD_URL.
start_execd() {
	local name=$1 port
	port=$("$LOAD" -free-port)
	rm -rf "$OUT/data-$name"
	cat >"$OUT/execd-$name.toml" <<EOF
[server]
listen = "127.0.0.1:$port"
[workspace]
data_dir = "$OUT/data-$name"
max_workspaces = 4096
idle_ttl = "1h"
max_disk_mib = 0
EOF
	"$OUT/execd" -config "$OUT/execd-$name.toml" 2>"$OUT/execd-$name.log" &
	EXECD_PID=$!
	PIDS+=("$EXECD_PID")
	EXECD_URL="http://127.0.0.1:$port/mcp"
	wait_ready "http://127.0.0.1:$port/healthz"
}

stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

start_execd main
PEER_PORT=$("$LOAD" -free-port)
"$OUT/peer" -listen "127.0.0.1:$PEER_PORT" 2>"$OUT/peer.log" &
PEER_PID=$!
PIDS+=("$PEER_PID")
PEER_URL="http://127.0.0.1:$PEER_PORT/mcp"
wait_ready "http://127.0.0.1:$PEER_PORT/healthz"

execd_run() { # label round args...
	local label=$1 round=$2
	shift 2
	"$LOAD" -url "$EXECD_URL" -server execd -label "$label" -round "$round" -pid "$EXECD_PID" -out "$RESULTS" "$@" >>"$OUT/load.log"
}
peer_run() {
	local label=$1 round=$2
	shift 2
	"$LOAD" -url "$PEER_URL" -server peer -label "$label" -round "$round" -pid "$PEER_PID" -tool echo -out "$RESULTS" "$@" >>"$OUT/load.log"
}

# Warm both servers once (page cache, JIT-compiled guest, connection pools).
"$LOAD" -url "$EXECD_URL" -clients 2 -duration 1s >/dev/null
"$LOAD" -url "$PEER_URL" -tool echo -clients 2 -duration 1s >/dev/null

for round in $(seq 1 "$ROUNDS"); do
	log "round $round/$ROUNDS: 1+1 vs echo"
	for era in legacy modern; do
		for c in 1 8 64; do
			label="$era, $c clients"
			# Alternate who goes first, so that neither always runs on a
			# machine the other has just warmed or heated.
			if ((round % 2)); then
				execd_run "$label" "$round" -era "$era" -clients "$c" -duration "$DURATION"
				peer_run "$label" "$round" -era "$era" -clients "$c" -duration "$DURATION"
			else
				peer_run "$label" "$round" -era "$era" -clients "$c" -duration "$DURATION"
				execd_run "$label" "$round" -era "$era" -clients "$c" -duration "$DURATION"
			fi
		done
		execd_run "$era, 8 clients, one shared workspace" "$round" -era "$era" -clients 8 \
			-workspace-mode shared -duration "$DURATION"
	done
	log "round $round/$ROUNDS: cancellation"
	for era in legacy modern; do
		execd_run "$era cancel, idle server" "$round" -scenario cancel -era "$era" -cancels "$CANCELS" -duration 60s
		execd_run "$era cancel, under load (4 clients running 1+1)" "$round" -scenario cancel -era "$era" \
			-cancels "$CANCELS" -background 4 -duration 60s
	done
done

log "idle workspaces: RSS of a fresh execd at $IDLE_STEPS"
stop "$EXECD_PID"
start_execd idle
sleep 0.5
execd_run "RSS" 1 -scenario idle -era modern -clients 2 -idle-steps "$IDLE_STEPS"
log "peer RSS after the rounds: $(awk '/VmRSS/{print $2, $3}' "/proc/$PEER_PID/status")"

echo
echo "# execd vs mcp-go peer ($ROUNDS rounds of $DURATION, medians; $(nproc) CPUs)"
echo
"$LOAD" -report "$RESULTS"
echo "raw results: $RESULTS; per-run output: $OUT/load.log"
