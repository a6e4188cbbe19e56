// End-to-end: do the text and the image of an execute_code result reach the model, in the real
// clients, against execd itself? Claude Code and Codex CLI run headless against fake model APIs
// on 127.0.0.1 that record what the model is handed; the Inspector CLI prints the result.
//
//   node clients.mjs URL EXECD CONFIG
//
// URL is a running execd's MCP endpoint; EXECD and CONFIG start another execd over stdio
// (EXECD -stdio -config CONFIG). The clients come from $E2E_CLAUDE, $E2E_CODEX and
// $E2E_INSPECTOR (setup.sh). The code the fake models run writes a PNG into /workspace,
// prints a marker and shows the picture (Python, `from execd import show`); each run passes
// when the model received a text block with the marker and an image block with exactly that
// PNG. Every client runs in each era it can speak, over HTTP and stdio where it has both.
// Ends with "N passed, N failed"; exits 1 on any failure. Set E2E_CLIENTS_KEEP=DIR to keep the
// recordings.

import http from 'node:http';
import { sendMessage } from './fake_messages.mjs';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync, crc32 } from 'node:zlib';

const [url, execd, config] = process.argv.slice(2);
if (!url || !execd || !config) {
  console.error('usage: node clients.mjs URL EXECD CONFIG');
  process.exit(2);
}
const { E2E_CLAUDE, E2E_CODEX, E2E_INSPECTOR } = process.env;
const RUN_TIMEOUT_MS = 180_000;
const MARKER = 'E2E-STDOUT-4b1d';

// A 64x48 PNG: red and blue halves with a green bar; small, valid, recognisable.
function makePNG(w = 64, h = 48) {
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    const row = y * (w * 3 + 1);
    for (let x = 0; x < w; x++) {
      const bar = y >= h / 2 - 4 && y < h / 2 + 4;
      raw.set(bar ? [0, 200, 0] : x < w / 2 ? [220, 0, 0] : [0, 0, 220], row + 1 + x * 3);
    }
  }
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(td) >>> 0);
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}
const PNG = makePNG().toString('base64');
const CODE = [
  'import base64',
  'from execd import show',
  `open('/workspace/fig.png', 'wb').write(base64.b64decode('${PNG}'))`,
  `print('${MARKER}')`,
  "show('/workspace/fig.png')",
].join('\n');
const CALL = { code: CODE, language: 'python' };

const keep = process.env.E2E_CLIENTS_KEEP;
const root = keep || mkdtempSync(join(tmpdir(), 'execd-clients-'));
let passed = 0;
let failed = 0;
const results = [];

function record(name, ok, detail) {
  if (ok) passed++;
  else failed++;
  results.push({ name, ok, detail });
  console.log(`${ok ? 'PASS' : 'FAIL'} ${name}: ${detail}`);
}

// What reached the model, as {texts, images}: texts are strings, images base64.
function verdict(saw) {
  if (!saw) return [false, 'no tool result reached the model'];
  const text = saw.texts.some((t) => t.includes(MARKER));
  const image = saw.images.some((b) => b === PNG);
  const what = `text ${text ? 'yes' : 'no'}, image ${image ? 'yes' : 'no'} (${saw.texts.length} text and ${saw.images.length} image blocks)`;
  return [text && image, what];
}

// --- fake model APIs ---------------------------------------------------------------------------

function server(handler) {
  return new Promise((resolve) => {
    const s = http.createServer((req, res) => {
      let data = '';
      req.on('data', (c) => (data += c));
      req.on('end', () => {
        let body;
        try {
          body = data ? JSON.parse(data) : undefined;
        } catch {
          body = undefined;
        }
        handler(req, res, body);
      });
    });
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}

// Anthropic Messages: offers a tool_use of the execute_code tool, then a final text once a
// tool_result is in; other requests (titles, summaries) get "ok".
function anthropic(requests) {
  let seq = 0;
  return server((req, res, body) => {
    const path = req.url.split('?')[0];
    if (req.method === 'POST' && path === '/v1/messages/count_tokens') {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"input_tokens":1000}');
      return;
    }
    if (req.method !== 'POST' || path !== '/v1/messages' || !body) {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"type":"error","error":{"type":"not_found_error","message":"fake"}}');
      return;
    }
    requests.push(body);
    const last = body.messages?.at(-1);
    const hasResult = last?.role === 'user' && Array.isArray(last.content) && last.content.some((b) => b.type === 'tool_result');
    const tool = (body.tools ?? []).find((t) => /execute_code$/.test(t.name ?? ''));
    const id = `msg_fake_${++seq}`;
    const block = hasResult || !tool ? { type: 'text', text: hasResult ? 'FINAL-ANSWER' : 'ok' }
      : { type: 'tool_use', id: `toolu_fake_${seq}`, name: tool.name, input: CALL };
    sendMessage(res, body, id, block);
  });
}

function claudeSaw(requests) {
  for (const body of requests) {
    const tr = body.messages?.at(-1)?.content;
    const result = Array.isArray(tr) && tr.find((b) => b.type === 'tool_result');
    if (!result) continue;
    const blocks = typeof result.content === 'string' ? [{ type: 'text', text: result.content }] : result.content ?? [];
    return {
      texts: blocks.filter((b) => b.type === 'text').map((b) => b.text),
      images: blocks.filter((b) => b.type === 'image').map((b) => b.source?.data),
    };
  }
  return undefined;
}

// OpenAI Responses (Codex): a function_call of execute_code (after Codex's client-side
// tool_search when the tools are deferred), then a final message once its output is in.
function openai(requests) {
  let seq = 0;
  return server((req, res, body) => {
    const path = req.url.split('?')[0];
    if (req.method === 'GET' && /\/models$/.test(path)) {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"object":"list","data":[],"models":[]}');
      return;
    }
    if (req.method !== 'POST' || !/\/responses$/.test(path) || !body) {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":{"message":"fake","type":"not_found"}}');
      return;
    }
    requests.push(body);
    const input = Array.isArray(body.input) ? body.input : [];
    const n = ++seq;
    const find = (tools) => {
      for (const t of tools) {
        const name = t.name ?? t.function?.name;
        if (/execute_code$/.test(name ?? '')) return { name };
        for (const inner of t.tools ?? []) if (/execute_code$/.test(inner.name ?? '')) return { name: inner.name, namespace: t.name };
      }
      return undefined;
    };
    let item;
    if (input.some((i) => i.type === 'function_call_output' || i.type === 'custom_tool_call_output')) {
      item = { type: 'message', id: `msg_${n}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'FINAL-ANSWER', annotations: [] }] };
    } else {
      const searched = input.filter((i) => i.type === 'tool_search_output').flatMap((i) => i.tools ?? []);
      const tool = find([...(body.tools ?? []), ...searched]);
      if (tool) {
        item = { type: 'function_call', id: `fc_${n}`, call_id: `call_${n}`, name: tool.name, ...(tool.namespace && { namespace: tool.namespace }),
          arguments: JSON.stringify(CALL), status: 'completed' };
      } else if ((body.tools ?? []).some((t) => t.type === 'tool_search') && !searched.length) {
        item = { type: 'tool_search_call', id: `tsc_${n}`, call_id: `search_${n}`, execution: 'client', status: 'completed', arguments: { query: 'execute_code', limit: 5 } };
      } else {
        item = { type: 'message', id: `msg_${n}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'ok', annotations: [] }] };
      }
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    const base = { id: `resp_${n}`, object: 'response', created_at: Math.floor(Date.now() / 1000), model: body.model ?? 'fake', status: 'in_progress', output: [] };
    ev('response.created', { response: base });
    ev('response.output_item.added', { output_index: 0, item });
    ev('response.output_item.done', { output_index: 0, item });
    ev('response.completed', { response: { ...base, status: 'completed', output: [item],
      usage: { input_tokens: 100, input_tokens_details: { cached_tokens: 0 }, output_tokens: 10, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 110 } } });
    res.end();
  });
}

function codexSaw(requests) {
  for (const body of requests) {
    const out = (body.input ?? []).find((i) => i.type === 'function_call_output');
    if (!out) continue;
    const items = typeof out.output === 'string' ? [{ type: 'input_text', text: out.output }] : out.output ?? [];
    return {
      texts: items.filter((b) => b.type === 'input_text').map((b) => b.text),
      images: items.filter((b) => b.type === 'input_image').map((b) => /^data:[^;]+;base64,(.*)$/s.exec(b.image_url ?? '')?.[1]),
    };
  }
  return undefined;
}

// --- running the clients -----------------------------------------------------------------------

function run(cmd, args, opts) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function claude(name, transport, era) {
  const dir = join(root, name);
  mkdirSync(join(dir, 'cfg'), { recursive: true });
  mkdirSync(join(dir, 'tmp'), { recursive: true });
  const requests = [];
  const api = await anthropic(requests);
  const server = transport === 'http' ? { type: 'http', url } : { type: 'stdio', command: execd, args: ['-stdio', '-config', config] };
  writeFileSync(join(dir, 'mcp.json'), JSON.stringify({ mcpServers: { execd: server } }));
  const env = {
    PATH: process.env.PATH, HOME: dir, CLAUDE_CONFIG_DIR: join(dir, 'cfg'), TMPDIR: join(dir, 'tmp'),
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${api.address().port}`, ANTHROPIC_API_KEY: 'dummy',
    DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1', DISABLE_ERROR_REPORTING: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    ENABLE_TOOL_SEARCH: 'false', ...(era === 'legacy' && { MCP_PROTOCOL_NEGOTIATION: 'legacy' }),
  };
  const r = await run(E2E_CLAUDE, ['--print', '--output-format', 'json', '--mcp-config', join(dir, 'mcp.json'), '--strict-mcp-config',
    '--allowedTools', 'mcp__execd__execute_code', '--', 'Run the code and look at the figure.'], { cwd: dir, env });
  api.close();
  writeFileSync(join(dir, 'model.jsonl'), requests.map((b) => JSON.stringify(b)).join('\n'));
  writeFileSync(join(dir, 'out.txt'), r.stdout + '\n--- stderr\n' + r.stderr);
  const [ok, what] = verdict(claudeSaw(requests));
  record(name, ok, ok ? what : `${what}; exit ${r.code}; ${r.stderr.slice(0, 300)}`);
}

async function codex(name, transport) {
  const dir = join(root, name);
  mkdirSync(join(dir, 'work'), { recursive: true });
  const requests = [];
  const api = await openai(requests);
  const mcp = transport === 'http' ? [`url = ${JSON.stringify(url)}`]
    : [`command = ${JSON.stringify(execd)}`, `args = ${JSON.stringify(['-stdio', '-config', config])}`];
  writeFileSync(join(dir, 'config.toml'), [
    'model = "gpt-5.5"', // a bundled model with image input and plain function tools
    'model_provider = "fake"', '',
    '[model_providers.fake]', 'name = "fake"', `base_url = "http://127.0.0.1:${api.address().port}/v1"`, 'wire_api = "responses"', '',
    '[mcp_servers.execd]', ...mcp, 'default_tools_approval_mode = "approve"', '',
  ].join('\n'));
  const r = await run(E2E_CODEX, ['exec', '--skip-git-repo-check', '--json', '-C', join(dir, 'work'), 'Run the code and look at the figure.'],
    { cwd: dir, env: { PATH: process.env.PATH, HOME: dir, CODEX_HOME: dir } });
  api.close();
  writeFileSync(join(dir, 'model.jsonl'), requests.map((b) => JSON.stringify(b)).join('\n'));
  writeFileSync(join(dir, 'out.txt'), r.stdout + '\n--- stderr\n' + r.stderr);
  const [ok, what] = verdict(codexSaw(requests));
  record(name, ok, ok ? what : `${what}; exit ${r.code}; ${r.stderr.slice(0, 300)}`);
}

async function inspector(name, era) {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const cli = join(E2E_INSPECTOR, 'clients/launcher/build/index.js');
  const r = await run(process.execPath, [cli, '--cli', url, '--protocol-era', era, '--method', 'tools/call', '--tool-name', 'execute_code',
    '--tool-args-json', JSON.stringify(CALL), '--format', 'json'], { env: { ...process.env, HOME: dir } });
  writeFileSync(join(dir, 'out.txt'), r.stdout + '\n--- stderr\n' + r.stderr);
  let res;
  try {
    const out = JSON.parse(r.stdout);
    res = out.result ?? out;
  } catch {
    res = undefined;
  }
  const saw = res?.content && {
    texts: res.content.filter((b) => b.type === 'text').map((b) => b.text),
    images: res.content.filter((b) => b.type === 'image').map((b) => b.data),
  };
  const [ok, what] = verdict(saw);
  record(name, ok, ok ? what : `${what}; exit ${r.code}; ${r.stderr.slice(0, 300)}`);
}

if (!E2E_CLAUDE || !E2E_CODEX || !E2E_INSPECTOR) {
  console.error('clients: E2E_CLAUDE, E2E_CODEX and E2E_INSPECTOR must be set (source test/e2e/setup.sh)');
  process.exit(2);
}
await claude('claude-http-modern', 'http', 'modern');
await claude('claude-http-legacy', 'http', 'legacy');
await claude('claude-stdio-modern', 'stdio', 'modern');
await claude('claude-stdio-legacy', 'stdio', 'legacy');
await codex('codex-http', 'http');
await codex('codex-stdio', 'stdio');
await inspector('inspector-legacy', 'legacy');
await inspector('inspector-modern', 'modern');

if (!keep && failed === 0) rmSync(root, { recursive: true, force: true });
else console.log(`clients: recordings in ${root}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
