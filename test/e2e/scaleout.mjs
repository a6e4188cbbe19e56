// End-to-end checks of several execd instances behind nginx (deploy/nginx).
//
//   node scaleout.mjs local  NGINX_URL DATA_DIR_1 DATA_DIR_2 DATA_DIR_3
//   node scaleout.mjs shared NGINX_URL INSTANCE_URL_1 INSTANCE_URL_2 INSTANCE_URL_3
//
// "local": each instance has a data directory of its own; "shared": the three
// share one (cluster.shared_storage). Instances are stopped and started by
// scaleout.sh between phases: this script prints "PHASE name" lines and waits for
// a line on stdin before each phase that needs the instances changed.
// A modern client is raw fetch with the 2026-07-28 headers; the legacy client is
// the TypeScript SDK ($E2E_SDK_NODE_PATH). Ends with "N passed, N failed".

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';

const SDK_DIR = process.env.E2E_SDK_NODE_PATH;
const sdk = (p) => import(pathToFileURL(join(SDK_DIR, '@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');

const [mode, url, ...rest] = process.argv.slice(2);
const V = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} };

let passed = 0, failed = 0;
class CheckError extends Error {}
const assert = (c, m) => { if (!c) throw new CheckError(m); };
const short = (v) => { const s = typeof v === 'string' ? v : JSON.stringify(v); return s && s.length > 300 ? s.slice(0, 300) + '…' : s; };
async function check(name, fn) {
  const t0 = Date.now();
  try {
    const note = await Promise.race([fn(), new Promise((_, rej) => setTimeout(() => rej(new CheckError('no end within 120 s')), 120_000))]);
    passed++; console.log(`PASS ${name} (${Date.now() - t0} ms)${note ? ': ' + note : ''}`);
  } catch (e) {
    failed++; console.log(`FAIL ${name}: ${e instanceof CheckError ? e.message : e.stack}`);
  }
}
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function phase(name) { console.log(`PHASE ${name}`); await lines.next(); }

let nextId = 1;
async function modern(target, args, opts = {}) {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
    'mcp-protocol-version': V, 'mcp-method': 'tools/call', 'mcp-name': 'execute_code' };
  if (args.workspace) headers['mcp-param-workspace'] = args.workspace;
  const body = { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'execute_code', arguments: { language: 'javascript', ...args }, _meta: META } };
  const res = await fetch(target, { method: 'POST', headers, body: JSON.stringify(body), signal: opts.signal ?? AbortSignal.timeout(opts.timeout ?? 30_000) });
  const text = await res.text();
  // A quick call is answered as JSON; one that streams, as SSE.
  const msgs = (res.headers.get('content-type') ?? '').startsWith('application/json') ? [JSON.parse(text)]
    : text.split(/\r?\n\r?\n/).map((ev) => ev.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('')).filter(Boolean).map((d) => JSON.parse(d));
  const r = msgs.find((m) => m.id !== undefined && !m.method);
  assert(res.status === 200 && r?.result, `modern call: HTTP ${res.status} ${short(text)}`);
  return r.result.structuredContent;
}

async function legacyClient() {
  const client = new Client({ name: 'scaleout-legacy', version: '1' });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport, call: async (args, opts = {}) => (await client.callTool({ name: 'execute_code', arguments: { language: 'javascript', ...args } }, undefined, { timeout: 30_000, ...opts })).structuredContent };
}

// owner is the instance whose own data directory holds the workspace ("local"):
// its files directory, made by its first write, so the cells below that must be
// found write one (MARK).
const owner = (ws) => rest.findIndex((d) => existsSync(join(d, 'local', ws)));
const MARK = 'fs.writeFile("mark", "");';
// onePerInstance: a spread-N workspace owned by each instance, in instance order.
const onePerInstance = () => [0, 1, 2].map((k) => {
  for (let i = 0; i < 100; i++) if (owner(`spread-${i}`) === k) return `spread-${i}`;
  throw new Error(`no spread workspace on instance ${k + 1}`);
});

if (mode === 'local') {
  const legacy = await legacyClient();
  await check('a modern and a legacy client share a named workspace through nginx', async () => {
    const a = await modern(url, { workspace: 'shared', code: `${MARK} var x = 41; var fromModern = "m"; x` });
    assert(a.status === 'ok' && a.result === '41', `modern set: ${short(a)}`);
    const b = await legacy.call({ workspace: 'shared', code: 'var fromLegacy = "l"; x + 1' });
    assert(b.status === 'ok' && b.result === '42', `legacy reads the modern client's x: ${short(b)}`);
    const c = await modern(url, { workspace: 'shared', code: 'fromLegacy + fromModern' });
    assert(c.status === 'ok' && c.result === '"lm"', `modern reads the legacy client's variable: ${short(c)}`);
    return `on instance ${owner('shared') + 1}, session ${legacy.transport.sessionId?.slice(0, 8)}…`;
  });
  await check('100 named workspaces spread over all three instances, each on exactly one', async () => {
    const counts = [0, 0, 0];
    for (let i = 0; i < 100; i++) {
      const ws = `spread-${i}`;
      const code = `${MARK} var n = ${i}; n`;
      const r = i % 2 ? await modern(url, { workspace: ws, code }) : await legacy.call({ workspace: ws, code });
      assert(r.status === 'ok' && r.result === String(i), `${ws}: ${short(r)}`);
      const on = rest.filter((d) => existsSync(join(d, 'local', ws))).length;
      assert(on === 1, `${ws} has a directory on ${on} instances`);
      counts[owner(ws)]++;
    }
    for (let i = 0; i < 100; i += 7) {
      const ws = `spread-${i}`;
      const r = i % 2 ? await legacy.call({ workspace: ws, code: 'n' }) : await modern(url, { workspace: ws, code: 'n' });
      assert(r.result === String(i), `${ws} again, other client: ${short(r)}`);
    }
    assert(counts.every((c) => c > 0), `per instance: ${counts}`);
    return `per instance ${counts.join(', ')}`;
  });
  await check('calls without a workspace go anywhere; the id each gets routes back to the instance that made it', async () => {
    const counts = [0, 0, 0];
    for (let i = 0; i < 24; i++) {
      const code = `${MARK} var made = ${i}; made`;
      const first = i % 2 ? await modern(url, { code }) : await legacy.call({ code });
      assert(first.status === 'ok' && first.workspace, `new workspace: ${short(first)}`);
      counts[owner(first.workspace)]++;
      const again = i % 2 ? await legacy.call({ workspace: first.workspace, code: 'made' }) : await modern(url, { workspace: first.workspace, code: 'made' });
      assert(again.status === 'ok' && again.result === String(i), `${first.workspace} again: ${short(again)}`);
    }
    assert(counts.filter((c) => c > 0).length >= 2, `new workspaces per instance: ${counts}`);
    return `new workspaces per instance ${counts.join(', ')}`;
  });
  await check('a legacy cancel (notifications/cancelled, no workspace in it) stops the run on whichever instance runs it', async () => {
    // Pick a workspace on another instance than the one the session was made on is
    // not knowable from outside; use three, one per instance.
    const targets = onePerInstance();
    for (const ws of targets) {
      const ac = new AbortController();
      const pending = legacy.call({ workspace: ws, code: 'while (true) {}' }, { signal: ac.signal, timeout: 60_000 }).catch((e) => e);
      await new Promise((r) => setTimeout(r, 700));
      ac.abort();
      await pending;
      const t0 = Date.now();
      const r = await modern(url, { workspace: ws, code: 'n' }, { timeout: 20_000 });
      assert(r.status === 'ok', `${ws} after the cancel: ${short(r)}`);
      assert(Date.now() - t0 < 15_000, `${ws}: the next call waited ${Date.now() - t0} ms (the cancelled run went on)`);
    }
    return `workspaces ${targets.join(', ')}`;
  });
  await check('a task is polled and cancelled through nginx on the instance that runs it (routed by its id)', async () => {
    const caps = { extensions: { 'io.modelcontextprotocol/tasks': {} } };
    const post = async (method, params, name) => {
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': V, 'mcp-method': method };
      if (name) headers['mcp-name'] = name;
      if (params.arguments?.workspace) headers['mcp-param-workspace'] = params.arguments.workspace;
      const body = { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: { ...META, 'io.modelcontextprotocol/clientCapabilities': caps } } };
      const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
      const text = await res.text();
      const data = text.startsWith('{') ? text : text.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).pop();
      return JSON.parse(data);
    };
    const counts = [0, 0, 0];
    const named = onePerInstance();
    for (let i = 0; i < 6; i++) {
      // Named workspaces, one on each instance, and new ones (their id and the
      // task's are both minted to route back).
      const args = { language: 'javascript', code: `${MARK} const t0 = Date.now(); while (Date.now() - t0 < 1200) {} 6 * 7` };
      if (i % 2) args.workspace = named[(i - 1) / 2];
      const made = await post('tools/call', { name: 'execute_code', arguments: args }, 'execute_code');
      const id = made.result?.taskId;
      assert(made.result?.resultType === 'task' && id, `call ${i} did not become a task: ${short(made)}`);
      let last;
      for (let n = 0; n < 100; n++) {
        last = await post('tasks/get', { taskId: id }, id);
        assert(last.result, `tasks/get ${n} of task ${i} was not routed to its instance: ${short(last)}`);
        if (last.result.status !== 'working') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert(last.result.status === 'completed' && last.result.result?.structuredContent?.result === '42', `task ${i}: ${short(last)}`);
      const ws = last.result.result.structuredContent.workspace;
      assert(!args.workspace || ws === args.workspace, `task ${i} ran in ${ws}, not ${args.workspace}`);
      counts[owner(ws)]++;
    }
    assert(counts.every((c) => c > 0), `every instance ran a task (a named workspace on each): per instance ${counts}`);
    const busy = await post('tools/call', { name: 'execute_code', arguments: { language: 'javascript', code: 'while (true) {}' } }, 'execute_code');
    const id = busy.result?.taskId;
    assert(id, `busy call: ${short(busy)}`);
    const ack = await post('tasks/cancel', { taskId: id }, id);
    assert(ack.result?.resultType === 'complete', `tasks/cancel through nginx: ${short(ack)}`);
    const after = await post('tasks/get', { taskId: id }, id);
    assert(after.result?.status === 'cancelled', `after the cancel: ${short(after)}`);
    return `tasks per instance ${counts.join(', ')}`;
  });
  const down = owner('shared');
  await legacy.client.close();
  await phase(`stop ${down + 1}`);
  await check('one instance stopped: its workspaces\' next calls succeed on the next instance, in a new empty workspace', async () => {
    const r = await modern(url, { workspace: 'shared', code: `${MARK} typeof x` });
    assert(r.status === 'ok' && r.result === '"undefined"', `after the stop: ${short(r)}`);
    const other = rest.findIndex((d, i) => i !== down && existsSync(join(d, 'local', 'shared')));
    assert(other >= 0, 'no other instance has the workspace');
    const l = await legacyClient();
    const lr = await l.call({ workspace: 'spread-0', code: 'typeof n' });
    assert(lr.status === 'ok', `legacy after the stop: ${short(lr)}`);
    await l.client.close();
    return `now on instance ${other + 1}`;
  });
  await phase(`start ${down + 1}`);
  await check('the stopped instance back: its workspaces return to it with their saved state', async () => {
    // nginx tries a failed server again after its fail_timeout (5 s in execd.conf).
    await new Promise((r) => setTimeout(r, 6000));
    const r = await modern(url, { workspace: 'shared', code: 'x + 1' });
    assert(r.status === 'ok' && r.result === '42', `after the restart: ${short(r)}`);
  });
} else {
  const direct = rest;
  await check('shared storage: one workspace used through two instances at once sees both calls (one at a time)', async () => {
    await modern(direct[0], { workspace: 'both', code: 'var log = []; log.length' });
    const slow = modern(direct[0], { workspace: 'both', code: 'const t0 = Date.now(); while (Date.now() - t0 < 1500) {} log.push("a"); log.length' });
    await new Promise((r) => setTimeout(r, 300));
    const fast = modern(direct[1], { workspace: 'both', code: 'log.push("b"); log.join("")' });
    const [a, b] = await Promise.all([slow, fast]);
    assert(a.status === 'ok' && b.status === 'ok', `${short(a)} ${short(b)}`);
    const r = await modern(direct[2], { workspace: 'both', code: 'log.join("")' });
    assert(r.result === '"ab"', `log after both: ${short(r)} (the second instance waited for the first: ${short(b)})`);
  });
  const legacy = await legacyClient();
  await check('shared storage: modern and legacy clients share a workspace through nginx', async () => {
    await modern(url, { workspace: 'kept', code: 'var x = 41; x' });
    const b = await legacy.call({ workspace: 'kept', code: 'x + 1' });
    assert(b.result === '42', short(b));
  });
  await legacy.client.close();
  await phase('stop owner');
  await check('shared storage: an instance stopped, its workspaces go on elsewhere with their variables', async () => {
    const r = await modern(url, { workspace: 'kept', code: 'x + 1' });
    assert(r.status === 'ok' && r.result === '42', short(r));
    const l = await legacyClient();
    const b = await l.call({ workspace: 'kept', code: 'x += 1; x' });
    assert(b.result === '42', short(b));
    await l.client.close();
  });
  await phase('kill another');
  await check('shared storage: an instance killed (SIGKILL) between calls loses nothing', async () => {
    const r = await modern(url, { workspace: 'kept', code: 'x' });
    assert(r.status === 'ok' && r.result === '42', short(r));
  });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
