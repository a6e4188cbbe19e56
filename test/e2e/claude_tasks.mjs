// End-to-end: long execute_code runs as MCP tasks in real Claude Code, interactive mode (the TUI,
// under a pseudo-terminal made by script(1)), which declares the io.modelcontextprotocol/tasks
// extension; --print mode does not. A loopback fake Messages API plays the model and records
// what Claude Code hands it; execd runs over HTTP with protocol.task_after = "1s".
//
//   node claude_tasks.mjs EXECD
//
// EXECD is bin/execd; Claude Code comes from $E2E_CLAUDE (setup.sh). Scenarios:
//   background  a ~3 s Python cell reporting progress becomes a task, Claude Code moves it to
//               the background, and the model later receives the task notification with the
//               cell's output
//   inline      with CLAUDE_CODE_DISABLE_MCP_TASK_BACKGROUND=1 the tool result is the cell's
//   cancel      Esc while the task runs sends tasks/cancel; the run stops within 100 ms of it
//               and the next call to the workspace still sees the variables set before the loop
//   input       input() inside the task reaches the person as Claude Code's form; the answer
//               typed into it resumes the code
//   print       --print mode declares no extension: the same cell's result comes in-line,
//               and no task is made
// Ends with "N passed, N failed"; exits 1 on any failure. E2E_CLIENTS_KEEP=DIR keeps the
// recordings and each scenario's terminal output.

import http from 'node:http';
import { sendMessage } from './fake_messages.mjs';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [execdBin] = process.argv.slice(2);
const { E2E_CLAUDE } = process.env;
if (!execdBin || !E2E_CLAUDE) {
  console.error('usage: E2E_CLAUDE=... node claude_tasks.mjs EXECD');
  process.exit(2);
}
const root = process.env.E2E_CLIENTS_KEEP || mkdtempSync(join(tmpdir(), 'execd-claude-tasks-'));
const API_KEY = 'sk-ant-e2e-0123456789abcdefghijklmnopqrstuvwxyz';
const MARKER = 'TASK-OUTPUT-9c2e';

let passed = 0, failed = 0;
function record(name, ok, detail) {
  if (ok) passed++; else failed++;
  console.log(`${ok ? 'PASS' : 'FAIL'} ${name}: ${detail}`);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, ms = 90_000) {
  for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(100)) {
    const v = fn();
    if (v) return v;
  }
  throw new Error(`timed out waiting for ${what}`);
}

// --- execd over HTTP, its log kept ----------------------------------------------------------

async function startExecd(dir) {
  const port = await new Promise((resolve) => { const s = http.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); }); });
  const cfg = join(dir, 'execd.toml');
  writeFileSync(cfg, `[server]\nlisten = "127.0.0.1:${port}"\n[protocol]\ntask_after = "1s"\n[workspace]\ndata_dir = "${join(dir, 'data')}"\n[log]\nformat = "json"\n`);
  const child = spawn(execdBin, ['-config', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
  const log = { text: '', lines: () => log.text.split('\n').filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return {}; } }) };
  child.stderr.on('data', (d) => { log.text += d; });
  await until('execd to listen', () => log.text.includes('"listening"'), 120_000);
  return { child, log, url: `http://127.0.0.1:${port}/mcp` };
}

// --- the fake Messages API --------------------------------------------------------------------

// model(body, tool, id) decides the next assistant turn for the main conversation: a tool_use
// input (its id will be id), or a text. Side requests (titles, summaries; no execute_code
// tool) get "ok".
function anthropic(model) {
  const requests = [];
  let seq = 0;
  const srv = http.createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const path = req.url.split('?')[0];
      let body;
      try { body = data ? JSON.parse(data) : undefined; } catch { body = undefined; }
      if (req.method === 'POST' && path === '/v1/messages/count_tokens') {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"input_tokens":1000}');
        return;
      }
      if (req.method !== 'POST' || path !== '/v1/messages' || !body) {
        res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"type":"error","error":{"type":"not_found_error","message":"fake"}}');
        return;
      }
      requests.push(body);
      const tool = (body.tools ?? []).find((t) => /execute_code$/.test(t.name ?? ''));
      const n = ++seq;
      const turn = tool ? model(body, tool, `toolu_e2e_${n}`) : { text: 'ok' };
      const block = turn.input ? { type: 'tool_use', id: `toolu_e2e_${n}`, name: tool.name, input: turn.input } : { type: 'text', text: turn.text };
      sendMessage(res, body, `msg_e2e_${n}`, block);
    });
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({ srv, requests, port: srv.address().port })));
}

// resultOf is the text of the tool_result for the tool_use id in body, or undefined.
function resultOf(body, id) {
  for (const m of body.messages ?? []) {
    for (const b of Array.isArray(m.content) ? m.content : []) {
      if (b.type === 'tool_result' && b.tool_use_id === id) return textsOf({ messages: [{ content: b.content }] }).join('\n');
    }
  }
  return undefined;
}

// Every text the model was handed in tool results and user turns, as strings.
function textsOf(body) {
  const out = [];
  const walk = (c) => {
    if (typeof c === 'string') out.push(c);
    else if (Array.isArray(c)) c.forEach(walk);
    else if (c && typeof c === 'object') {
      if (typeof c.text === 'string') out.push(c.text);
      if (c.content !== undefined) walk(c.content);
    }
  };
  for (const m of body.messages ?? []) walk(m.content);
  return out;
}

// --- Claude Code in its TUI ---------------------------------------------------------------------

// claude starts interactive Claude Code under a 160x50 pseudo-terminal, its configuration
// pre-seeded so that no first-run dialog appears. It returns the child, a function to type
// keys, and the terminal output so far. The prompt is typed once the MCP server is connected
// (ask), since a first turn may start before it is.
function claude(dir, apiPort, mcpURL, extraEnv = {}) {
  const cfgDir = join(dir, 'cfg');
  mkdirSync(cfgDir, { recursive: true });
  mkdirSync(join(dir, 'work'), { recursive: true });
  mkdirSync(join(dir, 'tmp'), { recursive: true });
  const work = join(dir, 'work');
  writeFileSync(join(cfgDir, '.claude.json'), JSON.stringify({
    hasCompletedOnboarding: true, theme: 'dark', numStartups: 5,
    customApiKeyResponses: { approved: [API_KEY.slice(-20)], rejected: [] },
    projects: { [work]: { hasTrustDialogAccepted: true, allowedTools: [], hasCompletedProjectOnboarding: true } },
  }));
  writeFileSync(join(dir, 'mcp.json'), JSON.stringify({ mcpServers: { execd: { type: 'http', url: mcpURL } } }));
  const q = (s) => `'${s.replace(/'/g, `'\\''`)}'`;
  const cmd = `stty cols 160 rows 50; exec ${q(E2E_CLAUDE)} --mcp-config ${q(join(dir, 'mcp.json'))} --strict-mcp-config --allowedTools mcp__execd__execute_code`;
  const env = {
    PATH: process.env.PATH, HOME: dir, TERM: 'xterm-256color', CLAUDE_CONFIG_DIR: cfgDir, TMPDIR: join(dir, 'tmp'),
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${apiPort}`, ANTHROPIC_API_KEY: API_KEY,
    DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1', DISABLE_ERROR_REPORTING: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    ENABLE_TOOL_SEARCH: 'false', ...extraEnv,
  };
  const child = spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: work, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const screen = { text: '' };
  child.stdout.on('data', (d) => { screen.text += d; });
  child.stderr.on('data', (d) => { screen.text += d; });
  const type = (s) => child.stdin.write(s);
  return { child, screen, type, stop: () => { try { child.kill('SIGKILL'); } catch {} } };
}

// ask types prompt into the TUI once execd has answered Claude Code's tools/list.
async function ask(cc, ex, prompt) {
  await until('Claude Code to list execd\'s tools', () => ex.log.lines().some((l) => l.msg === 'request' && l.method === 'tools/list'));
  await sleep(1500);
  cc.type(prompt);
  await sleep(300);
  cc.type('\r');
}

const progressCell = [
  'import time',
  'from execd import progress',
  'for i in range(3):',
  '    progress(i + 1, 3, "step")',
  '    time.sleep(1)',
  `print("${MARKER}")`,
].join('\n');

async function scenario(name, fn) {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const ex = await startExecd(dir);
  let api, cc;
  try {
    const detail = await fn(dir, ex, async (model) => (api = await anthropic(model)), (...a) => (cc = claude(dir, ...a)));
    record(name, true, detail);
  } catch (e) {
    record(name, false, e.message);
  } finally {
    cc?.stop();
    api?.srv.close();
    ex.child.kill('SIGTERM');
    if (cc) writeFileSync(join(dir, 'screen.txt'), cc.screen.text);
    if (api) writeFileSync(join(dir, 'model.jsonl'), api.requests.map((b) => JSON.stringify(b)).join('\n'));
    writeFileSync(join(dir, 'execd.log'), ex.log.text);
  }
}

const methodsOf = (ex) => ex.log.lines().filter((l) => l.msg === 'request').map((l) => l.method);

await scenario('background', async (dir, ex, fake, start) => {
  let callId, told, notified;
  const api = await fake((body, tool, id) => {
    if (!callId) { callId = id; return { input: { code: progressCell, language: 'python', workspace: 'bg' } }; }
    told ??= resultOf(body, callId);
    const note = textsOf(body).find((t) => t.includes('<task-notification>'));
    if (note) { notified = note; return { text: 'FINAL: the cell printed its marker.' }; }
    return { text: 'The run is in the background; waiting for it.' };
  });
  await ask(start(api.port, ex.url), ex, 'Run the long cell.');
  await until('the task notification to reach the model', () => notified, 120_000);
  const created = ex.log.lines().find((l) => l.msg === 'call became a task');
  if (!created) throw new Error('no call became a task');
  if (!told || !told.includes(`started server-side task ${created.task}`) || !/moved to the background/.test(told)) {
    throw new Error(`the tool result the model got first: ${JSON.stringify(told)}`);
  }
  if (!notified.includes('<status>completed</status>') || !notified.includes(MARKER)) throw new Error(`the notification: ${notified.slice(0, 600)}`);
  const gets = methodsOf(ex).filter((m) => m === 'tasks/get').length;
  return `task ${created.task.slice(0, 8)}… after ${created.after.toFixed(2)} s; the model was told it moved to the background, then got a completed task-notification with the cell's output (${gets} tasks/get)`;
});

await scenario('inline', async (dir, ex, fake, start) => {
  let result;
  const api = await fake((body) => {
    const msgs = body.messages ?? [];
    const last = msgs.at(-1);
    const tr = Array.isArray(last?.content) && last.content.find((b) => b.type === 'tool_result');
    if (tr) { result = textsOf({ messages: [{ content: tr.content }] }).join('\n'); return { text: 'FINAL' }; }
    return { input: { code: progressCell, language: 'python', workspace: 'inl' } };
  }, {});
  await ask(start(api.port, ex.url, { CLAUDE_CODE_DISABLE_MCP_TASK_BACKGROUND: '1' }), ex, 'Run the long cell.');
  await until('the tool result', () => result !== undefined, 120_000);
  if (!ex.log.lines().some((l) => l.msg === 'call became a task')) throw new Error('the call did not become a task');
  if (!result.includes(MARKER)) throw new Error(`the tool result is not the cell's: ${result.slice(0, 300)}`);
  return `the tool result holds the cell's output (${methodsOf(ex).filter((m) => m === 'tasks/get').length} tasks/get)`;
});

await scenario('cancel', async (dir, ex, fake, start) => {
  let checkId, after, stopped = false;
  const loop = ['import time', 'x = 41', 'last = 0', 'while True:', '    last = time.time()'].join('\n');
  const api = await fake((body, tool, id) => {
    if (checkId) {
      after ??= resultOf(body, checkId);
      return { text: 'FINAL' };
    }
    if (!stopped) return { input: { code: loop, language: 'python', workspace: 'esc' } };
    checkId = id;
    return { input: { code: 'print(x + 1, repr(last))', language: 'python', workspace: 'esc' } };
  });
  const cc = start(api.port, ex.url, { CLAUDE_CODE_DISABLE_MCP_TASK_BACKGROUND: '1' });
  await ask(cc, ex, 'Run the loop.');
  await until('the task', () => ex.log.lines().some((l) => l.msg === 'call became a task'));
  await sleep(1500);
  cc.type('\x1b');
  const cancel = await until('tasks/cancel', () => ex.log.lines().find((l) => l.msg === 'request' && l.method === 'tasks/cancel'), 30_000);
  stopped = true;
  await sleep(1500);
  cc.type('Check the workspace.');
  await sleep(300);
  cc.type('\r');
  await until('the check', () => after !== undefined, 90_000);
  const m = /42 (\d+\.\d+)/.exec(after);
  if (!m) throw new Error(`the next call does not see x: ${after.slice(0, 300)}`);
  const cancelAt = Date.parse(cancel.ts) / 1000;
  const stoppedAfter = parseFloat(m[1]) - cancelAt;
  if (stoppedAfter > 0.1) throw new Error(`the loop ran ${stoppedAfter.toFixed(3)} s after tasks/cancel`);
  return `Esc sent tasks/cancel (${cancel.ts}); the loop's last iteration was ${(stoppedAfter * 1000).toFixed(0)} ms after it; the next call sees x = 41`;
});

await scenario('input', async (dir, ex, fake, start) => {
  let callId, result;
  const cell = ['import time', 'time.sleep(1.5)', 'name = input("What is your name?")', `print("${MARKER}", "hello", name)`].join('\n');
  const api = await fake((body, tool, id) => {
    if (!callId) { callId = id; return { input: { code: cell, language: 'python', workspace: 'ask' } }; }
    result ??= resultOf(body, callId);
    return { text: 'FINAL' };
  });
  const cc = start(api.port, ex.url, { CLAUDE_CODE_DISABLE_MCP_TASK_BACKGROUND: '1' });
  await ask(cc, ex, 'Run the cell that asks.');
  await until('the task', () => ex.log.lines().some((l) => l.msg === 'call became a task'));
  // The form Claude Code shows: "MCP server "execd" requests your input", the prompt as the
  // field, Accept and Decline. The person types the answer, Enter, then Enter on Accept.
  await until('the elicitation form', () => /requests your input/.test(cc.screen.text) && /Accept/.test(cc.screen.text), 60_000);
  await sleep(500);
  cc.type('Ada');
  await sleep(500);
  cc.type('\r');
  await sleep(1000);
  cc.type('\r');
  await until('the tool result', () => result !== undefined, 60_000);
  if (!result.includes(`${MARKER} hello Ada`)) throw new Error(`the tool result: ${result.slice(0, 300)}`);
  const updates = methodsOf(ex).filter((m) => m === 'tasks/update').length;
  if (updates !== 1) throw new Error(`${updates} tasks/update, want the one that answered`);
  return 'input() in the task reached the person as Claude Code\'s form; the answer (tasks/update) resumed the code, whose result the model got';
});

await scenario('print', async (dir, ex, fake) => {
  let callId, result;
  const api = await fake((body, tool, id) => {
    if (!callId) { callId = id; return { input: { code: progressCell, language: 'python', workspace: 'prt' } }; }
    result ??= resultOf(body, callId);
    return { text: 'FINAL' };
  });
  const cfgDir = join(dir, 'cfg');
  mkdirSync(cfgDir, { recursive: true });
  writeFileSync(join(dir, 'mcp.json'), JSON.stringify({ mcpServers: { execd: { type: 'http', url: ex.url } } }));
  const code = await new Promise((resolve) => {
    const child = spawn(E2E_CLAUDE, ['--print', '--mcp-config', join(dir, 'mcp.json'), '--strict-mcp-config', '--allowedTools', 'mcp__execd__execute_code', '--', 'Run the long cell.'],
      { cwd: dir, stdio: ['ignore', 'ignore', 'ignore'], env: { PATH: process.env.PATH, HOME: dir, CLAUDE_CONFIG_DIR: cfgDir, ANTHROPIC_BASE_URL: `http://127.0.0.1:${api.port}`,
        ANTHROPIC_API_KEY: API_KEY, DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1', DISABLE_ERROR_REPORTING: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', ENABLE_TOOL_SEARCH: 'false' } });
    const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
    child.on('close', (c) => { clearTimeout(timer); resolve(c); });
  });
  if (result === undefined || !result.includes(MARKER)) throw new Error(`exit ${code}; the tool result: ${String(result).slice(0, 300)}`);
  if (ex.log.lines().some((l) => l.msg === 'call became a task')) throw new Error('a task was made for a client without the extension');
  return 'the 3 s cell\'s result came in-line; no task was made';
});

if (!process.env.E2E_CLIENTS_KEEP && !failed) rmSync(root, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
