// End-to-end: long execute_code runs as MCP tasks through the MCP Inspector 2.12, in the legacy
// (2025-11-25) and the modern (2026-07-28) era, against execd with protocol.task_after = "1s".
//
//   node inspector_tasks.mjs http://127.0.0.1:PORT/mcp DATA_DIR
//
// DATA_DIR is the server's workspace.data_dir (no auth tokens: the principal is "local").
// The package directory comes from $E2E_INSPECTOR (setup.sh). The Inspector's one-shot CLI
// (`inspector --cli`) accepts no tasks/* method ("Unsupported method: tasks/get. Supported --cli
// methods: initialize, tools/list, tools/call, …") and has no --task flag; the package's
// connection CLI, mcpdo, has both: `tools/call --task` (legacy: params.task; modern: the server
// decides, and the Inspector declares the io.modelcontextprotocol/tasks extension on every
// request) and `tasks/get|cancel|result|list ID`. mcpdo runs one command at a time on a
// connection, so each era has two connections (the same server): "run" holds the tools/call,
// which polls its task to the end, and "ctl" asks about it meanwhile. A recording proxy in front
// of execd shows the era spoken and the task id of each call.
//
// Each era: (1) a cell that waits for a gate file becomes a task; tasks/get shows it working with
// the cell's latest progress() message; opening the gate completes it; tasks/get shows it
// completed, tasks/result returns the cell's output, and the run's own tools/call ends with it;
// (2) a looping cell's task is cancelled with tasks/cancel: tasks/get says cancelled, the
// tools/call ends without a result, and the next call to the workspace is answered at once with
// the variable set before the loop, the loop's counter no longer moving. Legacy also lists the
// tasks (tasks/list). Ends with "N passed, N failed"; exits 1 on any failure.

import http from 'node:http';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const target = new URL(process.argv[2] ?? '');
const dataDir = process.argv[3];
const INSPECTOR = process.env.E2E_INSPECTOR;
if (!INSPECTOR || !dataDir) {
  console.error('usage: E2E_INSPECTOR=... node inspector_tasks.mjs URL DATA_DIR');
  process.exit(2);
}
const MCPDO = join(INSPECTOR, 'clients/mcpdo/build/mcp-bin.js');
const RUN_TIMEOUT_MS = 90_000;

let passed = 0;
let failed = 0;
const short = (v) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 600 ? s.slice(0, 600) + '…' : s;
};
class CheckError extends Error {}
const assert = (c, m) => {
  if (!c) throw new CheckError(m);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, ms = 30_000) {
  for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(50)) {
    const v = fn();
    if (v) return v;
  }
  throw new CheckError(`timed out after ${ms} ms waiting for ${what}`);
}
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`PASS inspector-tasks ${name} (${Date.now() - t0} ms)`);
    return true;
  } catch (err) {
    failed++;
    console.log(`FAIL inspector-tasks ${name}: ${err instanceof CheckError ? err.message : err?.stack || err}`);
    return false;
  }
}

// --- recording proxy: requests and their responses' bodies ------------------------------------

const log = [];
const proxy = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    let msg;
    try {
      msg = body.length ? JSON.parse(body.toString()) : undefined;
    } catch {}
    const entry = { http: req.method, msg, rpc: msg?.method, version: req.headers['mcp-protocol-version'], name: req.headers['mcp-name'], response: '' };
    log.push(entry);
    const up = http.request(
      { host: target.hostname, port: target.port, path: target.pathname, method: req.method, headers: { ...req.headers, host: target.host } },
      (ur) => {
        entry.status = ur.statusCode;
        res.writeHead(ur.statusCode, ur.headers);
        ur.on('data', (d) => {
          if (entry.response.length < 1 << 20) entry.response += d;
          res.write(d);
        });
        ur.on('end', () => res.end());
      },
    );
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    res.on('close', () => up.destroy());
    up.end(body);
  });
});
await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
const proxyURL = `http://127.0.0.1:${proxy.address().port}${target.pathname}`;

// --- mcpdo with a private daemon -------------------------------------------------------------

const home = mkdtempSync(join(tmpdir(), 'execd-mcpdo-'));
const servers = join(home, 'servers.json');
const entry = (era) => ({ type: 'http', url: proxyURL, protocolEra: era });
writeFileSync(servers, JSON.stringify({ mcpServers: {
  'legacy-run': entry('legacy'), 'legacy-ctl': entry('legacy'), 'modern-run': entry('modern'), 'modern-ctl': entry('modern'),
} }));
const env = { ...process.env, HOME: home, MCP_INSPECTOR_SECRET_STORE: 'file', NO_COLOR: '1' };
delete env.MCP_CATALOG_PATH; // --config below names the servers; the two are exclusive

function mcpdo(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MCPDO, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      let json, error;
      try {
        json = JSON.parse(stdout);
      } catch {}
      // A failure is an error envelope, the last line of stderr.
      try {
        error = JSON.parse(stderr.trim().split('\n').pop()).error;
      } catch {}
      resolve({ code, signal, stdout, stderr, json, error });
    });
  });
}
// on(conn, ...args): an mcpdo command on a named connection, JSON out.
const on = (conn, ...args) => mcpdo(['--connection', conn, '--format', 'json', ...args]);
const said = (r) => `exit ${r.code ?? r.signal}: ${short(r.stdout || r.stderr)}`;

{
  const r = await mcpdo(['private']);
  for (const m of r.stdout.matchAll(/^export (\w+)='([^']*)'$/gm)) env[m[1]] = m[2];
  if (!env.MCP_INSPECTOR_DAEMON_DIR) {
    console.log(`FAIL inspector-tasks mcpdo private: ${said(r)}`);
    process.exit(1);
  }
}

// --- the cells ---------------------------------------------------------------------------------

// gateCell: writes a file (so the workspace's directory exists for the gate), sets x, reports
// progress while it waits (at most a minute) for /workspace/go, then prints a marker and returns x*6.
const gateCell = (marker) => [
  'import os, time',
  'from execd import progress',
  'open("started", "w").close()',
  'x = 7',
  'n = 0',
  't0 = time.time()',
  'while not os.path.exists("go") and time.time() - t0 < 60:',
  '    n += 1',
  '    progress(n, None, f"waiting for the gate {n}")',
  '    time.sleep(0.05)',
  `print("${marker}", os.path.exists("go"))`,
  'x * 6',
].join('\n');
// loopCell: sets x, then counts for ever (the cancel ends it).
const loopCell = [
  'import time',
  'from execd import progress',
  'x = 7',
  'n = 0',
  'while True:',
  '    n += 1',
  '    progress(n, None, f"looping {n}")',
  '    time.sleep(0.02)',
].join('\n');

// callInBackground starts tools/call on conn and returns the pending run and a function that
// waits for the call's task id as it crossed the proxy.
function callInBackground(era, conn, args) {
  const from = log.length;
  const flags = era === 'legacy' ? ['--task'] : [];
  const run = on(conn, 'tools/call', 'execute_code', ...flags, '--tool-args-json', JSON.stringify(args));
  const taskId = () =>
    until(`the task id of the ${args.workspace} call`, () => {
      for (const e of log.slice(from)) {
        if (e.rpc !== 'tools/call' || e.msg?.params?.arguments?.workspace !== args.workspace) continue;
        const m = /"taskId":"([^"]+)"/.exec(e.response);
        if (m) return { id: m[1], call: e };
      }
      return undefined;
    });
  return { run, taskId };
}

const taskOf = (r) => r.json?.task;

// --- the checks --------------------------------------------------------------------------------

try {
  for (const era of ['legacy', 'modern']) {
    const run = `${era}-run`;
    const ctl = `${era}-ctl`;
    const stamp = Date.now().toString(36);
    const ws = `${era}-gate-${stamp}`;
    const wsLoop = `${era}-loop-${stamp}`;
    const marker = `GATE-OPEN-${era}`;
    let gateTask;

    const connected = await check(`${era}: connect (the proxy sees ${era === 'legacy' ? 'initialize 2025-11-25' : 'server/discover, then 2026-07-28 requests'})`, async () => {
      for (const conn of [run, ctl]) {
        const from = log.length;
        const r = await mcpdo(['--config', servers, '--format', 'json', 'connect', conn]);
        assert(r.code === 0 && r.json?.protocolEra === era, `connect ${conn}: ${said(r)}`);
        const rpcs = log.slice(from).map((e) => e.rpc).filter(Boolean);
        if (era === 'legacy') {
          const init = log.slice(from).find((e) => e.rpc === 'initialize');
          assert(init?.msg?.params?.protocolVersion === '2025-11-25', `${conn}: no initialize with 2025-11-25: ${short(rpcs)}`);
        } else {
          assert(rpcs.includes('server/discover') && !rpcs.includes('initialize'), `${conn}: ${short(rpcs)}`);
        }
      }
    });

    if (!connected) continue; // the checks below need both connections

    await check(`${era}: a long execute_code becomes a task; tasks/get shows it working with its progress, then completed; tasks/result returns the cell's output`, async () => {
      const gate = join(dataDir, 'local', ws, 'go');
      const bg = callInBackground(era, run, { code: gateCell(marker), language: 'python', workspace: ws });
      const { id, call } = await bg.taskId();
      gateTask = id;
      if (era === 'legacy') {
        assert(call.msg.params.task && typeof call.msg.params.task === 'object', `the legacy tools/call carried no params.task: ${short(call.msg.params)}`);
      } else {
        const caps = call.msg.params._meta?.['io.modelcontextprotocol/clientCapabilities'];
        assert(caps?.extensions?.['io.modelcontextprotocol/tasks'], `the modern tools/call did not declare the tasks extension: ${short(call.msg.params._meta)}`);
        assert(/"resultType":"task"/.test(call.response), `the modern tools/call was not answered with a task: ${short(call.response)}`);
      }
      // working, with the cell's progress (the gate is still closed, so the run cannot have ended)
      let working;
      for (const t0 = Date.now(); Date.now() - t0 < 30_000; await sleep(100)) {
        const from = log.length;
        const r = await on(ctl, 'tasks/get', id);
        assert(r.code === 0, `tasks/get ${id}: ${said(r)}`);
        const sent = log.slice(from).find((e) => e.rpc === 'tasks/get');
        assert(sent?.msg.params?.taskId === id && (era === 'legacy' || sent.name === id), `tasks/get on the wire: ${short(sent && { params: sent.msg.params, mcpName: sent.name })}`);
        working = taskOf(r);
        assert(working?.taskId === id && working.status === 'working', `tasks/get before the gate opened: ${short(r.json)}`);
        if (/waiting for the gate \d+/.test(working.statusMessage ?? '')) break;
      }
      assert(/waiting for the gate \d+/.test(working?.statusMessage ?? ''), `statusMessage never carried the cell's progress: ${short(working)}`);

      writeFileSync(gate, '');
      const done = await bg.run;
      assert(done.code === 0, `the task's tools/call: ${said(done)}`);
      assert(done.json?.structuredContent?.stdout === `${marker} True\n` && done.json?.structuredContent?.result === '42',
        `the task's tools/call result is not the cell's: ${short(done.json)}`);

      const g = await on(ctl, 'tasks/get', id);
      assert(g.code === 0 && taskOf(g)?.status === 'completed', `tasks/get after the run: ${said(g)}`);
      const from = log.length;
      const res = await on(ctl, 'tasks/result', id);
      // Legacy has tasks/result; the extension has none: the result is inline in tasks/get.
      const sent = log.slice(from).filter((e) => e.rpc?.startsWith('tasks/'));
      const want = era === 'legacy' ? 'tasks/result' : 'tasks/get';
      assert(sent.some((e) => e.rpc === want && e.msg.params?.taskId === id), `the CLI's tasks/result sent no ${want} for ${id}: ${short(sent.map((e) => e.rpc))}`);
      assert(res.code === 0, `tasks/result ${id}: ${said(res)}`);
      const sc = res.json?.structuredContent;
      assert(sc?.stdout === `${marker} True\n` && sc?.result === '42' && sc?.status === 'ok' && res.json?.isError === false,
        `tasks/result is not the cell's result: ${short(res.json)}`);
      const text = res.json?.content?.find((c) => c.type === 'text')?.text ?? '';
      assert(text.includes(marker), `tasks/result's text content lacks the output: ${short(res.json?.content)}`);
    });

    await check(`${era}: tasks/cancel stops a running task; tasks/get says cancelled; the workspace keeps its variables and answers at once`, async () => {
      const bg = callInBackground(era, run, { code: loopCell, language: 'python', workspace: wsLoop });
      const { id } = await bg.taskId();
      let seen;
      for (const t0 = Date.now(); Date.now() - t0 < 30_000 && !seen; await sleep(100)) {
        const t = taskOf(await on(ctl, 'tasks/get', id));
        if (/looping \d+/.test(t?.statusMessage ?? '')) seen = t;
      }
      assert(seen?.status === 'working', `the looping task never reported its progress as working: ${short(seen)}`);

      const from = log.length;
      const c = await on(ctl, 'tasks/cancel', id);
      assert(c.code === 0 && c.json?.cancelled === true && c.json?.taskId === id, `tasks/cancel: ${said(c)}`);
      const sent = log.slice(from).find((e) => e.rpc === 'tasks/cancel');
      assert(sent?.msg.params?.taskId === id && sent.status === 200, `no tasks/cancel for ${id} answered 200 on the wire: ${short(sent)}`);
      if (era === 'modern') assert(sent.name === id, `tasks/cancel's Mcp-Name is ${short(sent.name)}, not the task id`);
      const g = await on(ctl, 'tasks/get', id);
      assert(taskOf(g)?.status === 'cancelled', `tasks/get after the cancel: ${said(g)}`);
      const ended = await bg.run;
      assert(ended.signal === null, `the cancelled task's tools/call did not end: ${said(ended)}`);
      assert(ended.code !== 0 && /cancelled/.test(ended.error?.message ?? ''), `the cancelled task's tools/call did not end as cancelled: ${said(ended)}`);

      // The run has stopped: the next call to the workspace is answered in-line (it would wait
      // behind a live loop and become a task of its own), x is still 7, and n no longer moves.
      const before = log.length;
      const a = await on(run, 'tools/call', 'execute_code', '--tool-args-json', JSON.stringify({ code: 'print(x); n', language: 'python', workspace: wsLoop }));
      assert(a.code === 0 && a.json?.structuredContent?.stdout === '7\n', `the next call to the workspace: ${said(a)}`);
      const n1 = Number(a.json.structuredContent.result);
      assert(n1 > 0, `n = ${a.json.structuredContent.result}`);
      const inline = log.slice(before).filter((e) => e.rpc === 'tools/call');
      assert(inline.length === 1 && !/"taskId"/.test(inline[0].response), `the call after the cancel became a task (the loop still ran?): ${short(inline.map((e) => e.response))}`);
      const b = await on(run, 'tools/call', 'execute_code', '--tool-args-json', JSON.stringify({ code: 'n', language: 'python', workspace: wsLoop }));
      assert(Number(b.json?.structuredContent?.result) === n1, `n moved after the cancel: ${n1} then ${short(b.json?.structuredContent)}`);
    });

    if (era === 'legacy') {
      await check('legacy: tasks/list lists the completed and the cancelled task', async () => {
        const r = await on(ctl, 'tasks/list');
        assert(r.code === 0 && Array.isArray(r.json?.tasks), `tasks/list: ${said(r)}`);
        const t = r.json.tasks.find((x) => x.taskId === gateTask);
        assert(t?.status === 'completed', `the gate task in tasks/list: ${short(r.json.tasks)}`);
        assert(r.json.tasks.some((x) => x.status === 'cancelled'), `no cancelled task in tasks/list: ${short(r.json.tasks)}`);
      });
    }
  }

} finally {
  await mcpdo(['daemon', 'stop']);
  rmSync(env.MCP_INSPECTOR_DAEMON_DIR, { recursive: true, force: true });
}
proxy.close();
proxy.closeAllConnections?.();
if (existsSync(home)) rmSync(home, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
