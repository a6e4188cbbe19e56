#!/usr/bin/env bash
# Bounded soak of execd: 64 concurrent clients of both eras over HTTP and stdio, with
# cancellations of every kind (test/soak/main.go says what is checked).
#
#   test/soak/run.sh [soak flags...]      e.g. test/soak/run.sh -duration 20s
#
# 1. builds bin/execd (the guests must be built: make guests);
# 2. starts it on a free 127.0.0.1 port with a scratch data dir;
# 3. runs the soak against it (and its own execd -stdio processes);
# 4. stops execd with SIGTERM and expects exit 0 within 30 s;
# 5. ends with "N passed, N failed": the soak's checks plus build, start and stop.
# Environment: SOAK_DURATION (default 60s) unless -duration is given; SOAK_OUT keeps logs.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${SOAK_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/execd-soak.XXXXXX")}"
mkdir -p "$out"
passed=0; failed=0
record() { if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "--- PASS $1"; else failed=$((failed + 1)); echo "--- FAIL $1"; fi; }
pid=""
finish() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  echo "$passed passed, $failed failed"
  if [ $failed -eq 0 ] && [ -z "${SOAK_OUT:-}" ]; then rm -rf "$out"; else echo "soak: logs in $out"; fi
  [ $failed -eq 0 ]
  exit $?
}

cd "$root" || exit 1
echo "== build"
if go build -o bin/execd ./cmd/execd >"$out/build.log" 2>&1 && go build -o "$out/soak" ./test/soak >>"$out/build.log" 2>&1; then
  record build 0
else
  cat "$out/build.log"; record build 1; finish
fi

echo "== start"
mkdir -p "$out/data"
cat >"$out/execd.toml" <<EOF
[server]
listen = "127.0.0.1:0"
shutdown_grace = "5s"
[protocol]
progress_heartbeat = "1s"
[limits]
max_concurrent_runs = 4
[workspace]
data_dir = "$out/data"
EOF
bin/execd -config "$out/execd.toml" >"$out/execd.log" 2>&1 &
pid=$!
url=""
for _ in $(seq 1 300); do # up to ~30 s
  url="$(grep -o 'listening.*"url": "http://[^"]*"' "$out/execd.log" | grep -o 'http://[^"]*' | head -1)"
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$url" ]; then
  tail -20 "$out/execd.log"; record start 1; finish
fi
record start 0
echo "execd $pid on $url"

echo "== soak"
args=("$@")
if [[ " ${args[*]:-} " != *" -duration"* ]]; then args+=(-duration "${SOAK_DURATION:-60s}"); fi
"$out/soak" -url "$url" -pid "$pid" -bin "$root/bin/execd" "${args[@]}" 2>&1 | tee "$out/soak.out"
rc=${PIPESTATUS[0]}
line="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out/soak.out" | tail -1)"
if [ -n "$line" ]; then
  p="${line%% passed*}"; f="${line#*passed, }"; f="${f%% failed*}"
  passed=$((passed + p)); failed=$((failed + f))
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && failed=$((failed + 1))
else
  record soak 1
fi

echo "== stop"
kill -TERM "$pid"
for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  echo "execd still running 30 s after SIGTERM"; record stop 1
else
  wait "$pid"; rc=$?; pid=""
  [ $rc -eq 0 ] || tail -5 "$out/execd.log"
  record "stop (SIGTERM, exit $rc)" $rc
fi
finish
