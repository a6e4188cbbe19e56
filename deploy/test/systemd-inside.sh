#!/usr/bin/env bash
# Runs inside a Debian tree booted with systemd as PID 1 (deploy/check.sh
# starts it with systemd-nspawn): installs execd the way deploy/README.md says,
# starts deploy/systemd/execd.service, and checks that execd works under every
# restriction of the unit and that the restrictions are in force. Writes one
# "PASS name" or "FAIL name: why" line per check to /results/report, then
# powers the container off.
#
# Mounted by check.sh: /check/deploy (deploy/, read-only), /check/execd (the
# binary under test), /results (writable).
set -uo pipefail
. /check/deploy/test/mcp.sh

report=/results/report
: >"$report"
pass() { echo "PASS $1" >>"$report"; }
fail() { echo "FAIL $1: $2" >>"$report"; }
check() { # check NAME CMD...: PASS if CMD succeeds
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name" "'$*' failed"; fi
}
finish() {
	journalctl -u execd.service --no-pager -o short-monotonic >/results/execd.journal 2>&1
	systemctl poweroff --no-block
}
trap finish EXIT

url=http://127.0.0.1:8765
unit=/etc/systemd/system/execd.service
main_pid() { systemctl show -p MainPID --value execd.service; }
prop() { systemctl show -p "$1" --value execd.service; }

# ---- install as deploy/README.md says --------------------------------------
install -m 0755 /check/execd /usr/local/bin/execd
install -m 0644 /check/deploy/systemd/execd.sysusers /usr/lib/sysusers.d/execd.conf
systemd-sysusers
install -D -m 0644 /check/deploy/systemd/config.toml /etc/execd/config.toml
install -m 0644 /check/deploy/systemd/execd.service "$unit"
systemctl daemon-reload

out=$(systemd-analyze verify "$unit" 2>&1)
if [[ -z $out ]]; then pass "systemd-analyze verify (installed, executable present)"; else fail "systemd-analyze verify" "$out"; fi
exposure=$(systemd-analyze security --no-pager execd.service 2>&1 | sed -n 's/.*Overall exposure level for execd.service: \([0-9.]*\).*/\1/p')
echo "exposure $exposure" >/results/exposure
[[ -n $exposure ]] && pass "systemd-analyze security of the loaded unit: $exposure" || fail "systemd-analyze security" "no score"

check "systemctl enable --now execd" systemctl enable --now execd.service
if wait_healthz "$url" 60; then pass "/healthz answers 200 under the unit"; else
	fail "/healthz answers 200 under the unit" "not within 60 s: $(systemctl status --no-pager execd.service 2>&1 | tail -5)"
fi

# ---- execd works under the restrictions ------------------------------------
r=$(mcp_exec "$url" javascript w1 'let x = 6; x * 7')
[[ $r == *'"status":"ok"'*'"result":"42"'* ]] && pass "JavaScript runs (wazero compiled code under SystemCallFilter)" || fail "JavaScript runs" "$r"
r=$(mcp_exec "$url" javascript w1 'x + 1')
[[ $r == *'"result":"7"'* ]] && pass "workspace state kept between calls" || fail "workspace state kept" "$r"
r=$(mcp_exec "$url" python w1 "open('/workspace/note.txt', 'w').write('hi'); 6 * 7")
[[ $r == *'"status":"ok"'*'"result":"42"'* ]] && pass "Python runs and writes /workspace" || fail "Python runs and writes /workspace" "$r"
owner=$(stat -c '%U %a' /var/lib/execd/local/w1/note.txt 2>&1)
[[ $owner == "execd 600" ]] && pass "workspace file in StateDirectory, owner execd, mode 600 (UMask)" ||
	fail "workspace file in StateDirectory" "stat: $owner"
check "wazero compiled the guests (compiled code cached in CacheDirectory)" test "$(find /var/cache/execd -type f | wc -l)" -gt 0
check "data_dir mode 0700" test "$(stat -c %a /var/lib/execd)" = 700

# ---- the restrictions are in force -----------------------------------------
pid=$(main_pid)
st=/proc/$pid/status
field() { sed -n "s/^$1:[[:space:]]*//p" "$st" | awk '{print $1}'; }
[[ $(field Uid) == "$(id -u execd)" && $(id -u execd) != 0 ]] && pass "runs as user execd" || fail "runs as user execd" "Uid $(field Uid)"
check "NoNewPrivs=1" test "$(field NoNewPrivs)" = 1
check "seccomp filter on (Seccomp: 2)" test "$(field Seccomp)" = 2
check "no capabilities (CapEff, CapBnd zero)" test "$(field CapEff)" = 0000000000000000 -a "$(field CapBnd)" = 0000000000000000
in_ns() { nsenter -t "$pid" -m -- "$@"; }
if in_ns sh -c 'touch /usr/local/bin/x' 2>/dev/null || in_ns sh -c 'touch /etc/execd/x' 2>/dev/null; then
	fail "ProtectSystem=strict" "/usr or /etc writable in the service's mount namespace"
else pass "ProtectSystem=strict: /usr and /etc read-only for the service"; fi
mkdir -p /home/someone && echo secret >/home/someone/f
check "ProtectHome: /home invisible to the service" test -z "$(in_ns ls -A /home 2>/dev/null)"
echo outside >/tmp/host-tmp-file
check "PrivateTmp: host /tmp invisible" test ! -e "/proc/$pid/root/tmp/host-tmp-file"
check "PrivateDevices: no /dev/sda-like nodes, /dev/null present" sh -c "in=\$(nsenter -t $pid -m -- ls /dev); case \"\$in\" in *console*|*tty1*) exit 1;; esac; echo \"\$in\" | grep -qx null"
# systemd grants LimitNOFILE= up to the hard limit it has itself (a container
# without CAP_SYS_RESOURCE may have less than the unit asks for).
nofile=$(awk '/^Max open files/ {print $4 "/" $5}' "/proc/$pid/limits")
ceiling=$(awk '/^Max open files/ {print $5}' /proc/1/limits)
want=$((ceiling < 65536 ? ceiling : 65536))
echo "nofile $nofile ceiling $ceiling" >/results/nofile
[[ $(prop LimitNOFILE) == 65536 && $nofile == "$want/$want" ]] &&
	pass "LimitNOFILE=65536, capped by the hard limit PID 1 has (process $nofile, PID 1 $ceiling)" ||
	fail "LimitNOFILE" "unit $(prop LimitNOFILE), process $nofile, PID 1 hard limit $ceiling"

# ---- reload re-reads the tokens file; auth under the unit -----------------
tok_a=token-aaaaaaaaaaaaaaaa tok_b=token-bbbbbbbbbbbbbbbb
printf 'alice %s\n' "$tok_a" >/etc/execd/tokens
chown root:execd /etc/execd/tokens && chmod 0640 /etc/execd/tokens
sed -i 's|^# auth_tokens_file = |auth_tokens_file = |' /etc/execd/config.toml
check "config with auth_tokens_file: restart" systemctl restart execd.service
wait_healthz "$url" 60 || fail "healthz after restart" "not within 60 s"
r=$(mcp_exec "$url" javascript w1 '1')
[[ $r == *http=401* ]] && pass "no token: 401" || fail "no token: 401" "$r"
r=$(mcp_exec "$url" javascript w1 '1+1' "$tok_a")
[[ $r == *'"result":"2"'* ]] && pass "token read from root:execd 0640 file" || fail "token from root:execd 0640 file" "$r"
printf 'alice %s\n' "$tok_b" >/etc/execd/tokens
since=$(date '+%Y-%m-%d %H:%M:%S')
check "systemctl reload execd" systemctl reload execd.service
for _ in $(seq 20); do journalctl -u execd.service --since "$since" --no-pager | grep -q 'auth tokens reloaded' && break; sleep 0.5; done
r_old=$(mcp_exec "$url" javascript w1 '1' "$tok_a")
r_new=$(mcp_exec "$url" javascript w1 '2+2' "$tok_b")
[[ $r_old == *http=401* && $r_new == *'"result":"4"'* ]] && pass "reload (SIGHUP) swaps tokens without a restart" ||
	fail "reload swaps tokens" "old: $r_old new: $r_new"

# ---- stop: SIGTERM, a running call is answered, exit 0 --------------------
MCP_MAX_TIME=60 mcp_exec "$url" javascript busy 'while (true) {}' "$tok_b" >/results/busy.out 2>&1 &
busy=$!
# The workspace's directory exists once execd has taken the call.
for _ in $(seq 100); do [[ -d /var/lib/execd/alice/busy ]] && break; sleep 0.1; done
check "systemctl stop execd" systemctl stop execd.service
wait "$busy"
r=$(cat /results/busy.out)
[[ $r == *'shutting down'* ]] && pass "a call running at stop is answered \"shutting down\"" || fail "running call answered at stop" "$r"
[[ $(prop Result) == success && $(prop ExecMainStatus) == 0 ]] && pass "stop within TimeoutStopSec, exit status 0" ||
	fail "stop within TimeoutStopSec, exit status 0" "Result=$(prop Result) ExecMainStatus=$(prop ExecMainStatus)"

# ---- counter-proof: MemoryDenyWriteExecute=yes --------------------------
# wazero probes whether it may map code executable (mprotect PROT_EXEC) and,
# if not, silently falls back to its interpreter: execd still answers, but
# guest code runs many times slower and nothing is compiled into the cache.
fib='function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) } fib(25)'
duration() { sed -n 's/.*"durationMs":\([0-9]*\).*/\1/p' | head -n1; }
systemctl start execd.service && wait_healthz "$url" 60
compiled_ms=$(mcp_exec "$url" javascript fib "$fib" "$tok_b" | duration)
systemctl stop execd.service
mkdir -p /run/systemd/system/execd.service.d
printf '[Service]\nMemoryDenyWriteExecute=yes\n' >/run/systemd/system/execd.service.d/mdwe.conf
systemctl daemon-reload
rm -rf /var/cache/execd/*
since=$(date '+%Y-%m-%d %H:%M:%S')
systemctl start execd.service && wait_healthz "$url" 60
r=$(mcp_exec "$url" javascript fib "$fib" "$tok_b")
interpreted_ms=$(duration <<<"$r")
journalctl -u execd.service --since "$since" --no-pager >/results/mdwe.journal 2>&1
echo "fib(25) compiled ${compiled_ms} ms, under MemoryDenyWriteExecute ${interpreted_ms} ms" >/results/mdwe
# Compiled guests only: base images (cache_dir/images) are made with or without a compiler.
cached=$(find /var/cache/execd -path /var/cache/execd/images -prune -o -type f -print | wc -l)
if [[ $(prop MemoryDenyWriteExecute) == yes && $r == *'"result":"75025"'* && $cached == 0 ]]; then
	pass "counter-proof: MemoryDenyWriteExecute=yes leaves wazero no compiler (0 compiled guests cached; fib(25) ${compiled_ms} ms -> ${interpreted_ms} ms)"
else fail "counter-proof: MemoryDenyWriteExecute" "property $(prop MemoryDenyWriteExecute), $cached compiled files cached, answer: $r"; fi
grep -q 'executable memory is refused' /results/mdwe.journal && pass "execd warns that the guests run interpreted" ||
	fail "execd warns that the guests run interpreted" "$(tail -n 5 /results/mdwe.journal)"
systemctl stop execd.service
rm -rf /run/systemd/system/execd.service.d
systemctl daemon-reload
