// End-to-end checks of execd with the TypeScript SDK client (legacy era).
//
//   node sdk_client.mjs http://127.0.0.1:PORT/mcp
//   node sdk_client.mjs --stdio /path/to/execd [-flag ...]
//
// The SDK is loaded from $E2E_SDK_NODE_PATH (a node_modules directory, set by setup.sh).
// Every wait is bounded. Prints one line per check and ends with "N passed, N failed";
// exits 1 if any check failed.

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

const SDK_DIR = process.env.E2E_SDK_NODE_PATH;
if (!SDK_DIR) {
  console.error('sdk_client: E2E_SDK_NODE_PATH is not set (source test/e2e/setup.sh)');
  process.exit(2);
}
const sdk = (p) => import(pathToFileURL(join(SDK_DIR, '@modelcontextprotocol/sdk/dist/esm', p)).href);

const args = process.argv.slice(2);
if (args.length === 0) {
  console.error('usage: sdk_client.mjs URL | --stdio BIN [ARGS...]');
  process.exit(2);
}
const stdioMode = args[0] === '--stdio';
const label = stdioMode ? 'sdk-stdio' : 'sdk-http';

const { Client } = await sdk('client/index.js');
const { McpError } = await sdk('types.js');

let passed = 0;
let failed = 0;

class CheckError extends Error {}
function assert(cond, msg) {
  if (!cond) throw new CheckError(msg);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const short = (v) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 400 ? s.slice(0, 400) + '…' : s;
};

// withTimeout bounds a promise so that a silent server cannot hang the run.
function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, rej) => {
      timer = setTimeout(() => rej(new CheckError(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function check(name, fn) {
  const t0 = Date.now();
  try {
    const note = await withTimeout(Promise.resolve().then(fn), 60_000, name);
    passed++;
    console.log(`PASS ${label} ${name} (${Date.now() - t0} ms${note ? `; ${note}` : ''})`);
  } catch (err) {
    failed++;
    const msg = err instanceof CheckError ? err.message : err?.stack || String(err);
    console.log(`FAIL ${label} ${name}: ${msg}`);
  }
}

// --- transport with a raw message log -------------------------------------------------------

let transport;
let stderrBuf = '';
if (stdioMode) {
  const { StdioClientTransport } = await sdk('client/stdio.js');
  transport = new StdioClientTransport({
    command: args[1],
    args: args.slice(2),
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (d) => {
    stderrBuf = (stderrBuf + d.toString()).slice(-8000);
  });
} else {
  const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
  transport = new StreamableHTTPClientTransport(new URL(args[0]));
}

// Every message the transport delivers or sends, with a timestamp, in order.
const inbound = [];
const outbound = [];

const client = new Client({ name: 'execd-e2e', version: '0.0.1' }, { capabilities: {} });

function tapTransport() {
  const onmessage = transport.onmessage;
  transport.onmessage = (msg, extra) => {
    inbound.push({ at: Date.now(), msg });
    onmessage?.(msg, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    outbound.push({ at: Date.now(), msg });
    return send(msg, opts);
  };
}

function lastSentCall() {
  for (let i = outbound.length - 1; i >= 0; i--) {
    const m = outbound[i].msg;
    if (m.method === 'tools/call') return m;
  }
  return undefined;
}

// Messages that belong to request id: its response, or progress with its token.
const belongsTo = (m, id) =>
  (m.id === id && m.method === undefined) ||
  (m.method === 'notifications/progress' && m.params?.progressToken === id);

// --- helpers around execute_code -------------------------------------------------------------

async function execute(code, opts = {}) {
  const args = { code, language: opts.language ?? 'javascript' };
  if (opts.workspace) args.workspace = opts.workspace;
  const reqOpts = { timeout: opts.timeout ?? 30_000 };
  if (opts.onprogress) reqOpts.onprogress = opts.onprogress;
  if (opts.signal) reqOpts.signal = opts.signal;
  return client.callTool({ name: 'execute_code', arguments: args }, undefined, reqOpts);
}

function structured(res, what) {
  const sc = res?.structuredContent;
  assert(sc && typeof sc === 'object', `${what}: no structuredContent in ${short(res)}`);
  return sc;
}

function expectOk(res, what) {
  const sc = structured(res, what);
  assert(!res.isError, `${what}: isError result: ${short(sc)}`);
  return sc;
}

// --- checks ----------------------------------------------------------------------------------

let toolDef;
let ws;

await check('connect', async () => {
  await withTimeout(client.connect(transport), 15_000, 'connect');
  tapTransport();
  const caps = client.getServerCapabilities();
  assert(caps?.tools, `server capabilities lack tools: ${short(caps)}`);
  const info = client.getServerVersion();
  assert(info?.name && info?.version, `serverInfo lacks name/version: ${short(info)}`);
});

if (failed > 0) {
  console.log(stdioMode && stderrBuf ? `server stderr:\n${stderrBuf}` : '');
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(1);
}

await check('tools/list', async () => {
  const res = await client.listTools();
  toolDef = res.tools.find((t) => t.name === 'execute_code');
  assert(toolDef, `execute_code missing from ${short(res.tools.map((t) => t.name))}`);
  assert(typeof toolDef.description === 'string' && toolDef.description, 'execute_code has no description');
  const props = toolDef.inputSchema?.properties ?? {};
  for (const p of ['code', 'language', 'workspace']) assert(props[p], `inputSchema lacks property ${p}`);
  assert(props.workspace['x-mcp-header'] === 'Workspace', `workspace lacks "x-mcp-header":"Workspace": ${short(props.workspace)}`);
  const req = toolDef.inputSchema.required ?? [];
  assert(req.includes('code') && req.includes('language'), `required should list code and language: ${short(req)}`);
  // No outputSchema: a result with images has no structuredContent, which the SDK refuses
  // when the tool declares a schema.
  assert(toolDef.outputSchema === undefined, `execute_code declares an outputSchema: ${short(toolDef.outputSchema)}`);
});

await check('an image the code shows reaches the client', async () => {
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
  const bytes = [...Buffer.from(png, 'base64')].join(',');
  const res = await execute(`show(new Uint8Array([${bytes}])); "drawn"`);
  assert(!res.isError, `show() failed: ${short(res)}`);
  assert(res.structuredContent === undefined, `a result with an image has structuredContent: ${short(res)}`);
  const img = res.content?.find((b) => b.type === 'image');
  assert(img?.mimeType === 'image/png' && img.data === png, `no image block with the PNG: ${short(res.content)}`);
  const parsed = JSON.parse(res.content?.[0]?.text ?? 'null');
  assert(parsed?.result === '"drawn"' && parsed.images === 1, `the text block: ${short(res.content?.[0])}`);
});

await check('execute_code 6*7', async () => {
  const res = await execute('6*7');
  const sc = expectOk(res, '6*7');
  assert(sc.result === '42', `structuredContent.result = ${short(sc.result)}, want "42"`);
  assert(typeof sc.workspace === 'string' && sc.workspace, `no workspace id: ${short(sc)}`);
  for (const [k, type] of [['stdout', 'string'], ['stderr', 'string'], ['status', 'string'], ['language', 'string'], ['durationMs', 'number'], ['truncated', 'boolean']]) {
    assert(typeof sc[k] === type, `structuredContent.${k} is ${short(sc[k])}, want a ${type}`);
  }
  assert(Number.isInteger(sc.durationMs), `durationMs is not an integer: ${sc.durationMs}`);
  assert(sc.language === 'javascript', `language = ${short(sc.language)}`);
  const text = res.content?.[0];
  assert(text?.type === 'text', `content[0] is not a text block: ${short(res.content)}`);
  let parsed;
  try {
    parsed = JSON.parse(text.text);
  } catch {
    throw new CheckError(`content[0].text is not JSON: ${short(text.text)}`);
  }
  assert(isDeepStrictEqual(parsed, sc), `content[0].text differs from structuredContent: ${short(text.text)} vs ${short(sc)}`);
});

await check('execution error is an isError result', async () => {
  const res = await execute('1', { language: 'cobol' });
  const sc = structured(res, 'cobol');
  assert(res.isError === true, `unsupported language did not give isError: ${short(res)}`);
  assert(typeof sc.error === 'string' && sc.error, `structuredContent.error is empty: ${short(sc)}`);
  const parsed = JSON.parse(res.content?.[0]?.text ?? 'null');
  assert(isDeepStrictEqual(parsed, sc), `content[0].text differs from structuredContent on isError`);
});

await check('unknown tool is JSON-RPC -32602', async () => {
  try {
    const res = await client.callTool({ name: 'no_such_tool', arguments: {} }, undefined, { timeout: 10_000 });
    throw new CheckError(`expected a JSON-RPC error, got a result: ${short(res)}`);
  } catch (err) {
    if (err instanceof CheckError) throw err;
    assert(err instanceof McpError && err.code === -32602, `expected McpError -32602, got ${err?.code} ${err?.message}`);
  }
});

await check('progress notifications in order', async () => {
  const code = [
    'let steps = 0;',
    'for (let i = 1; i <= 5; i++) {',
    '  const t = Date.now(); let n = 0;',
    '  while (Date.now() - t < 300 && n < 20000000) { n++; }',
    '  progress(i, 5, "step");',
    '  steps++;',
    '}',
    'steps',
  ].join('\n');
  const seen = [];
  const start = inbound.length;
  const res = await execute(code, { onprogress: (p) => seen.push(p) });
  const sc = expectOk(res, 'progress loop');
  assert(String(sc.result) === '5', `result = ${short(sc.result)}, want "5"`);
  const id = lastSentCall()?.id;
  const mine = inbound.slice(start).map((e) => e.msg).filter((m) => belongsTo(m, id));
  const respIdx = mine.findIndex((m) => m.method === undefined);
  const progress = mine.filter((m) => m.method === 'notifications/progress');
  assert(respIdx >= 0, 'response not seen in the raw log');
  assert(progress.length >= 2, `want at least 2 progress notifications, got ${progress.length}`);
  const late = mine.slice(respIdx + 1);
  assert(late.length === 0, `messages after the response: ${short(late)}`);
  const values = progress.map((m) => m.params.progress);
  for (let i = 1; i < values.length; i++) {
    assert(values[i] > values[i - 1], `progress not strictly increasing: ${short(values)}`);
  }
  for (const m of progress) {
    assert(typeof m.params.progressToken === typeof id, `progressToken type ${typeof m.params.progressToken}, sent ${typeof id}`);
    if (m.params.total !== undefined) assert(m.params.progress <= m.params.total, `progress above total: ${short(m.params)}`);
  }
  // The SDK dispatches notifications a tick after responses, so the last one may not reach onprogress.
  assert(seen.length >= 1, 'onprogress was never called');
  return `progress ${values.join(',')} of ${progress[0].params.total ?? '?'}`;
});

await check('workspace state survives a call', async () => {
  const res = await execute('var x = 41; x');
  const sc = expectOk(res, 'var x = 41');
  ws = sc.workspace;
  assert(typeof ws === 'string' && ws, 'no workspace id returned');
  const again = expectOk(await execute('x', { workspace: ws }), 'x');
  assert(String(again.result) === '41', `x = ${short(again.result)} in ${ws}, want 41`);
  assert(again.workspace === ws, `workspace changed: ${again.workspace} != ${ws}`);
});

await check('cancel stops the run; nothing arrives afterwards; workspace survives', async () => {
  assert(ws, 'no workspace from the previous check');
  const ac = new AbortController();
  const start = inbound.length;
  let progressAfterAbort = 0;
  let abortedAt = 0;
  const call = execute('while (true) {}', {
    workspace: ws,
    signal: ac.signal,
    timeout: 30_000,
    onprogress: () => {
      if (abortedAt) progressAfterAbort++;
    },
  });
  const settled = call.then(
    (r) => ({ ok: true, r }),
    (e) => ({ ok: false, e }),
  );
  await sleep(700);
  const id = lastSentCall()?.id;
  const early = inbound.slice(start).map((e) => e.msg).filter((m) => belongsTo(m, id) && m.method === undefined);
  assert(early.length === 0, `while(true) answered before the cancel: ${short(early)}`);
  abortedAt = Date.now();
  ac.abort('e2e cancel');
  const out = await withTimeout(settled, 5_000, 'aborted call');
  assert(!out.ok, `aborted call resolved: ${short(out.r)}`);
  const sentCancel = outbound.find((e) => e.msg.method === 'notifications/cancelled' && e.msg.params?.requestId === id);
  assert(sentCancel, 'client sent no notifications/cancelled');
  await sleep(1_000);
  const after = inbound.filter((e) => e.at >= abortedAt).map((e) => e.msg).filter((m) => belongsTo(m, id));
  assert(after.length === 0, `server sent ${after.length} message(s) for cancelled request ${id}: ${short(after)}`);
  assert(progressAfterAbort === 0, `onprogress fired after abort`);
  const t0 = Date.now();
  const res = await execute('x+1', { workspace: ws, timeout: 15_000 });
  const ms = Date.now() - t0;
  const sc = expectOk(res, 'x+1 after cancel');
  assert(String(sc.result) === '42', `x+1 = ${short(sc.result)} after cancel, want "42" (state lost?)`);
  assert(ms < 3_000, `call after cancel took ${ms} ms (run not stopped promptly?)`);
});

await check('close', async () => {
  await withTimeout(client.close(), 10_000, 'close');
});

if (failed > 0 && stdioMode && stderrBuf) console.log(`server stderr (tail):\n${stderrBuf}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
