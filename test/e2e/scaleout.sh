#!/usr/bin/env bash
# E2E_ONLY=scaleout: three execd instances behind real nginx with njs, configured by
# deploy/nginx/ (copied, with this run's ports and paths put in), checked by scaleout.mjs:
#   1. each instance with its own data directory: a modern and a legacy client share a named
#      workspace, 100 workspaces spread over all three, new workspaces' ids route back, legacy
#      cancels reach the instance that runs the call; one instance stopped and started again;
#   2. the three sharing one data directory (cluster.shared_storage): one workspace through two
#      instances at once, an instance stopped (SIGTERM), another killed (SIGKILL).
#
#   bash test/e2e/scaleout.sh OUT_DIR EXECD_BIN     (needs E2E_NODE, E2E_SDK_NODE_PATH: setup.sh)
#
# Installs nginx and libnginx-mod-http-js with apt when missing. Ends with "N passed, N failed".
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$1" bin="$2"
mkdir -p "$out"

if ! command -v nginx >/dev/null || [ ! -f /usr/lib/nginx/modules/ngx_http_js_module.so ]; then
  echo "scaleout: installing nginx and njs (apt)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx libnginx-mod-http-js; } >"$out/apt.log" 2>&1 ||
    { tail -5 "$out/apt.log"; echo "0 passed, 1 failed"; exit 1; }
fi

free_port() { "$E2E_NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
ports=("$(free_port)" "$(free_port)" "$(free_port)")
nport="$(free_port)"
head -c 48 /dev/urandom | base64 >"$out/session.key"
peers="\"127.0.0.1:${ports[0]}\", \"127.0.0.1:${ports[1]}\", \"127.0.0.1:${ports[2]}\""

pids=("" "" "")
cleanup() {
  local p
  for p in "${pids[@]}" "${npid:-}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; done
  sleep 0.5
  for p in "${pids[@]}" "${npid:-}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
  [ -n "${coproc_pid:-}" ] && kill "$coproc_pid" 2>/dev/null
  true
}
trap cleanup EXIT

# config K DATA_DIR SHARED: instance K's config.
config() {
  cat >"$out/execd-$1.toml" <<EOT
[server]
listen = "127.0.0.1:${ports[$1]}"
shutdown_grace = "2s"
[protocol]
task_after = "300ms"
[workspace]
data_dir = "$2"
[cluster]
peers = [$peers]
self = "127.0.0.1:${ports[$1]}"
session_key_file = "$out/session.key"
shared_storage = $3
EOT
}
start() { # start K: starts instance K and waits for its /healthz
  "$bin" -config "$out/execd-$1.toml" >>"$out/execd-$1.log" 2>&1 &
  pids[$1]=$!
  local i
  for i in $(seq 1 150); do
    curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:${ports[$1]}/healthz" 2>/dev/null && return 0
    kill -0 "${pids[$1]}" 2>/dev/null || break
    sleep 0.2
  done
  echo "scaleout: instance $(($1 + 1)) did not start:"; tail -5 "$out/execd-$1.log"; return 1
}
stop() { # stop K [SIGNAL]
  local p="${pids[$1]}" i
  kill -"${2:-TERM}" "$p" 2>/dev/null
  for i in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  wait "$p" 2>/dev/null
  pids[$1]=""
}

# nginx with deploy/nginx/'s files, this run's ports and paths put in.
ng="$out/nginx"
mkdir -p "$ng/logs" "$ng/tmp"
cp "$root/deploy/nginx/execd.js" "$root/deploy/nginx/proxy.conf" "$ng/"
sed -e "s|/etc/nginx/execd/|$ng/|g" \
  -e "s|127.0.0.1:8001|127.0.0.1:${ports[0]}|g" -e "s|127.0.0.1:8002|127.0.0.1:${ports[1]}|g" \
  -e "s|127.0.0.1:8003|127.0.0.1:${ports[2]}|g" -e "s|127.0.0.1:8080|127.0.0.1:$nport|g" \
  "$root/deploy/nginx/execd.conf" >"$ng/execd.conf"
cat >"$ng/nginx.conf" <<EOT
load_module /usr/lib/nginx/modules/ngx_http_js_module.so;
daemon off;
worker_processes 1;
pid $ng/nginx.pid;
error_log $ng/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log $ng/logs/access.log;
  client_body_temp_path $ng/tmp/body;
  proxy_temp_path $ng/tmp/proxy;
  fastcgi_temp_path $ng/tmp/fastcgi;
  uwsgi_temp_path $ng/tmp/uwsgi;
  scgi_temp_path $ng/tmp/scgi;
  include $ng/execd.conf;
}
EOT
nginx -t -p "$ng" -c "$ng/nginx.conf" >"$ng/test.log" 2>&1 || { cat "$ng/test.log"; echo "0 passed, 1 failed"; exit 1; }
nginx -p "$ng" -c "$ng/nginx.conf" >>"$ng/logs/stderr.log" 2>&1 &
npid=$!
for i in $(seq 1 50); do curl -fsS -o /dev/null "http://127.0.0.1:$nport/healthz" 2>/dev/null && break; sleep 0.1; done
url="http://127.0.0.1:$nport/mcp"

total_p=0 total_f=0
# run_phase MODE ARGS...: runs scaleout.mjs, acting on its PHASE lines.
run_phase() {
  coproc CHECK { "$E2E_NODE" "$here/scaleout.mjs" "$@" 2>&1; }
  coproc_pid=$CHECK_PID
  local line k
  while IFS= read -r line <&"${CHECK[0]}"; do
    echo "$line"
    case $line in
      "PHASE stop "[0-9]) k=$((${line#PHASE stop } - 1)); stop "$k"; echo ok >&"${CHECK[1]}" ;;
      "PHASE start "[0-9]) k=$((${line#PHASE start } - 1)); start "$k"; echo ok >&"${CHECK[1]}" ;;
      "PHASE stop owner")
        for k in 0 1 2; do grep -q '"workspace": "kept"' "$out/execd-$k.log" && break; done
        owner=$k; echo "scaleout: stopping instance $((k + 1)) (SIGTERM), which served workspace kept"
        stop "$k"; echo ok >&"${CHECK[1]}" ;;
      "PHASE kill another")
        k=$(( (owner + 1) % 3 )); echo "scaleout: killing instance $((k + 1)) (SIGKILL)"
        stop "$k" KILL; echo ok >&"${CHECK[1]}" ;;
      [0-9]*" passed, "[0-9]*" failed")
        total_p=$((total_p + ${line%% passed*})); local f=${line#*passed, }; total_f=$((total_f + ${f%% failed*})) ;;
    esac
  done
  wait "$coproc_pid" 2>/dev/null
  coproc_pid=
}

echo "== scaleout: three instances, each with its own data directory"
ok=1
for k in 0 1 2; do mkdir -p "$out/data-$k"; config $k "$out/data-$k" false; start $k || ok=0; done
if [ $ok = 1 ]; then
  run_phase local "$url" "$out/data-0" "$out/data-1" "$out/data-2"
else
  total_f=$((total_f + 1))
fi
for k in 0 1 2; do [ -n "${pids[$k]}" ] && stop $k; done

echo "== scaleout: three instances sharing one data directory"
ok=1
mkdir -p "$out/data-shared"
for k in 0 1 2; do config $k "$out/data-shared" true; : >"$out/execd-$k.log"; start $k || ok=0; done
if [ $ok = 1 ]; then
  run_phase shared "$url" "http://127.0.0.1:${ports[0]}/mcp" "http://127.0.0.1:${ports[1]}/mcp" "http://127.0.0.1:${ports[2]}/mcp"
else
  total_f=$((total_f + 1))
fi
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
