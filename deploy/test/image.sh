#!/usr/bin/env bash
# image.sh TOP CACHE BASE_TREE: builds deploy/Containerfile with podman and
# runs the image; prints one "PASS name" / "FAIL name: why" line per check
# (deploy/check.sh counts them), progress on stderr.
#
# No image registry is reachable here, so the base image is made locally: the
# Debian tree of debian-base.sh, imported as localhost/execd-debian:bookworm
# and given to both stages (DEBIAN, DEBIAN_SLIM build arguments).
set -uo pipefail
top=$1 cache=$2 tree=$3
. "$top/deploy/test/mcp.sh"

pass() { echo "PASS image: $1"; }
fail() { echo "FAIL image: $1: $2"; }
say() { printf 'image.sh: %s\n' "$*" >&2; }

tag=localhost/execd:check
base=localhost/execd-debian:bookworm
id=$$
name=execd-check-$id secret=execd-check-tokens-$id volume=execd-check-data-$id
work=$(mktemp -d "$cache/image.XXXXXX")
cleanup() {
	podman rm -f -v -t 0 "$name" >/dev/null 2>&1
	podman volume rm -f "$volume" >/dev/null 2>&1
	podman secret rm "$secret" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

# ---- podman that can start a container on this machine ------------------------
if ! podman image exists "$base"; then
	say "importing $tree as $base"
	tar -C "$tree" -c . | podman import -q --change 'CMD ["bash"]' - "$base" >/dev/null ||
		{ fail "podman import of the Debian tree" "failed"; exit 0; }
fi
if ! out=$(podman run --rm "$base" true 2>&1); then
	# Seen on machines without CAP_SYS_RESOURCE and with a hybrid cgroup
	# hierarchy: podman's default limits (1048576 open files) cannot be set,
	# and crun refuses hybrid cgroups. Use limits this process has, and runc.
	say "podman's defaults cannot start a container here ($out); retrying with $cache/containers.conf"
	cat >"$cache/containers.conf" <<-EOF
		[containers]
		default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=8192:8192"]
		[engine]
		runtime = "runc"
	EOF
	export CONTAINERS_CONF=$cache/containers.conf
	if ! out=$(podman run --rm "$base" true 2>&1); then
		fail "podman run of the base image" "$out"
		exit 0
	fi
fi
pass "podman runs a container (${CONTAINERS_CONF:+with $CONTAINERS_CONF, }runtime $(podman info --format '{{.Host.OCIRuntime.Name}}'))"

# ---- build ----------------------------------------------------------------------
ca=()
# The build reaches the Go module proxy; a host behind a TLS-intercepting
# proxy trusts it through its CA bundle, and so does the build.
[[ -f /etc/ssl/certs/ca-certificates.crt ]] && ca=(--secret "id=ca-certificates,src=/etc/ssl/certs/ca-certificates.crt")
say "podman build (the first build compiles the guests: 10+ minutes)"
start=$SECONDS
if podman build --format docker "${ca[@]}" --build-arg DEBIAN=$base --build-arg DEBIAN_SLIM=$base \
	-f "$top/deploy/Containerfile" -t "$tag" "$top" >"$work/build.log" 2>&1; then
	pass "podman build of deploy/Containerfile ($((SECONDS - start)) s)"
else
	fail "podman build" "$(tail -5 "$work/build.log")"
	exit 0
fi
inspect=$(podman image inspect "$tag")
size=$(podman image inspect --format '{{.Size}}' "$tag")
for want in '"User": "10001:10001"' '"/var/lib/execd": {}' '"8765/tcp": {}' '"/usr/local/bin/execd-healthcheck"'; do
	grep -qF "$want" <<<"$inspect" && pass "image config has $want" || fail "image config" "no $want"
done
say "image size $((size / 1000000)) MB"

# ---- without the tokens secret, execd refuses to start --------------------------
out=$(timeout 120 podman run --rm "$tag" 2>&1)
rc=$?
[[ $rc != 0 && $rc != 124 && $out == *auth_tokens_file* ]] &&
	pass "without the tokens secret the container exits ($rc) naming server.auth_tokens_file" ||
	fail "without the tokens secret" "exit $rc: $out"

# ---- a podman secret, as the README's first example ---------------------------
tok=token-cccccccccccccccc
printf 'alice %s\n' "$tok" | podman secret create "$secret" - >/dev/null
if podman run -d --name "$name" --secret "$secret,target=execd-tokens" -p 127.0.0.1::8765 "$tag" >/dev/null 2>"$work/run.err" &&
	wait_healthz "http://$(podman port "$name" 8765/tcp | head -n1)" 60; then
	r=$(mcp_exec "http://$(podman port "$name" 8765/tcp | head -n1)" javascript w1 '6*7' "$tok")
	[[ $r == *'"result":"42"'* ]] && pass "tokens from a podman secret" || fail "tokens from a podman secret" "$r"
else
	fail "podman run --secret" "$(cat "$work/run.err"; podman logs "$name" 2>&1 | tail -3)"
fi
podman rm -f -v -t 0 "$name" >/dev/null 2>&1

# ---- read-only root as in Kubernetes, tokens from a host directory ---------------
# (podman 4.3 cannot mount a --secret into a --read-only container: runc
# tries to create /run/secrets/<name> in the read-only root.)
mkdir -p "$work/secrets"
printf 'alice %s\n' "$tok" >"$work/secrets/execd-tokens"
chmod 0755 "$work/secrets" && chmod 0644 "$work/secrets/execd-tokens"
if ! podman run -d --name "$name" -v "$work/secrets:/run/secrets:ro" -v "$volume:/var/lib/execd" \
	--read-only --tmpfs /var/cache/execd:rw,U -p 127.0.0.1::8765 "$tag" >/dev/null 2>"$work/run.err"; then
	fail "podman run -d --read-only" "$(cat "$work/run.err")"
	exit 0
fi
hostport=$(podman port "$name" 8765/tcp | head -n1)
url=http://$hostport
if wait_healthz "$url" 60; then pass "/healthz 200 through the published port, read-only root"; else
	fail "/healthz" "not within 60 s: $(podman logs "$name" 2>&1 | tail -3)"
	exit 0
fi
podman healthcheck run "$name" >/dev/null 2>&1 && pass "podman healthcheck run: healthy (the image's HEALTHCHECK)" ||
	fail "podman healthcheck run" "unhealthy"
pid=$(podman inspect --format '{{.State.Pid}}' "$name")
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
[[ $uid == 10001 ]] && pass "execd runs as uid 10001" || fail "execd's uid" "$uid"
r=$(mcp_exec "$url" javascript w1 '6*7')
[[ $r == *http=401* ]] && pass "no token: 401" || fail "no token" "$r"
r=$(mcp_exec "$url" javascript w1 'let x = 6; x * 7' "$tok")
[[ $r == *'"result":"42"'* ]] && pass "JavaScript runs in the image" || fail "JavaScript" "$r"
r=$(mcp_exec "$url" python w1 "open('/workspace/note.txt', 'w').write('kept'); 6 * 7" "$tok")
[[ $r == *'"result":"42"'* ]] && pass "Python runs in the image and writes /workspace" || fail "Python" "$r"
tok2=token-eeeeeeeeeeeeeeee
printf 'alice %s\n' "$tok2" >"$work/secrets/execd-tokens.new" && mv "$work/secrets/execd-tokens.new" "$work/secrets/execd-tokens"
podman kill --signal HUP "$name" >/dev/null
for _ in $(seq 20); do podman logs "$name" 2>&1 | grep -q 'auth tokens reloaded' && break; sleep 0.5; done
r_old=$(mcp_exec "$url" javascript w1 '1' "$tok")
r_new=$(mcp_exec "$url" javascript w1 '2+2' "$tok2")
tok=$tok2
[[ $r_old == *http=401* && $r_new == *'"result":"4"'* ]] && pass "SIGHUP to execd as PID 1 swaps the tokens" ||
	fail "SIGHUP" "old token: $r_old new token: $r_new"

# ---- stop: a running call is answered, exit 0 --------------------------------------
MCP_MAX_TIME=60 mcp_exec "$url" javascript busy 'while (true) {}' "$tok" >"$work/busy" 2>&1 &
busy=$!
for _ in $(seq 100); do podman exec "$name" test -d /var/lib/execd/alice/busy 2>/dev/null && break; sleep 0.1; done
podman stop -t 30 "$name" >/dev/null
wait "$busy"
code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
[[ $code == 0 ]] && pass "podman stop -t 30: exit code 0" || fail "podman stop" "exit code $code"
grep -q 'shutting down' "$work/busy" && pass "a call running at stop is answered \"shutting down\"" ||
	fail "running call at stop" "$(cat "$work/busy")"

# ---- the volume keeps workspace files across a restart ------------------------------
podman start "$name" >/dev/null
hostport=$(podman port "$name" 8765/tcp | head -n1)
url=http://$hostport
wait_healthz "$url" 60
r=$(mcp_exec "$url" python w1 "open('/workspace/note.txt').read()" "$tok")
[[ $r == *"'kept'"* ]] && pass "workspace files survive a restart on the volume" || fail "volume" "$r"
exit 0
