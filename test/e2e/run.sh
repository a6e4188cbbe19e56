#!/usr/bin/env bash
# End-to-end tests of execd against real MCP clients; the entry point `make test` calls.
#
#   test/e2e/run.sh
#
# 1. installs the toolchain (setup.sh: Node 22, conformance suites, Inspector, SDK) into
#    ${EXECD_CACHE:-$HOME/.cache/execd}/node;
# 2. builds bin/execd and bin/execd-conformance (cmd/execd-conformance: the front end with the
#    conformance suites' fixture tools, prompts and resources);
# 3. starts each on a free 127.0.0.1 port and waits for /healthz;
# 4. runs the TypeScript SDK client over HTTP and over stdio (bin/execd -stdio), internal/upstream's
#    tests against server-everything (code mode's client, over stdio and streamable HTTP) and the
#    worker's (called by both guests), code mode's approvals answered by the SDK client's
#    elicitation handler (sdk_approval.mjs, a server with an ask upstream), the
#    Inspector CLI in the legacy, auto and modern eras, long runs as tasks through the Inspector's
#    mcpdo in the legacy and modern eras (inspector_tasks.mjs, a server with task_after = 1s),
#    wire checks (wire_checks.mjs) for rules no client exercises, Claude Code, Codex CLI and the
#    Inspector against fake model APIs to check that text and images reach the model
#    (clients.mjs), long runs as MCP tasks in Claude Code's interactive mode under a
#    pseudo-terminal (claude_tasks.mjs), and the conformance suites (conformance.sh); the admin
#    listener in headless Chromium (status.sh), traces into a loopback OTLP/HTTP receiver
#    (otelcheck), and three instances behind nginx (scaleout.sh);
# 5. stops the servers and ends with "N passed, N failed": the sum of the steps' own counts
#    (client checks, conformance suites) plus one for each step without counts.
#
# Environment: E2E_SKIP_BUILD=1 uses the existing binaries; E2E_ONLY="sdk stdio upstream inspector
# wire session-ttl clients claude-tasks conformance status otel scaleout" picks steps (the default set); E2E_OUT keeps logs and results there (default: a temp dir,
# kept on failure). Exits 1 if anything failed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
only="${E2E_ONLY:-sdk stdio upstream inspector wire session-ttl clients claude-tasks conformance status otel scaleout}"

passed=0; failed=0; failures=()
record() { # record NAME RC: one step that has no counts of its own
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1)); echo "--- PASS $1"
  else
    failed=$((failed + 1)); failures+=("$1"); echo "--- FAIL $1"
  fi
}
# step NAME CMD...: runs CMD, shows its output, and adds the "N passed, N failed" of its
# last such line to the totals (a non-zero exit with no failures counted adds one failure).
step() {
  local name="$1"; shift
  local log="$out/$name.out" rc p=0 f=0 line
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  line="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)"
  if [ -n "$line" ]; then
    p="${line%% passed*}"; f="${line#*passed, }"; f="${f%% failed*}"
  fi
  [ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
  [ $rc -eq 0 ] && [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && p=1
  passed=$((passed + p)); failed=$((failed + f))
  if [ $rc -eq 0 ] && [ "$f" -eq 0 ]; then
    echo "--- PASS $name ($p passed)"
  else
    failures+=("$name"); echo "--- FAIL $name ($p passed, $f failed, exit $rc)"
  fi
}
finish() {
  echo
  if [ $failed -gt 0 ]; then
    echo "e2e: failed: ${failures[*]} (logs in $out)"
  fi
  echo "$passed passed, $failed failed"
  [ $failed -eq 0 ]
  exit $?
}

out="${E2E_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/execd-e2e.XXXXXX")}"
mkdir -p "$out"

pids=()
cleanup() {
  local pid i
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ -z "${E2E_OUT:-}" ] && [ $failed -eq 0 ]; then rm -rf "$out"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

want() { [[ " $only " == *" $1 "* ]]; }

# stop_server NAME PID: SIGTERM, then expect exit 0 within 15 s (the graceful shutdown).
stop_server() {
  local name="$1" pid="$2" i rc
  kill -TERM "$pid" 2>/dev/null || { record "$name-sigterm" 1; return; }
  for i in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$name still running 15 s after SIGTERM"; kill -KILL "$pid" 2>/dev/null
    record "$name-sigterm" 1; return
  fi
  wait "$pid"; rc=$?
  [ $rc -eq 0 ] || { echo "$name exited $rc after SIGTERM:"; tail -5 "$out/$name.log"; }
  record "$name-sigterm" $rc
}

echo "== setup"
if ! . "$here/setup.sh"; then
  record setup 1
  finish
fi

if [ "${E2E_SKIP_BUILD:-0}" != 1 ]; then
  echo "== build"
  (cd "$root" && go build -o bin/execd ./cmd/execd) >"$out/build.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && want conformance; then
    (cd "$root" && go build -o bin/execd-conformance ./cmd/execd-conformance) >>"$out/build.log" 2>&1
    rc=$?
  fi
  [ $rc -eq 0 ] || head -40 "$out/build.log"
  record build $rc
  [ $rc -eq 0 ] || finish
fi

free_port() {
  "$E2E_NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# write_config NAME [PROTOCOL_TOML]: a config with a scratch data dir and a 1 s progress heartbeat (so that
# wire_checks.mjs can see heartbeats quickly); prints its path.
export E2E_HEARTBEAT_MS=1000
write_config() {
  mkdir -p "$out/$1-data"
  printf '[protocol]\nprogress_heartbeat = "1s"\n%s\n\n[workspace]\ndata_dir = "%s"\n' "${2:-}" "$out/$1-data" >"$out/$1.toml"
  echo "$out/$1.toml"
}

# start_server NAME BIN [EXTRA_TOML [PROTOCOL_TOML]]: starts BIN on a free port with a
# scratch data dir (EXTRA_TOML prepended to its config, PROTOCOL_TOML added to [protocol]);
# sets URL.
start_server() {
  local name="$1" bin="$2" extra="${3:-}" port cfg
  port="$(free_port)" || return 1
  cfg="$(write_config "$name" "${4:-}")"
  if [ -n "$extra" ]; then printf '%s\n\n%s\n' "$extra" "$(cat "$cfg")" >"$cfg"; fi
  "$bin" -config "$cfg" -listen "127.0.0.1:$port" >"$out/$name.log" 2>&1 &
  pids+=($!)
  await_server "$name" "$port"
}

# start_fixtures NAME BIN: starts the conformance fixture server BIN (it takes only -listen)
# on a free port; sets URL.
start_fixtures() {
  local name="$1" bin="$2" port
  port="$(free_port)" || return 1
  "$bin" -listen "127.0.0.1:$port" >"$out/$name.log" 2>&1 &
  pids+=($!)
  await_server "$name" "$port"
}

# await_server NAME PORT: waits for the last started server's /healthz; sets URL.
await_server() {
  local name="$1" port="$2" i
  URL="http://127.0.0.1:$port/mcp"
  for i in $(seq 1 150); do # up to ~30 s
    if curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$port/healthz" 2>/dev/null; then
      echo "$name listening on $URL"
      return 0
    fi
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
      echo "$name exited during start:"; tail -20 "$out/$name.log"
      return 1
    fi
    sleep 0.2
  done
  echo "$name: /healthz did not answer 200 within 30 s"; tail -20 "$out/$name.log"
  return 1
}

if want sdk || want inspector || want wire; then
  echo "== start bin/execd"
  if start_server execd "$root/bin/execd"; then
    url="$URL"
    if want sdk; then
      echo "== TypeScript SDK client over HTTP"
      step sdk-http timeout --kill-after=10 300 "$E2E_NODE" "$here/sdk_client.mjs" "$url"
    fi
    if want inspector; then
      echo "== Inspector CLI"
      step inspector timeout --kill-after=10 600 "$E2E_NODE" "$here/inspector.mjs" "$url"
    fi
    if want wire; then
      echo "== wire checks over HTTP (modern cancel, timeout, headers, session end)"
      step wire-http timeout --kill-after=10 300 "$E2E_NODE" "$here/wire_checks.mjs" --http "$url"
    fi
    stop_server execd "${pids[-1]}"
  else
    record start-execd 1
  fi
fi

if want inspector; then
  echo "== start bin/execd with protocol.task_after = 1s"
  if start_server execd-tasks "$root/bin/execd" "" 'task_after = "1s"'; then
    echo "== Inspector (mcpdo): long runs as tasks in the legacy and modern eras"
    step inspector-tasks timeout --kill-after=10 600 "$E2E_NODE" "$here/inspector_tasks.mjs" "$URL" "$out/execd-tasks-data"
    stop_server execd-tasks "${pids[-1]}"
  else
    record start-execd-tasks 1
  fi
fi

if want stdio; then
  echo "== TypeScript SDK client over stdio (bin/execd -stdio)"
  step sdk-stdio timeout --kill-after=10 300 "$E2E_NODE" "$here/sdk_client.mjs" --stdio "$root/bin/execd" -stdio -config "$(write_config stdio)"
fi
if want upstream; then
  # With E2E_NODE and E2E_SERVER_EVERYTHING set (setup.sh), these tests run rather than skip.
  echo "== code mode's client: server-everything as an upstream over stdio and streamable HTTP"
  step upstream timeout --kill-after=10 300 env -C "$root" go test -count=1 -v -run 'TestEverything' ./internal/upstream/
  echo "== code mode from the guests: server-everything called by JavaScript and Python, stdio and HTTP"
  step upstream-guests timeout --kill-after=10 300 env -C "$root" go test -count=1 -v -run 'TestToolsWithServerEverything' ./internal/worker/
  echo "== code mode's approvals through the TypeScript SDK client's elicitation handler (legacy era)"
  if (cd "$root" && go build -o "$out/fakeupstream" ./internal/upstream/testdata/fakeupstream) >"$out/fakeupstream-build.log" 2>&1 &&
      start_server execd-upstream "$root/bin/execd" "$(printf '[[upstream]]\nname = "fake"\ncommand = ["%s"]\nallow = ["*"]\nask = ["echo"]\n' "$out/fakeupstream")"; then
    step sdk-approval timeout --kill-after=10 300 "$E2E_NODE" "$here/sdk_approval.mjs" "$URL"
    stop_server execd-upstream "${pids[-1]}"
  else
    record start-execd-upstream 1
  fi
fi
if want wire; then
  echo "== wire checks over stdio (era pinning, modern cancel)"
  step wire-stdio timeout --kill-after=10 300 "$E2E_NODE" "$here/wire_checks.mjs" --stdio "$root/bin/execd" -stdio -config "$(write_config stdio)"
fi

if want wire; then
  # A small memory budget and share, so that alice's input() waits reach her share quickly
  # (wire_checks.mjs --auth: bob's calls in both eras succeed meanwhile).
  echo "== start bin/execd with bearer tokens (a 64 MiB memory budget, 32 MiB a principal)"
  tok_a="e2e-alice-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
  tok_b="e2e-bob-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
  printf '# principal token\nalice %s\nbob %s\n' "$tok_a" "$tok_b" >"$out/tokens"
  if start_server execd-auth "$root/bin/execd" "$(printf '[server]\nauth_tokens_file = "%s"\n\n[limits]\nmax_total_memory_mib = 64\nmax_memory_per_principal_mib = 32' "$out/tokens")"; then
    step wire-auth timeout --kill-after=10 120 "$E2E_NODE" "$here/wire_checks.mjs" --auth "$URL" "$tok_a" "$tok_b"
    stop_server execd-auth "${pids[-1]}"
  else
    record start-execd-auth 1
  fi
fi

if want session-ttl; then
  echo "== start bin/execd with a 1 s session idle TTL"
  if start_server execd-ttl "$root/bin/execd" "" 'session_idle_ttl = "1s"'; then
    step session-ttl timeout --kill-after=10 120 "$E2E_NODE" "$here/wire_checks.mjs" --session-ttl "$URL" 1000
    stop_server execd-ttl "${pids[-1]}"
  else
    record start-execd-ttl 1
  fi
fi

if want claude-tasks; then
  echo "== Claude Code (interactive, under a pseudo-terminal): long runs as MCP tasks"
  step claude-tasks timeout --kill-after=10 1200 "$E2E_NODE" "$here/claude_tasks.mjs" "$root/bin/execd"
fi
if want clients; then
  echo "== Claude Code, Codex CLI and the Inspector: does an image reach the model?"
  if start_server execd-clients "$root/bin/execd"; then
    step clients timeout --kill-after=10 1800 "$E2E_NODE" "$here/clients.mjs" "$URL" "$root/bin/execd" "$(write_config clients-stdio)"
    stop_server execd-clients "${pids[-1]}"
  else
    record start-execd-clients 1
  fi
fi

if want status; then
  echo "== admin listener: the status page in headless Chromium, /metrics, pprof"
  step status timeout --kill-after=10 300 bash "$here/status.sh" "$out/status" "$root/bin/execd"
fi

if want otel; then
  echo "== traces: OTLP/HTTP into a loopback receiver"
  (cd "$root" && go build -o "$out/otelcheck" ./test/e2e/otelcheck) >>"$out/build.log" 2>&1 &&
    step otel timeout --kill-after=10 300 "$out/otelcheck" "$root/bin/execd" || record otel-build 1
fi

if want scaleout; then
  echo "== three instances behind nginx (njs)"
  step scaleout timeout --kill-after=10 900 bash "$here/scaleout.sh" "$out/scaleout" "$root/bin/execd"
fi

if want conformance; then
  echo "== start bin/execd-conformance"
  if start_fixtures execd-conformance "$root/bin/execd-conformance"; then
    step conformance env E2E_OUT="$out/conformance" "$here/conformance.sh" "$URL" legacy modern legacy-next tasks
    stop_server execd-conformance "${pids[-1]}"
  else
    record start-execd-conformance 1
  fi
  echo "== start bin/execd for the scenarios that apply to it"
  if start_server execd-production "$root/bin/execd"; then
    step conformance-production env E2E_OUT="$out/conformance" "$here/conformance.sh" "$URL" production
    stop_server execd-production "${pids[-1]}"
  else
    record start-execd-production 1
  fi
fi

finish
