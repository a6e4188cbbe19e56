#!/usr/bin/env bash
# Runs the official MCP conformance suites against a running bin/execd-conformance
# (cmd/execd-conformance: execd's front end with the suites' fixture tools, prompts and
# resources).
#
#   test/e2e/conformance.sh URL [legacy] [modern] [legacy-next] [tasks] [production]
#                                         (default: the first four, against the fixtures)
#
#   legacy  @modelcontextprotocol/conformance@0.1.16, all scenarios (active + pending),
#           2025-11-25 wire; baseline test/e2e/baseline-legacy.yml
#   modern  @modelcontextprotocol/conformance@0.2.0-alpha.12 --spec-version 2026-07-28,
#           all scenarios (the default "active" suite leaves out the draft scenarios,
#           which are the 2026-07-28 ones: server-stateless, caching, http-*, sep-2164,
#           input-required-*); baseline test/e2e/baseline-modern.yml
#   legacy-next  @modelcontextprotocol/conformance@0.2.0-alpha.12 --spec-version 2025-11-25,
#           all scenarios: the legacy wire again with the newer suite, which adds
#           server-session-lifecycle and schema-validates every message (wire-schema-valid);
#           baseline test/e2e/baseline-legacy-next.yml
#   tasks   @modelcontextprotocol/conformance@0.2.0-alpha.12's ten tasks-* scenarios (the
#           io.modelcontextprotocol/tasks extension; `conformance list` marks them
#           [extension], so --suite all leaves them out), one run each without --spec-version,
#           against the fixtures (greet, slow_compute, failing_job, protocol_error_job,
#           confirm_delete, multi_input, test_tool_with_task); no baseline: all must pass
#   production  against bin/execd itself (no fixtures): the 0.2.0-alpha.12 scenarios that
#           apply to a server without prompts or fixture tools, one by one, on both wires;
#           caching's prompts check is in test/e2e/baseline-production.yml
#
# A baseline lists only scenarios (or scenario:check-id) that cannot apply to execd, each
# with its reason. The suite fails on any unexpected failure or warning and on any stale
# baseline entry. Results go to $E2E_OUT (default: a temporary directory).
# Ends with "N passed, N failed" counting suites; exits 1 if any suite failed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -z "${E2E_NODE:-}" ]; then
  . "$here/setup.sh" || exit 1
fi
if [ $# -lt 1 ]; then
  echo "usage: $0 URL [legacy] [modern] [legacy-next]" >&2
  exit 2
fi
url="$1"; shift
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(legacy modern legacy-next tasks)
out="${E2E_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/execd-conformance.XXXXXX")}"
mkdir -p "$out"
suite_timeout="${E2E_CONFORMANCE_TIMEOUT:-900}"

ok=0; bad=0

# production URL: each scenario that applies to bin/execd, one run each, on its wire.
production() {
  local url="$1" spec sc rc=0 log args
  for spec in 2026-07-28 2025-11-25; do
    local list="tools-list resources-list dns-rebinding-protection server-sse-multiple-streams"
    if [ "$spec" = 2026-07-28 ]; then
      list="$list sep-2164-resource-not-found caching http-header-validation http-custom-header-server-validation"
    else
      list="$list server-initialize server-session-lifecycle ping logging-set-level"
    fi
    for sc in $list; do
      log="$out/production/$spec-$sc.log"
      args=(--scenario "$sc" --spec-version "$spec")
      [ "$sc" = caching ] && args+=(--expected-failures "$here/baseline-production.yml")
      mkdir -p "$out/production"
      if NO_COLOR=1 FORCE_COLOR=0 timeout --kill-after=10 300 "$E2E_NODE" "$E2E_CONFORMANCE_MODERN/dist/index.js" server \
          --url "$url" "${args[@]}" -o "$out/production/$spec-$sc" >"$log" 2>&1; then
        echo "  production $spec $sc: passed"
      else
        rc=1
        echo "  production $spec $sc: FAILED"
        sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E 'FAILURE|WARNING' | head -5
      fi
    done
  done
  return $rc
}

# tasks URL: the tasks-* scenarios, one run each.
tasks() {
  local url="$1" sc rc=0 log
  mkdir -p "$out/tasks"
  for sc in tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal \
      tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-status-notifications \
      tasks-required-task-error tasks-mrtr-composition; do
    log="$out/tasks/$sc.log"
    if NO_COLOR=1 FORCE_COLOR=0 timeout --kill-after=10 300 "$E2E_NODE" "$E2E_CONFORMANCE_MODERN/dist/index.js" server \
        --url "$url" --scenario "$sc" -o "$out/tasks/$sc" >"$log" 2>&1 &&
        ! sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -qE 'FAILURE|WARNING'; then
      echo "  tasks $sc: passed ($(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -oE 'Passed: [0-9]+/[0-9]+'))"
    else
      rc=1
      echo "  tasks $sc: FAILED"
      sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E 'FAILURE|WARNING|^Error' | head -5
    fi
  done
  return $rc
}

for suite in "${suites[@]}"; do
  if [ "$suite" = tasks ]; then
    echo "== conformance tasks (conformance 0.2.0-alpha.12, the tasks-* scenarios one by one) against $url"
    if tasks "$url"; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "conformance tasks: FAILED"; fi
    continue
  fi
  if [ "$suite" = production ]; then
    echo "== conformance production (conformance 0.2.0-alpha.12, scenario by scenario) against $url"
    if production "$url"; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "conformance production: FAILED"; fi
    continue
  fi
  case "$suite" in
    legacy)
      pkg="$E2E_CONFORMANCE_LEGACY"; baseline="$here/baseline-legacy.yml"
      args=(--suite all) ;;
    modern)
      pkg="$E2E_CONFORMANCE_MODERN"; baseline="$here/baseline-modern.yml"
      args=(--suite all --spec-version 2026-07-28) ;;
    legacy-next)
      pkg="$E2E_CONFORMANCE_MODERN"; baseline="$here/baseline-legacy-next.yml"
      args=(--suite all --spec-version 2025-11-25) ;;
    *) echo "conformance.sh: unknown suite $suite" >&2; exit 2 ;;
  esac
  rm -rf "${out:?}/$suite"
  log="$out/$suite.log"
  ver="$(sed -n 's/^  "version": *"\([^"]*\)".*/\1/p' "$pkg/package.json")"
  echo "== conformance $suite (conformance@$ver) against $url"
  NO_COLOR=1 FORCE_COLOR=0 timeout --kill-after=10 "$suite_timeout" \
    "$E2E_NODE" "$pkg/dist/index.js" server --url "$url" "${args[@]}" \
    --expected-failures "$baseline" -o "$out/$suite" >"$log" 2>&1
  rc=$?
  "$E2E_NODE" "$here/conformance_summary.mjs" "$suite" "$out/$suite" "$baseline"
  if [ $rc -eq 0 ]; then
    ok=$((ok + 1))
  else
    bad=$((bad + 1))
    [ $rc -eq 124 ] && echo "conformance $suite: timed out after ${suite_timeout}s"
    # Errors of the CLI itself (bad baseline file, a scenario that crashed).
    sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E 'Invalid expected-failures|Failed to run scenario|^Error' | head -20
    echo "conformance $suite: FAILED (exit $rc; full log $log)"
  fi
done
echo "conformance: results in $out"
echo "$ok passed, $bad failed"
[ $bad -eq 0 ]
