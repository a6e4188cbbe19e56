#!/usr/bin/env bash
# deploy/check.sh: checks everything under deploy/ and prints
# "N passed, N failed" as its last line (exit status 1 on any failure).
#
#   bash deploy/check.sh                       # about a minute with warm caches
#   EXECD_CHECK_IMAGE=1 bash deploy/check.sh   # also builds and runs the image
#
#  1. deploy/check (Go): the Kubernetes manifests decoded strictly into
#     k8s.io/api types, every shipped config.toml loaded with execd's own
#     parser, and the facts that tie them together (ports, paths, grace
#     periods, memory sizing, security context, Containerfile).
#  2. systemd-analyze security --offline of deploy/systemd/execd.service.
#  3. deploy/container/healthcheck.sh against a real execd.
#  4. deploy/systemd/execd.service under systemd: a Debian tree made with
#     debootstrap is booted with systemd-nspawn (systemd as its PID 1, its own
#     network namespace), execd is installed as deploy/README.md says, and
#     test/systemd-inside.sh checks it serves and that every restriction
#     holds.
#  5. With EXECD_CHECK_IMAGE=1: test/image.sh builds deploy/Containerfile
#     with podman on a locally made Debian base and runs the image (the first
#     build compiles the guests: 10+ minutes on 2 cores).
#
# Installs what it lacks with apt (systemd, systemd-container, debootstrap,
# curl; for the image podman and runc); caches under
# ${EXECD_CACHE:-$HOME/.cache/execd}/deploy, never in the checkout.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(dirname "$here")
cache=${EXECD_CACHE:-$HOME/.cache/execd}/deploy
mkdir -p "$cache"
work=$(mktemp -d "$cache/run.XXXXXX")
host_pid=
cleanup() {
	[[ -n $host_pid ]] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
pass() { passed=$((passed + 1)); printf 'PASS %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }
say() { printf 'check.sh: %s\n' "$*" >&2; }
# tally FILE: counts the PASS/FAIL lines another script wrote.
tally() {
	local l
	while IFS= read -r l; do
		case $l in
		PASS\ *) pass "${l#PASS }" ;;
		FAIL\ *) fail "${l#FAIL }" ;;
		esac
	done <"$1"
}
finish() {
	echo "$passed passed, $failed failed"
	((failed == 0))
	exit
}

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
need_cmds() { # need_cmds PKG:CMD...: installs PKG when CMD is missing
	local missing=() pc
	for pc in "$@"; do command -v "${pc#*:}" >/dev/null || missing+=("${pc%%:*}"); done
	((${#missing[@]})) || return 0
	say "installing ${missing[*]}"
	as_root apt-get update -qq >/dev/null &&
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

need_cmds systemd:systemd-analyze systemd-container:systemd-nspawn debootstrap:debootstrap curl:curl ||
	{ fail "apt-get install of the tools"; finish; }
. "$here/test/mcp.sh"

# ---- the binary under test: execd as make build makes it, but static --------
guests=("$top"/sandbox/guests/{qjs.wasm,python.wasm,python-stdlib.zip})
if ! ls "${guests[@]}" >/dev/null 2>&1; then
	say "building the guests (make guests)"
	(cd "$top" && bash sandbox/build.sh && bash sandbox/build-python.sh) >&2 || { fail "make guests"; finish; }
fi
if (cd "$top" && CGO_ENABLED=0 go build -ldflags '-X main.version=deploy-check' -o "$work/execd" ./cmd/execd); then
	pass "execd builds static (CGO_ENABLED=0), as in the image"
else
	fail "go build ./cmd/execd"
	finish
fi

# ---- 1. manifests and configs ----------------------------------------------
say "go test in deploy/check"
(cd "$here/check" && go test -count=1 -v ./...) >"$work/gotest.log" 2>&1
rc=$?
grep -E '^--- (PASS|FAIL)' "$work/gotest.log" | sed -E 's/^--- (PASS|FAIL): ([^ ]+).*/\1 deploy\/check \2/' >"$work/gotest.tally"
tally "$work/gotest.tally"
if ((rc != 0)); then
	grep -q '^FAIL ' "$work/gotest.tally" || fail "deploy/check does not build: $(tail -5 "$work/gotest.log")"
	grep -E '^\s+\S+_test\.go:[0-9]+:' "$work/gotest.log" >&2
fi

# ---- 2. systemd-analyze security, offline -----------------------------------
out=$(systemd-analyze security --offline=true --threshold=15 --no-pager "$here/systemd/execd.service" 2>&1)
score=$(sed -n 's/.*Overall exposure level for execd.service: \([0-9.]*\).*/\1/p' <<<"$out")
if [[ -n $score ]] && systemd-analyze security --offline=true --threshold=15 --no-pager "$here/systemd/execd.service" >/dev/null 2>&1; then
	pass "systemd-analyze security --offline: exposure $score (at most 1.5)"
else
	fail "systemd-analyze security --offline: exposure ${score:-?} above 1.5: $(grep '✗' <<<"$out" | head -5)"
fi

# ---- 3. the image's healthcheck script against a real execd ------------------
mkdir -p "$work/host"
cat >"$work/host/config.toml" <<EOF
[server]
listen = "127.0.0.1:0"
shutdown_grace = "3s"
[workspace]
data_dir = "$work/host/data"
[sandbox]
cache_dir = "$cache/wazero"
EOF
"$work/execd" -config "$work/host/config.toml" 2>"$work/host/log" &
host_pid=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's|.*"url": "http://127.0.0.1:\([0-9]*\)/mcp".*|\1|p' "$work/host/log")
	[[ -n $port ]] && break
	kill -0 "$host_pid" 2>/dev/null || break
	sleep 0.2
done
hc=$here/container/healthcheck.sh
if [[ -n $port ]] && wait_healthz "http://127.0.0.1:$port" 30 && bash "$hc" "$port"; then
	pass "healthcheck.sh: 0 while execd serves"
else
	fail "healthcheck.sh while execd serves (port ${port:-none}): $(tail -3 "$work/host/log")"
fi
if [[ -n $port ]]; then
	MCP_MAX_TIME=30 mcp_exec "http://127.0.0.1:$port" javascript busy 'while (true) {}' >"$work/host/busy" 2>&1 &
	busy=$!
	for _ in $(seq 100); do [[ -d $work/host/data/local/busy ]] && break; sleep 0.1; done
	kill -TERM "$host_pid"
	unhealthy=no
	while kill -0 "$host_pid" 2>/dev/null; do
		if ! bash "$hc" "$port"; then unhealthy=yes; break; fi
		sleep 0.1
	done
	alive=no
	kill -0 "$host_pid" 2>/dev/null && alive=yes
	wait "$host_pid"
	rc=$?
	host_pid=
	wait "$busy"
	if [[ $unhealthy == yes && $alive == yes ]]; then
		pass "healthcheck.sh: non-zero while execd shuts down (a run still going)"
	else
		fail "healthcheck.sh during shutdown: unhealthy=$unhealthy, execd still running then=$alive"
	fi
	[[ $rc == 0 ]] && pass "SIGTERM with a run going: execd exits 0" || fail "SIGTERM: exit status $rc"
	bash "$hc" "$port" && fail "healthcheck.sh: 0 with no listener" || pass "healthcheck.sh: non-zero with no listener"
fi

# ---- 4. the unit under systemd -------------------------------------------------
exec 9>"$cache/lock"
flock 9
base=$(bash "$here/test/debian-base.sh" "$cache") || { fail "debootstrap of the Debian tree"; finish; }
sd_pkgs="systemd systemd-sysv dbus procps curl"
sd_root=$cache/systemd-bookworm-$(echo "$sd_pkgs" | sha256sum | cut -c1-12)
if [[ ! -f $sd_root.complete ]]; then
	say "making $sd_root ($sd_pkgs)"
	rm -rf "$sd_root" "$sd_root.tmp" && cp -a "$base" "$sd_root.tmp" &&
		chroot "$sd_root.tmp" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $sd_pkgs && apt-get clean && rm -rf /var/lib/apt/lists/*" >"$work/sd-root.log" 2>&1 &&
		mv "$sd_root.tmp" "$sd_root" && touch "$sd_root.complete" ||
		{ tail -5 "$work/sd-root.log" >&2; fail "making the systemd tree"; finish; }
fi
flock -u 9
mkdir -p "$work/results"
say "booting the systemd tree (systemd-nspawn) to run execd.service"
# nspawn needs a terminal for the container's console; script(1) provides one.
# --volatile=overlay: the tree is left as it was; --private-network: the
# container has its own loopback, so port 8765 is its own.
timeout 600 script -qec "systemd-nspawn -q -D '$sd_root' --volatile=overlay --register=no --keep-unit --private-network \
	--bind-ro='$here:/check/deploy' --bind-ro='$work/execd:/check/execd' --bind='$work/results:/results' \
	--bind-ro='$here/test/execd-check.service:/etc/systemd/system/execd-check.service' \
	-b systemd.wants=execd-check.service" /dev/null </dev/null >"$work/console.log" 2>&1
rc=$?
if [[ -s $work/results/report ]]; then
	tally "$work/results/report"
	grep -q '^FAIL' "$work/results/report" && sed 's/\x1b\[[0-9;]*m//g' "$work/console.log" | tail -20 >&2
	[[ -f $work/results/mdwe ]] && say "$(cat "$work/results/mdwe")"
else
	fail "systemd-nspawn boot (exit $rc): no report; console: $(sed 's/\x1b\[[0-9;]*m//g' "$work/console.log" | tail -5)"
fi

# ---- 5. the image (opt-in) --------------------------------------------------------
if [[ ${EXECD_CHECK_IMAGE:-} == 1 ]]; then
	need_cmds podman:podman runc:runc || { fail "apt-get install podman runc"; finish; }
	flock 9
	bash "$here/test/image.sh" "$top" "$cache" "$base" >"$work/image.tally"
	flock -u 9
	tally "$work/image.tally"
else
	say "image build and run skipped (EXECD_CHECK_IMAGE=1 to run them)"
fi
finish
