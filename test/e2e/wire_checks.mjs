// Wire-level checks of execd for rules that no client or conformance suite here exercises:
// modern-era cancellation (HTTP stream close, stdio notifications/cancelled), stdio era
// pinning, legacy session end, per-call timeouts, and (--auth) two principals: one token's
// parked input() waits stop at its share of the memory budget, in both eras, while the other
// token's calls go on.
//
//   node wire_checks.mjs --http URL
//   node wire_checks.mjs --stdio BIN [ARGS...]
//   node wire_checks.mjs --auth URL TOKEN_A TOKEN_B   (a server with server.auth_tokens_file, and
//                                                    limits.max_total_memory_mib = 64 and
//                                                    limits.max_memory_per_principal_mib = 32)
//   node wire_checks.mjs --session-ttl URL TTL_MS     (a server with protocol.session_idle_ttl)
//
// Every wait is bounded. Ends with "N passed, N failed"; exits 1 on any failure.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const argv = process.argv.slice(2);
const mode = argv[0];
if (!['--http', '--stdio', '--auth', '--session-ttl'].includes(mode)) {
  console.error('usage: wire_checks.mjs --http URL | --stdio BIN [ARGS...] | --auth URL TOKEN_A TOKEN_B | --session-ttl URL TTL_MS');
  process.exit(2);
}
const label = `wire-${mode.slice(2)}`;

const V = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const short = (v) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 500 ? s.slice(0, 500) + '…' : s;
};
class CheckError extends Error {}
const assert = (c, m) => {
  if (!c) throw new CheckError(m);
};

let passed = 0;
let failed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  let timer;
  try {
    await Promise.race([
      fn(),
      new Promise((_, rej) => (timer = setTimeout(() => rej(new CheckError('no verdict within 60 s')), 60_000))),
    ]);
    passed++;
    console.log(`PASS ${label} ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    failed++;
    console.log(`FAIL ${label} ${name}: ${err instanceof CheckError ? err.message : err?.stack || err}`);
  } finally {
    clearTimeout(timer);
  }
}

// --- HTTP ------------------------------------------------------------------------------------

// Parses an SSE or JSON body into JSON-RPC messages.
function parseBody(text, type) {
  if ((type ?? '').includes('text/event-stream')) {
    return text
      .split(/\r?\n\r?\n/)
      .map((ev) => ev.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n'))
      .filter((d) => d)
      .map((d) => JSON.parse(d));
  }
  return text ? [JSON.parse(text)] : [];
}

async function post(url, body, headers = {}, opts = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
    signal: opts.signal ?? AbortSignal.timeout(opts.timeout ?? 20_000),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, messages: parseBody(text, res.headers.get('content-type')), text };
}

function modernHeaders(method, name, workspace) {
  const h = { 'mcp-protocol-version': V, 'mcp-method': method };
  if (name) h['mcp-name'] = name;
  if (workspace) h['mcp-param-workspace'] = workspace;
  return h;
}

let nextId = 1;
function modernCall(url, args, extra = {}) {
  const id = nextId++;
  const body = { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_code', arguments: args, _meta: { ...META, ...(extra.meta ?? {}) } } };
  const headers = { ...modernHeaders('tools/call', 'execute_code', args.workspace), ...(extra.headers ?? {}) };
  return post(url, body, headers, extra).then((r) => ({ ...r, id }));
}

function finalResult(r, what) {
  const resp = r.messages.find((m) => m.id !== undefined && m.method === undefined);
  assert(r.status === 200, `${what}: HTTP ${r.status} ${short(r.text)}`);
  assert(resp?.result, `${what}: no result: ${short(r.text)}`);
  return resp.result;
}

async function httpChecks(url) {
  let ws;
  await check('modern tools/call 6*7 (resultType, serverInfo _meta)', async () => {
    const r = await modernCall(url, { code: 'var x = 41; 6*7', language: 'javascript' });
    const res = finalResult(r, '6*7');
    assert(res.resultType === 'complete', `resultType = ${short(res.resultType)}`);
    assert(res.structuredContent?.result === '42', `result = ${short(res.structuredContent)}`);
    assert(res._meta?.['io.modelcontextprotocol/serverInfo']?.name, `no serverInfo in result _meta: ${short(res._meta)}`);
    assert(!r.headers.get('mcp-session-id'), 'modern response carries Mcp-Session-Id');
    ws = res.structuredContent.workspace;
  });

  await check('modern stream close cancels the run; workspace state survives (closing the response stream is the cancel)', async () => {
    assert(ws, 'no workspace from the previous check');
    const ac = new AbortController();
    const pending = modernCall(url, { code: 'while (true) {}', language: 'javascript', workspace: ws }, { signal: ac.signal, meta: { progressToken: 'cancel-me' } }).catch((e) => e);
    await sleep(700);
    ac.abort();
    await pending;
    const t0 = Date.now();
    const r = await modernCall(url, { code: 'x+1', language: 'javascript', workspace: ws }, { timeout: 15_000 });
    const ms = Date.now() - t0;
    const res = finalResult(r, 'x+1');
    assert(!res.isError, `x+1 after close: isError ${short(res.structuredContent)}`);
    assert(String(res.structuredContent?.result) === '42', `x+1 = ${short(res.structuredContent?.result)}, want "42"`);
    assert(ms < 3_000, `call after the stream close took ${ms} ms (run not cancelled?)`);
  });

  await check('timeout_ms ends a run with isError status "timeout"; workspace survives', async () => {
    assert(ws, 'no workspace');
    const t0 = Date.now();
    const r = await modernCall(url, { code: 'while (true) {}', language: 'javascript', workspace: ws, timeout_ms: 500 }, { timeout: 15_000 });
    const ms = Date.now() - t0;
    const res = finalResult(r, 'timeout');
    assert(res.isError === true, `not isError: ${short(res)}`);
    assert(res.structuredContent?.status === 'timeout', `status = ${short(res.structuredContent?.status)}, want "timeout"`);
    assert(ms < 5_000, `timeout_ms 500 took ${ms} ms`);
    const again = finalResult(await modernCall(url, { code: 'x', language: 'javascript', workspace: ws }), 'x after timeout');
    assert(String(again.structuredContent?.result) === '41', `x after timeout = ${short(again.structuredContent?.result)}, want 41`);
  });

  const hb = Number(process.env.E2E_HEARTBEAT_MS || 0);
  if (hb > 0) {
    await check(`progress heartbeat every ${hb} ms on a silent run; strictly increasing; none after the result (progress increases on every frame, nothing after the response)`, async () => {
      const spin = hb * 3.5;
      const code = `const t = Date.now(); let n = 0; while (Date.now() - t < ${spin} && n < 200000000) { n++; } n > 0`;
      const r = await modernCall(url, { code, language: 'javascript' }, { meta: { progressToken: 'hb' }, timeout: 30_000 });
      const res = finalResult(r, 'heartbeat run');
      assert(!res.isError, `isError: ${short(res.structuredContent)}`);
      const idx = r.messages.findIndex((m) => m.id !== undefined);
      assert(idx === r.messages.length - 1, `messages after the result: ${short(r.messages.slice(idx + 1))}`);
      const prog = r.messages.filter((m) => m.method === 'notifications/progress');
      assert(prog.every((m) => m.params.progressToken === 'hb'), `token not echoed as the string "hb": ${short(prog)}`);
      const values = prog.map((m) => m.params.progress);
      assert(values.length >= 3, `${values.length} progress frames in a ${spin} ms silent run with a ${hb} ms heartbeat: ${short(prog)}`);
      for (let i = 1; i < values.length; i++) assert(values[i] > values[i - 1], `not strictly increasing: ${values}`);
    });
  }

  await check('modern Mcp-Param-Workspace mismatch → 400 -32020 (the header mirrors the x-mcp-header argument)', async () => {
    const id = nextId++;
    const body = { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_code', arguments: { code: '1', language: 'javascript', workspace: 'a' }, _meta: META } };
    const r = await post(url, body, modernHeaders('tools/call', 'execute_code', 'b'));
    assert(r.status === 400, `HTTP ${r.status}, want 400: ${short(r.text)}`);
    assert(r.messages[0]?.error?.code === -32020 && r.messages[0]?.id === id, `want -32020 with id ${id}: ${short(r.text)}`);
  });

  await check('legacy DELETE ends the session: 2xx, then 404 -32001 (an ended session is 404)', async () => {
    const init = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'wire', version: '1' } } });
    const sid = init.headers.get('mcp-session-id');
    assert(init.status === 200 && sid, `initialize: HTTP ${init.status}, session ${sid}`);
    assert(/^[\x21-\x7e]+$/.test(sid), `session id not visible ASCII: ${sid}`);
    const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    const n = await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
    assert(n.status === 202, `initialized: HTTP ${n.status}`);
    const del = await fetch(url, { method: 'DELETE', headers: h, signal: AbortSignal.timeout(10_000) });
    assert(del.status >= 200 && del.status < 300, `DELETE: HTTP ${del.status}`);
    const after = await post(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, h);
    assert(after.status === 404 && after.messages[0]?.error?.code === -32001, `after DELETE: HTTP ${after.status} ${short(after.text)}`);
  });

  await check('initialize with 2026-07-28 answers 2025-11-25 as a result (an unsupported version gets a supported one, as a result)', async () => {
    const r = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: V, capabilities: {}, clientInfo: { name: 'wire', version: '1' } } });
    assert(r.status === 200 && r.messages[0]?.result?.protocolVersion === '2025-11-25', `HTTP ${r.status} ${short(r.text)}`);
  });
}

async function authChecks(url, tokenA, tokenB) {
  const bearer = (t) => ({ authorization: `Bearer ${t}` });
  const ws = `shared-${Date.now()}`;
  const callAs = (token, code) => modernCall(url, { code, language: 'javascript', workspace: ws }, { headers: token ? bearer(token) : {} });

  await check('no or wrong bearer token → 401 with WWW-Authenticate', async () => {
    for (const t of [undefined, 'not-a-valid-token-at-all']) {
      const r = await callAs(t, '1');
      assert(r.status === 401, `token ${t ?? '(none)'}: HTTP ${r.status}, want 401: ${short(r.text)}`);
      assert(/^Bearer/i.test(r.headers.get('www-authenticate') ?? ''), `401 without WWW-Authenticate: Bearer`);
    }
  });

  await check('workspace names are scoped per principal', async () => {
    const a = finalResult(await callAs(tokenA, 'var secret = 7; secret'), 'principal A');
    assert(String(a.structuredContent?.result) === '7', `A: ${short(a.structuredContent)}`);
    const b = finalResult(await callAs(tokenB, 'typeof secret'), 'principal B');
    assert(!String(b.structuredContent?.result).includes('number'), `B sees A's variable in workspace ${ws}: ${short(b.structuredContent)}`);
    const a2 = finalResult(await callAs(tokenA, 'secret'), 'principal A again');
    assert(String(a2.structuredContent?.result) === '7', `A lost its state: ${short(a2.structuredContent)}`);
  });
}

// --- one principal's input() waits and another's calls (a principal's share of the memory) ---

const ELICIT = { elicitation: { form: {} } };
const PARK_TRIES = 60; // well past what a 32 MiB share holds (JavaScript: ~2.8 MiB a wait)
const SHARE_KEY = 'limits.max_memory_per_principal_mib';

// sseMessages: the complete events of an SSE buffer, parsed.
function sseMessages(buf) {
  const events = buf.split(/\r?\n\r?\n/);
  events.pop(); // the part after the last blank line is not complete yet
  return parseBody(events.join('\n\n') + '\n\n', 'text/event-stream');
}

// legacyPark posts a legacy tools/call on session h and reads its stream until the code asks
// for input (elicitation/create: {id, elicit, stream}, the stream left open) or the call is
// answered ({id, result}).
async function legacyPark(url, h, ws, code) {
  const id = nextId++;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 20_000);
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...h },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_code', arguments: { code, language: 'javascript', workspace: ws } } }),
    signal: ac.signal,
  });
  assert(res.status === 200, `legacy tools/call in ${ws}: HTTP ${res.status}`);
  if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    clearTimeout(timer);
    const msgs = parseBody(await res.text(), res.headers.get('content-type'));
    return { id, result: msgs.find((m) => m.id === id)?.result };
  }
  const stream = { reader: res.body.getReader(), buf: '', ac, timer };
  const dec = new TextDecoder();
  for (;;) {
    const { value, done } = await stream.reader.read();
    assert(!done, `legacy tools/call in ${ws}: the stream ended with neither a question nor a result: ${short(stream.buf)}`);
    stream.buf += dec.decode(value, { stream: true });
    const msgs = sseMessages(stream.buf);
    const elicit = msgs.find((m) => m.method === 'elicitation/create');
    if (elicit) {
      clearTimeout(timer);
      return { id, elicit, stream };
    }
    const fin = msgs.find((m) => m.id === id && m.method === undefined);
    if (fin) {
      clearTimeout(timer);
      ac.abort();
      return { id, result: fin.result };
    }
  }
}

// legacyFinish reads a parked call's stream to its result.
async function legacyFinish(p) {
  const dec = new TextDecoder();
  const timer = setTimeout(() => p.stream.ac.abort(), 20_000);
  try {
    for (;;) {
      const fin = sseMessages(p.stream.buf).find((m) => m.id === p.id && m.method === undefined);
      if (fin) return fin.result;
      const { value, done } = await p.stream.reader.read();
      assert(!done, `the stream of call ${p.id} ended without its result: ${short(p.stream.buf)}`);
      p.stream.buf += dec.decode(value, { stream: true });
    }
  } finally {
    clearTimeout(timer);
  }
}

const refusedForShare = (res) =>
  res?.isError === true && res.structuredContent?.status === 'error' && String(res.structuredContent?.error).includes(SHARE_KEY);

// shareChecks: alice parks input() waits, one workspace each, until execd refuses her next
// interpreter with an error naming limits.max_memory_per_principal_mib; meanwhile bob's calls
// (JavaScript and Python, both eras) succeed. Then alice's waits are answered and resume. The
// server runs with a small budget (max_total_memory_mib = 64, a 32 MiB share): without the share
// alice's waits would fill it and bob's calls would fail.
async function shareChecks(url, tokenA, tokenB) {
  const bearer = (t) => ({ authorization: `Bearer ${t}` });
  const stamp = Date.now().toString(36);
  let bobSession;
  const bobCalls = async (phase) => {
    bobSession ??= { ...(await legacySession(url, ELICIT, bearer(tokenB))), ...bearer(tokenB) };
    for (const [lang, code, want] of [['javascript', '6*7', '42'], ['python', 'sum(range(10))', '45']]) {
      const ws = `bob-${lang}-${stamp}`;
      const m = finalResult(await modernCall(url, { code, language: lang, workspace: ws }, { headers: bearer(tokenB) }), `bob's modern ${lang} call ${phase}`);
      assert(!m.isError && m.structuredContent?.result === want, `bob's modern ${lang} call ${phase}: ${short(m.structuredContent)}`);
    }
    const l = await post(url, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'execute_code', arguments: { code: '"bob" + 1', language: 'javascript', workspace: `bob-legacy-${stamp}` } } }, bobSession);
    const lr = finalResult(l, `bob's legacy call ${phase}`);
    assert(!lr.isError && lr.structuredContent?.result === '"bob1"', `bob's legacy call ${phase}: ${short(lr.structuredContent)}`);
  };

  await check(`2026-07-28: alice's input() waits stop at her share (the refusal names ${SHARE_KEY}); bob's calls in both eras succeed; alice's answered waits resume`, async () => {
    const parked = [];
    let refusal;
    for (let i = 0; i < PARK_TRIES && !refusal; i++) {
      const args = { code: `"got " + prompt("m${i}")`, language: 'javascript', workspace: `alice-m${i}-${stamp}` };
      const res = finalResult(await modernCall(url, args, { headers: bearer(tokenA), meta: { 'io.modelcontextprotocol/clientCapabilities': ELICIT } }), `alice's wait ${i}`);
      if (res.resultType === 'input_required') {
        assert(res.inputRequests?.input?.method === 'elicitation/create' && typeof res.requestState === 'string', `alice's wait ${i}: ${short(res)}`);
        parked.push({ args, state: res.requestState });
      } else {
        refusal = res;
      }
    }
    assert(refusal, `alice parked ${parked.length} input() waits and none was refused`);
    assert(parked.length >= 2, `alice was refused after ${parked.length} waits: ${short(refusal)}`);
    await bobCalls(`while alice's ${parked.length} waits are parked`);
    assert(refusedForShare(refusal), `alice's wait ${parked.length} was not refused for her share: ${short(refusal)}`);
    console.log(`  alice parked ${parked.length} waits; the next was refused: ${refusal.structuredContent.error}`);
    for (const [i, p] of parked.entries()) {
      const id = nextId++;
      const body = { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_code', arguments: p.args, _meta: { ...META, 'io.modelcontextprotocol/clientCapabilities': ELICIT }, requestState: p.state, inputResponses: { input: { action: 'accept', content: { value: `a${i}` } } } } };
      const res = finalResult(await post(url, body, { ...modernHeaders('tools/call', 'execute_code', p.args.workspace), ...bearer(tokenA) }), `alice's answer ${i}`);
      assert(res.resultType === 'complete' && res.structuredContent?.result === `"got a${i}"`, `alice's wait ${i} after its answer: ${short(res)}`);
    }
  });

  await check(`2025-11-25: alice's input() waits (elicitation/create on open streams) stop at her share (the refusal names ${SHARE_KEY}); bob's calls in both eras succeed; answered, the waits resume`, async () => {
    const aliceSession = { ...(await legacySession(url, ELICIT, bearer(tokenA))), ...bearer(tokenA) };
    const parked = [];
    let refusal;
    try {
      for (let i = 0; i < PARK_TRIES && !refusal; i++) {
        const p = await legacyPark(url, aliceSession, `alice-l${i}-${stamp}`, `"got " + prompt("l${i}")`);
        if (p.elicit) parked.push(p);
        else refusal = p.result;
      }
      assert(refusal, `alice parked ${parked.length} legacy input() waits and none was refused`);
      assert(parked.length >= 2, `alice was refused after ${parked.length} legacy waits: ${short(refusal)}`);
      await bobCalls(`while alice's ${parked.length} legacy waits are parked`);
      assert(refusedForShare(refusal), `alice's legacy wait ${parked.length} was not refused for her share: ${short(refusal)}`);
      console.log(`  alice parked ${parked.length} legacy waits; the next was refused`);
      for (const [i, p] of parked.entries()) {
        const a = await post(url, { jsonrpc: '2.0', id: p.elicit.id, result: { action: 'accept', content: { value: `b${i}` } } }, aliceSession);
        assert(a.status === 202, `alice's answer ${i}: HTTP ${a.status}`);
        const res = await legacyFinish(p);
        assert(!res?.isError && res?.structuredContent?.result === `"got b${i}"`, `alice's legacy wait ${i} after its answer: ${short(res)}`);
      }
    } finally {
      for (const p of parked) p.stream.ac.abort();
    }
  });
}

async function legacySession(url, capabilities = {}, headers = {}) {
  const init = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'wire', version: '1' } } }, headers);
  const sid = init.headers.get('mcp-session-id');
  assert(init.status === 200 && sid, `initialize: HTTP ${init.status}`);
  const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { ...h, ...headers });
  return h;
}

async function sessionTTLChecks(url, ttl) {
  await check(`a session busy longer than its ${ttl} ms idle TTL survives the call (idle time starts when the last call ends)`, async () => {
    const h = await legacySession(url);
    const spin = Math.round(ttl * 1.5);
    const code = `const t = Date.now(); let n = 0; while (Date.now() - t < ${spin} && n < 200000000) { n++; } 1`;
    const r = await post(url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_code', arguments: { code, language: 'javascript' } } }, h, { timeout: 30_000 });
    finalResult(r, 'busy call');
    const ping = await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, h);
    assert(ping.status === 200, `ping right after a ${spin} ms call: HTTP ${ping.status} ${short(ping.text)} (idle time counted while the call ran)`);
  });

  await check(`an idle session expires after ${ttl} ms: 404 -32001`, async () => {
    const h = await legacySession(url);
    await sleep(ttl * 2 + 200);
    const ping = await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, h);
    assert(ping.status === 404 && ping.messages[0]?.error?.code === -32001, `after ${ttl * 2 + 200} ms idle: HTTP ${ping.status} ${short(ping.text)}`);
  });
}

// --- stdio -----------------------------------------------------------------------------------

class StdioPeer {
  constructor(bin, args) {
    this.child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.lines = [];
    this.waiters = [];
    this.stderr = '';
    this.child.stderr.on('data', (d) => (this.stderr = (this.stderr + d).slice(-4000)));
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        msg = { unparseable: line };
      }
      this.lines.push({ at: Date.now(), msg });
      for (const w of [...this.waiters]) w();
    });
  }
  send(msg) {
    this.child.stdin.write(JSON.stringify(msg) + '\n');
  }
  async response(id, ms = 20_000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const hit = this.lines.find((l) => l.msg.id === id && l.msg.method === undefined);
      if (hit) return hit.msg;
      const left = deadline - Date.now();
      if (left <= 0) throw new CheckError(`no response to id ${short(id)} within ${ms} ms; stderr: ${this.stderr.slice(-500)}`);
      await new Promise((r) => {
        const t = setTimeout(r, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
      this.waiters = [];
    }
  }
  async request(method, params, ms) {
    const id = nextId++;
    this.send({ jsonrpc: '2.0', id, method, params });
    return this.response(id, ms);
  }
  // close ends stdin and waits for the process (SIGKILL after 5 s); returns {code, signal, ms}.
  async close() {
    const t0 = Date.now();
    const exited = this.child.exitCode !== null
      ? Promise.resolve([this.child.exitCode, this.child.signalCode])
      : new Promise((r) => this.child.once('exit', (code, signal) => r([code, signal])));
    this.child.stdin.end();
    const t = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    const [code, signal] = await exited;
    clearTimeout(t);
    return { code, signal, ms: Date.now() - t0 };
  }
}

async function stdioChecks(bin, args) {
  await check('modern stdio: discover, call, cancel stops the run with no reply (nothing is sent for a cancelled request)', async () => {
    const p = new StdioPeer(bin, args);
    try {
      const d = await p.request('server/discover', { _meta: META });
      assert(d.result?.supportedVersions?.includes(V), `discover: ${short(d)}`);
      const first = await p.request('tools/call', { name: 'execute_code', arguments: { code: 'var x = 41; 6*7', language: 'javascript' }, _meta: META });
      assert(first.result?.structuredContent?.result === '42' && first.result?.resultType === 'complete', `6*7: ${short(first)}`);
      const ws = first.result.structuredContent.workspace;
      const id = nextId++;
      p.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'while (true) {}', language: 'javascript', workspace: ws }, _meta: { ...META, progressToken: id } } });
      await sleep(700);
      const cancelAt = Date.now();
      p.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'wire check', _meta: META } });
      await sleep(1_000);
      const late = p.lines.filter((l) => l.at >= cancelAt && (l.msg.id === id || l.msg.params?.progressToken === id));
      assert(late.length === 0, `sent after the cancel: ${short(late.map((l) => l.msg))}`);
      const t0 = Date.now();
      const next = await p.request('tools/call', { name: 'execute_code', arguments: { code: 'x+1', language: 'javascript', workspace: ws }, _meta: META }, 15_000);
      const ms = Date.now() - t0;
      assert(String(next.result?.structuredContent?.result) === '42', `x+1 after cancel: ${short(next)}`);
      assert(ms < 3_000, `call after cancel took ${ms} ms`);
      const init = await p.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'w', version: '1' } });
      assert(init.error?.code === -32601, `initialize on a modern-pinned process: want -32601, got ${short(init)}`);
    } finally {
      await p.close();
    }
  });

  await check('legacy stdio: pinned, a claim gets -32600 (the first accepted message pins the era)', async () => {
    const p = new StdioPeer(bin, args);
    try {
      const ping = await p.request('ping', {});
      assert(ping.result && Object.keys(ping.result).length === 0, `unpinned ping: ${short(ping)}`);
      const init = await p.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'w', version: '1' } });
      assert(init.result?.protocolVersion === '2025-11-25', `initialize: ${short(init)}`);
      p.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      const d = await p.request('server/discover', { _meta: META });
      assert(d.error?.code === -32600, `discover on a legacy-pinned process: want -32600, got ${short(d)}`);
      const again = await p.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'w', version: '1' } });
      assert(again.error?.code === -32600, `second initialize: want -32600, got ${short(again)}`);
    } finally {
      await p.close();
    }
  });

  await check('stdio EOF with a run in flight: exits 0 promptly, no reply for it (EOF cancels everything in flight)', async () => {
    const p = new StdioPeer(bin, args);
    const init = await p.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'w', version: '1' } });
    assert(init.result, `initialize: ${short(init)}`);
    p.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const id = nextId++;
    p.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'while (true) {}', language: 'javascript' } } });
    await sleep(700);
    const { code, signal, ms } = await p.close();
    assert(code === 0, `exit code ${code ?? signal} after EOF (${ms} ms); stderr: ${p.stderr.slice(-300)}`);
    assert(ms < 5_000, `exit took ${ms} ms after EOF`);
    const reply = p.lines.find((l) => l.msg.id === id);
    if (reply) assert(reply.msg.result?.isError, `in-flight call answered as a success after EOF: ${short(reply.msg)}`);
  });

  await check('stdio: non-JSON line → -32700 with id null', async () => {
    const p = new StdioPeer(bin, args);
    try {
      p.child.stdin.write('not json\n');
      const r = await p.response(null, 10_000);
      assert(r.error?.code === -32700, `want -32700: ${short(r)}`);
    } finally {
      await p.close();
    }
  });
}

if (mode === '--http') await httpChecks(argv[1]);
else if (mode === '--auth') {
  await authChecks(argv[1], argv[2], argv[3]);
  await shareChecks(argv[1], argv[2], argv[3]);
}
else if (mode === '--session-ttl') await sessionTTLChecks(argv[1], Number(argv[2]));
else await stdioChecks(argv[1], argv.slice(2));

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
