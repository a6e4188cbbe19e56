// Code mode's approvals through the TypeScript SDK client's elicitation handler (legacy era):
// execd runs with an [[upstream]] "fake" (internal/upstream/testdata/fakeupstream) whose echo
// is an ask tool; the client answers each question with one of its choices.
//
//   node sdk_approval.mjs http://127.0.0.1:PORT/mcp
//
// The SDK is loaded from $E2E_SDK_NODE_PATH (setup.sh). Every wait is bounded. Prints one line
// per check and ends with "N passed, N failed"; exits 1 if any check failed.

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const SDK_DIR = process.env.E2E_SDK_NODE_PATH;
if (!SDK_DIR) {
  console.error('sdk_approval: E2E_SDK_NODE_PATH is not set (source test/e2e/setup.sh)');
  process.exit(2);
}
const sdk = (p) => import(pathToFileURL(join(SDK_DIR, '@modelcontextprotocol/sdk/dist/esm', p)).href);
if (process.argv.length < 3) {
  console.error('usage: sdk_approval.mjs URL');
  process.exit(2);
}

const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { ElicitRequestSchema } = await sdk('types.js');

let passed = 0;
let failed = 0;
class CheckError extends Error {}
function assert(cond, msg) {
  if (!cond) throw new CheckError(msg);
}
const short = (v) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 600 ? s.slice(0, 600) + '…' : s;
};
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
    console.log(`PASS sdk-approval ${name} (${Date.now() - t0} ms${note ? `; ${note}` : ''})`);
  } catch (err) {
    failed++;
    const msg = err instanceof CheckError ? err.message : err?.stack || String(err);
    console.log(`FAIL sdk-approval ${name}: ${msg}`);
  }
}

const CHOICES = ['allow once', 'allow for the rest of this run', 'deny'];

// The elicitation handler answers from answers[], in order, and keeps what it was asked.
let answers = [];
let asked = [];
const client = new Client({ name: 'execd-e2e-approval', version: '0.0.1' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params);
  const value = answers.shift();
  if (value === undefined) return { action: 'decline' };
  return { action: 'accept', content: { value } };
});

async function run(code, language = 'javascript') {
  const res = await client.callTool(
    { name: 'execute_code', arguments: { code, language, workspace: 'approval' } },
    undefined,
    { timeout: 45_000 },
  );
  const sc = res?.structuredContent;
  assert(sc && !res.isError, `execute_code: ${short(res)}`);
  return sc;
}

const code = `const r = [];
for (const t of ["a", "b"]) { try { r.push(await tools.fake.echo({text: t})) } catch (e) { r.push(e.code) } }
r`;

await check('connect', async () => {
  await withTimeout(client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2]))), 15_000, 'connect');
  const caps = client.getServerCapabilities();
  assert(caps?.tools?.listChanged === true, `tools.listChanged is not true with an upstream: ${short(caps)}`);
});
if (failed > 0) {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(1);
}

await check("execute_code's description names the ask tool", async () => {
  const { tools } = await client.listTools();
  const d = tools.find((t) => t.name === 'execute_code')?.description ?? '';
  assert(d.includes('tools.fake.echo('), `the description: ${short(d)}`);
});

await check('allow once, then deny', async () => {
  answers = ['allow once', 'deny'];
  asked = [];
  const sc = await run(code);
  assert(sc.result === '["a", "denied"]', `result ${short(sc.result)}; asked ${asked.length} times`);
  assert(asked.length === 2, `asked ${asked.length} times, want 2`);
  const p = asked[0];
  assert(/^Code in workspace approval wants to call fake\.echo .*with \{"text":"a"\}\. Allow\?$/.test(p.message), `the question: ${short(p.message)}`);
  // 2025-11-25: a titled single-select (oneOf of const and title).
  const value = p.requestedSchema?.properties?.value;
  const consts = (value?.oneOf ?? []).map((o) => o.const);
  assert(JSON.stringify(consts) === JSON.stringify(CHOICES), `the choices: ${short(value)}`);
  assert(value.oneOf[2].title === 'Deny' && value.oneOf[1].title === 'Allow for the rest of this run', `the titles: ${short(value)}`);
});

await check('allow for the rest of this run asks once', async () => {
  answers = ['allow for the rest of this run'];
  asked = [];
  const sc = await run(code);
  assert(sc.result === '["a", "b"]' && asked.length === 1, `result ${short(sc.result)}; asked ${asked.length} times`);
});

await check('deny from Python is a ToolError', async () => {
  answers = ['deny', 'deny'];
  asked = [];
  const sc = await run("from execd import tools, ToolError\nr = []\nfor t in 'ab':\n    try:\n        r.append(tools.fake.echo(text=t))\n    except ToolError as e:\n        r.append(e.code)\nr", 'python');
  assert(sc.result === "['denied', 'denied']" && asked.length === 2, `result ${short(sc.result)}; asked ${asked.length} times`);
});

await client.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
