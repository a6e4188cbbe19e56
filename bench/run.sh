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
# The whole run takes about 2.5 minutes on 2 cores once built.
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3s}
CANCELS=${CANCELS:-20}
IDLE_STEPS=${IDLE_STEPS:-1,100,1000}
source "$(dirname "$0")/lib.sh" bench
RESULTS=$OUT/results.jsonl
: >"$RESULTS"

log "building (results and logs in $OUT)"
build peer

start_execd main
PEER_PORT=$(free_port)
"$OUT/peer" -listen "127.0.0.1:$PEER_PORT" 2>"$OUT/peer.log" &
PEER_PID=$!
track "$PEER_PID"
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
