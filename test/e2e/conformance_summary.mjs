// Summarises one conformance run from its output directory (one checks.json per scenario).
//
//   node conformance_summary.mjs SUITE_LABEL OUTPUT_DIR BASELINE.yml
//
// A scenario fails when any check is FAILURE or WARNING (the suite's own rule). Baseline
// entries are "scenario" or "scenario:check-id" items under "server:". Prints every check
// that did not pass, then one line:
//   conformance SUITE: S scenarios passed, U failed, E expected (baseline), T stale; checks: ...
// The exit code is not set here: the conformance CLI's own exit code decides.

import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const [label, dir, baselinePath] = process.argv.slice(2);

function readBaseline(path) {
  const whole = new Set();
  const checks = new Set();
  if (!path || !existsSync(path)) return { whole, checks };
  let inServer = false;
  for (const raw of readFileSync(path, 'utf8').split('\n')) {
    const line = raw.replace(/\s+#.*$/, '').replace(/^#.*$/, '');
    if (/^\S/.test(line)) inServer = /^server:\s*$/.test(line);
    const m = inServer && line.match(/^\s*-\s*['"]?([^'"\s]+)['"]?\s*$/);
    if (!m) continue;
    (m[1].includes(':') ? checks : whole).add(m[1]);
  }
  return { whole, checks };
}

const bad = (c) => c.status === 'FAILURE' || c.status === 'WARNING';
const baseline = readBaseline(baselinePath);
const scenarios = new Map();
if (existsSync(dir)) {
  for (const d of readdirSync(dir).sort()) {
    const f = join(dir, d, 'checks.json');
    if (!existsSync(f)) continue;
    const name = d.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
    try {
      scenarios.set(name, JSON.parse(readFileSync(f, 'utf8')));
    } catch (err) {
      scenarios.set(name, [{ id: 'checks.json', status: 'FAILURE', errorMessage: `unreadable: ${err.message}` }]);
    }
  }
}

let sPass = 0;
let sFail = 0;
let sExpected = 0;
let stale = 0;
const counts = { SUCCESS: 0, FAILURE: 0, WARNING: 0, SKIPPED: 0, INFO: 0 };
const lines = [];
for (const [name, checks] of scenarios) {
  for (const c of checks) counts[c.status] = (counts[c.status] ?? 0) + 1;
  const failing = checks.filter(bad);
  const wholeExpected = baseline.whole.has(name);
  const unexpected = failing.filter((c) => !wholeExpected && !baseline.checks.has(`${name}:${c.id}`));
  for (const key of baseline.checks) {
    const [sc, id] = [key.slice(0, key.indexOf(':')), key.slice(key.indexOf(':') + 1)];
    if (sc === name && checks.find((c) => c.id === id)?.status === 'SUCCESS') {
      stale++;
      lines.push(`  STALE    ${key} now passes: remove it from the baseline`);
    }
  }
  if (failing.length === 0) {
    if (wholeExpected) {
      stale++;
      lines.push(`  STALE    ${name} now passes: remove it from the baseline`);
    } else sPass++;
    continue;
  }
  if (unexpected.length === 0) {
    sExpected++;
    lines.push(`  EXPECTED ${name} (${failing.map((c) => c.id).join(', ')})`);
    continue;
  }
  sFail++;
  lines.push(`  FAILED   ${name}`);
  for (const c of unexpected) {
    const details = c.details ? ` details=${JSON.stringify(c.details).slice(0, 600)}` : '';
    lines.push(`           ${c.status} ${c.id}: ${c.errorMessage ?? c.description ?? ''}${details}`);
  }
}

if (lines.length) console.log(lines.join('\n'));
console.log(
  `conformance ${label}: ${sPass} scenarios passed, ${sFail} failed, ${sExpected} expected (baseline), ${stale} stale; ` +
    `checks: ${counts.SUCCESS} success, ${counts.FAILURE} failure, ${counts.WARNING} warning, ${counts.SKIPPED} skipped`,
);
