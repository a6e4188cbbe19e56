// End-to-end checks of execd with the MCP Inspector CLI in all three protocol eras.
//
//   node inspector.mjs http://127.0.0.1:PORT/mcp
//
// The Inspector package directory comes from $E2E_INSPECTOR (set by setup.sh). Each CLI run
// goes through a small recording proxy on 127.0.0.1 so that the era actually spoken can be
// asserted (legacy: initialize; auto and modern: server/discover and per-request _meta).
// Every run is bounded. Ends with "N passed, N failed"; exits 1 on any failure.

import http from 'node:http';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const target = new URL(process.argv[2] ?? '');
const INSPECTOR = process.env.E2E_INSPECTOR;
if (!INSPECTOR) {
  console.error('inspector: E2E_INSPECTOR is not set (source test/e2e/setup.sh)');
  process.exit(2);
}
const CLI = join(INSPECTOR, 'clients/launcher/build/index.js');
const CLAIM = 'io.modelcontextprotocol/protocolVersion';
const RUN_TIMEOUT_MS = 60_000;

let passed = 0;
let failed = 0;
const short = (v) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 500 ? s.slice(0, 500) + '…' : s;
};

// --- recording proxy -------------------------------------------------------------------------

let log = [];
const proxy = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    let msg;
    try {
      msg = body.length ? JSON.parse(body.toString()) : undefined;
    } catch {
      msg = undefined;
    }
    const entry = {
      http: req.method,
      rpc: msg?.method,
      id: msg?.id,
      claim: msg?.params?._meta ? CLAIM in msg.params._meta : false,
      headers: {
        version: req.headers['mcp-protocol-version'],
        method: req.headers['mcp-method'],
        name: req.headers['mcp-name'],
        session: req.headers['mcp-session-id'],
      },
      status: undefined,
    };
    log.push(entry);
    const headers = { ...req.headers, host: target.host };
    const up = http.request(
      { host: target.hostname, port: target.port, path: target.pathname + target.search, method: req.method, headers },
      (ur) => {
        entry.status = ur.statusCode;
        res.writeHead(ur.statusCode, ur.headers);
        ur.pipe(res);
      },
    );
    up.on('error', (err) => {
      entry.status = `proxy error: ${err.message}`;
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    res.on('close', () => up.destroy());
    up.end(body);
  });
});
await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
const proxyURL = `http://127.0.0.1:${proxy.address().port}${target.pathname}`;

// --- running the CLI -------------------------------------------------------------------------

const home = mkdtempSync(join(tmpdir(), 'execd-inspector-'));

function runCLI(extra) {
  return new Promise((resolve) => {
    const argv = [CLI, '--cli', proxyURL, '--format', 'json', '--connect-timeout', '15000', ...extra];
    const child = spawn(process.execPath, argv, {
      env: {
        ...process.env,
        HOME: home,
        MCP_CATALOG_PATH: join(home, 'mcp.json'),
        MCP_CLIENT_CONFIG_PATH: join(home, 'client.json'),
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

function parseJSON(out) {
  try {
    return JSON.parse(out);
  } catch {
    // tolerate leading noise: take the last line that parses
    for (const line of out.trim().split('\n').reverse()) {
      try {
        return JSON.parse(line);
      } catch {}
    }
  }
  return undefined;
}

function eraProblems(era, entries) {
  const problems = [];
  const posts = entries.filter((e) => e.http === 'POST' && e.rpc);
  const methods = posts.map((e) => e.rpc);
  const init = methods.includes('initialize');
  const discover = methods.includes('server/discover');
  if (era === 'legacy') {
    if (!init) problems.push('no initialize sent');
    if (posts.some((e) => e.claim)) problems.push('a request carried a modern _meta claim');
  } else {
    if (!discover) problems.push('no server/discover sent');
    if (init) {
      problems.push(`fell back to initialize (${era} should stay modern: discover offers 2026-07-28)`);
      return problems;
    }
    for (const e of posts.filter((e) => e.rpc && e.id !== undefined && e.rpc !== 'server/discover')) {
      if (!e.claim) problems.push(`${e.rpc} carried no _meta claim`);
    }
  }
  return problems;
}

const describeLog = (entries) =>
  entries.map((e) => `${e.http} ${e.rpc ?? '-'}${e.claim ? ' [modern]' : ''} -> ${e.status ?? '(open)'}`).join('; ');

async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`PASS inspector ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    failed++;
    console.log(`FAIL inspector ${name}: ${err.message}`);
  }
}

for (const era of ['legacy', 'auto', 'modern']) {
  await check(`${era} tools/list`, async () => {
    log = [];
    const r = await runCLI(['--protocol-era', era, '--method', 'tools/list']);
    const entries = log;
    const out = parseJSON(r.stdout);
    if (r.code !== 0) throw new Error(`exit ${r.code ?? r.signal}: ${short(r.stderr || r.stdout)}; wire: ${describeLog(entries)}`);
    const tools = out?.result?.tools ?? out?.tools;
    if (!Array.isArray(tools)) throw new Error(`no tools array in ${short(r.stdout)}`);
    const tool = tools.find((t) => t.name === 'execute_code');
    if (!tool) throw new Error(`execute_code not listed: ${short(tools.map((t) => t.name))}`);
    const problems = eraProblems(era, entries);
    if (problems.length) throw new Error(`${problems.join('; ')}; wire: ${describeLog(entries)}`);
  });

  await check(`${era} tools/call execute_code 6*7`, async () => {
    log = [];
    const r = await runCLI([
      '--protocol-era', era,
      '--method', 'tools/call',
      '--tool-name', 'execute_code',
      '--tool-args-json', '{"code":"6*7","language":"javascript"}',
    ]);
    const entries = log;
    const out = parseJSON(r.stdout);
    if (r.code !== 0) throw new Error(`exit ${r.code ?? r.signal}: ${short(r.stderr || r.stdout)}; wire: ${describeLog(entries)}`);
    const result = out?.result ?? out;
    if (result?.isError) throw new Error(`isError result: ${short(result)}`);
    const sc = result?.structuredContent;
    if (sc?.result !== '42') throw new Error(`structuredContent.result = ${short(sc?.result)}, want "42": ${short(r.stdout)}`);
    const problems = eraProblems(era, entries);
    if (problems.length) throw new Error(`${problems.join('; ')}; wire: ${describeLog(entries)}`);
    if (era !== 'legacy') {
      const call = entries.find((e) => e.rpc === 'tools/call');
      if (call?.headers.name !== 'execute_code') throw new Error(`tools/call without Mcp-Name: ${short(call)}`);
      if (call?.status !== 200) throw new Error(`tools/call answered HTTP ${call?.status}`);
    }
  });
}

proxy.close();
proxy.closeAllConnections?.();
rmSync(home, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
