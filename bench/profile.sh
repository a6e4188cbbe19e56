#!/usr/bin/env bash
# bench/profile.sh — CPU and heap profiles of execd under load.
#
# Builds execd and starts it with server.admin_listen (/debug/pprof on a second port),
# drives it with the load tool (8 clients, execute_code 1+1, ERA), takes a
# CPU profile during the load, then creates IDLE idle workspaces and takes a
# heap profile. Prints the top of each and keeps the profiles in OUT for
# `go tool pprof -http=: OUT/execd OUT/cpu.pprof`.
#
# Knobs (environment): ERA (modern), SECONDS_CPU (15), IDLE (100), OUT.
ERA=${ERA:-modern}
SECONDS_CPU=${SECONDS_CPU:-15}
IDLE=${IDLE:-100}
source "$(dirname "$0")/lib.sh" profile

build
pport=$(free_port)
start_execd main "admin_listen = \"127.0.0.1:$pport\""
PID=$EXECD_PID
URL=$EXECD_URL
PPROF="http://127.0.0.1:$pport/debug/pprof"

echo "== CPU: 8 clients, $ERA era, execute_code 1+1, ${SECONDS_CPU}s" >&2
"$LOAD" -url "$URL" -era "$ERA" -clients 8 -duration "$((SECONDS_CPU + 4))s" >"$OUT/load.txt" &
LPID=$!
track "$LPID"
sleep 2
curl -fsS -o "$OUT/cpu.pprof" "$PPROF/profile?seconds=$SECONDS_CPU"
wait "$LPID"
cat "$OUT/load.txt"

echo "== heap: $IDLE idle workspaces" >&2
"$LOAD" -url "$URL" -era "$ERA" -scenario idle -clients 2 -pid "$PID" -idle-steps "$IDLE" >"$OUT/idle.txt"
cat "$OUT/idle.txt"
curl -fsS -o "$OUT/heap.pprof" "$PPROF/heap?gc=1"

echo
echo "## CPU, flat (top 25)"
go tool pprof -top -nodecount=25 "$OUT/execd" "$OUT/cpu.pprof" 2>/dev/null
echo
echo "## CPU, cumulative (top 40)"
go tool pprof -top -cum -nodecount=40 "$OUT/execd" "$OUT/cpu.pprof" 2>/dev/null
echo
echo "## heap in use after $IDLE idle workspaces (top 20)"
go tool pprof -sample_index=inuse_space -top -nodecount=20 "$OUT/execd" "$OUT/heap.pprof" 2>/dev/null
echo
echo "profiles: $OUT/cpu.pprof $OUT/heap.pprof (binary $OUT/execd)"
