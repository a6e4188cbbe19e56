# shellcheck shell=bash
# Shell helpers for deploy/check.sh and the scripts it runs inside a booted
# systemd and a container: one MCP call in the 2026-07-28 era, sessionless,
# with curl alone (no jq or python in those places). Source this file.

# mcp_exec BASE_URL LANGUAGE WORKSPACE CODE [TOKEN]: prints execd's answer
# (the SSE data line, or the JSON error body) and curl's HTTP status last, on
# a line of its own as "http=NNN". CODE must not contain a newline.
mcp_exec() {
	local url=$1 lang=$2 ws=$3 code=$4 token=${5:-} esc
	esc=$(printf '%s' "$code" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')
	local body='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code",'
	body+='"arguments":{"code":"'$esc'","language":"'$lang'","workspace":"'$ws'"},'
	body+='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
	local auth=()
	[[ -n $token ]] && auth=(-H "Authorization: Bearer $token")
	curl -sS --max-time "${MCP_MAX_TIME:-60}" -X POST "$url/mcp" \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		-H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: execute_code' \
		-H "Mcp-Param-Workspace: $ws" "${auth[@]}" -d "$body" -w '\nhttp=%{http_code}\n'
}

# wait_healthz BASE_URL TRIES: 0 once /healthz answers 200 (one try a second).
wait_healthz() {
	local url=$1 tries=$2 i
	for ((i = 0; i < tries; i++)); do
		curl -fsS -o /dev/null --max-time 2 "$url/healthz" 2>/dev/null && return 0
		sleep 1
	done
	return 1
}
