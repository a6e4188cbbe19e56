#!/usr/bin/env bash
# E2E_ONLY=status: the admin listener of a real execd seen by a real browser. A call that
# reports progress runs; headless Chromium (Debian's chromium) loads /status, whose script
# polls /status.json, and the page it renders must show the call with its latest progress;
# after the client closes the stream, the page shows no running call and /metrics counts the
# cancel. Also: nothing of the admin listener is served on the MCP listener.
#
#   bash test/e2e/status.sh OUT_DIR EXECD_BIN
#
# Installs chromium with apt when missing. Ends with "N passed, N failed".
set -uo pipefail
out="$1" bin="$2"
mkdir -p "$out"
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "PASS $*"; }
ko() { failed=$((failed + 1)); echo "FAIL $*"; }
finish() { echo "$passed passed, $failed failed"; [ $failed -eq 0 ]; exit; }

if ! command -v chromium >/dev/null; then
  echo "status: installing chromium (apt)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"$out/apt.log" 2>&1 ||
    { tail -5 "$out/apt.log"; ko "apt-get install chromium"; finish; }
fi

cat >"$out/status.toml" <<EOT
[server]
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
shutdown_grace = "2s"
[workspace]
data_dir = "$out/status-data"
EOT
"$bin" -config "$out/status.toml" 2>"$out/status-execd.log" &
pid=$!
curl_pid=
trap 'kill $curl_pid 2>/dev/null; kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
mcp= admin=
for _ in $(seq 1 150); do
  mcp=$(sed -n 's|.*listening.*"url": "\(http://[^"]*\)".*|\1|p' "$out/status-execd.log")
  admin=$(sed -n 's|.*admin listener.*"url": "\(http://[^"]*\)/".*|\1|p' "$out/status-execd.log")
  [ -n "$mcp" ] && [ -n "$admin" ] && break
  sleep 0.2
done
[ -n "$mcp" ] && [ -n "$admin" ] || { ko "execd with admin_listen did not start: $(tail -3 "$out/status-execd.log")"; finish; }

# A run that reports progress, then spins until its stream is closed.
marker="rows-$RANDOM-e2e"
curl -sN -X POST "$mcp" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: execute_code' -H 'Mcp-Param-Workspace: seen' \
  -d '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"javascript","workspace":"seen","code":"progress(3, 10, \"'"$marker"'\"); while (true) {}"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' \
  >"$out/status-call.out" 2>&1 &
curl_pid=$!
# The workspace listing is read at most every 2 s: wait until it shows the run too.
for _ in $(seq 1 100); do
  st=$(curl -fsS "$admin/status.json")
  grep -q "$marker" <<<"$st" && grep -q '"running": true' <<<"$st" && break
  sleep 0.2
done

# dump PAGE: the DOM Chromium renders after the page's script has polled.
dump() {
  rm -rf "$out/chromium-profile"
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --disable-sync --no-first-run --user-data-dir="$out/chromium-profile" --virtual-time-budget=3000 --dump-dom "$1" \
    2>>"$out/chromium.log"
}
dom=$(dump "$admin/status")
row=$(grep -o '<tbody id="calls">.*</tbody>' <<<"$dom" | head -1)
if grep -q "3/10 $marker" <<<"$row" && grep -q 'tools/call execute_code' <<<"$row" && grep -q '<td>seen</td>' <<<"$row"; then
  ok "the status page (headless Chromium) shows the running call with its latest progress: ${row:0:300}"
else
  ko "the status page does not show the running call's progress; calls table: ${row:-none}; $(tail -2 "$out/chromium.log")"
fi
if grep -q '<td>local</td><td>seen</td><td>javascript</td><td class="live">live, running</td>' <<<"$dom"; then
  ok "the page lists the workspace: principal, id, language, state"
else
  ko "workspace row missing: $(grep -o '<tbody id="workspaces">.*</tbody>' <<<"$dom" | head -c 400)"
fi

kill $curl_pid; wait $curl_pid 2>/dev/null; curl_pid=
for _ in $(seq 1 50); do curl -fsS "$admin/status.json" | grep -q '"calls": \[\]' && break; sleep 0.1; done
dom=$(dump "$admin/status")
if grep -q 'no call is running' <<<"$dom"; then ok "after the client closed the stream the page shows no running call"; else ko "the call still shows after the stream closed"; fi

metrics=$(curl -fsS "$admin/metrics")
for want in 'execd_cancellations_total{source="stream_close"} 1' 'execd_sandbox_interrupts_total{language="javascript"} 1' \
  'execd_requests_total{era="modern",method="tools/call",outcome="cancelled",transport="http"} 1' 'execd_workspaces{state="live"} 1' \
  'go_goroutines' 'execd_guest_memory_budget_bytes'; do
  if grep -qF "$want" <<<"$metrics"; then ok "/metrics has $want"; else ko "/metrics lacks $want"; fi
done
code=$(curl -s -o /dev/null -w '%{http_code}' "$admin/debug/pprof/goroutine?debug=1")
[ "$code" = 200 ] && ok "/debug/pprof/ on the admin listener" || ko "/debug/pprof/: HTTP $code"
base=${mcp%/mcp}
for p in /metrics /status /status.json /debug/pprof/; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$base$p")
  [ "$code" = 404 ] && ok "$p is not served on the MCP listener" || ko "$p on the MCP listener: HTTP $code"
done
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: attacker.example' "$admin/status.json")
[ "$code" = 403 ] && ok "a foreign Host is refused on the loopback admin listener" || ko "foreign Host: HTTP $code"
finish
