#!/bin/bash
# execd-healthcheck [PORT]: exits 0 when execd's /healthz on 127.0.0.1:PORT
# (default 8765) answers 200, 1 otherwise (503 while shutting down, no
# answer, no listener). The image's HEALTHCHECK; it needs nothing but bash,
# which the runtime image has and curl would add to it.
port=${1:-8765}
{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || exit 1
printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$port" >&3 || exit 1
read -r -t 2 _ status _ <&3 || exit 1
[[ $status == 200 ]]
