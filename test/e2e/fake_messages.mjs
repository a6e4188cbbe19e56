// The reply of the loopback fake Messages API that the real-client tests
// (clients.mjs, claude_tasks.mjs) run Claude Code against: one assistant
// message holding block (a text or a tool_use), as JSON or, when the
// request asked to stream, as the API's server-sent events.

export function sendMessage(res, body, id, block) {
  const msg = { id, type: 'message', role: 'assistant', model: body.model ?? 'fake', content: [block],
    stop_reason: block.type === 'text' ? 'end_turn' : 'tool_use', stop_sequence: null, usage: { input_tokens: 100, output_tokens: 10 } };
  if (!body.stream) {
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(msg));
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  ev('message_start', { message: { ...msg, content: [], stop_reason: null } });
  if (block.type === 'text') {
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: block.text } });
  } else {
    ev('content_block_start', { index: 0, content_block: { ...block, input: {} } });
    ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } });
  }
  ev('content_block_stop', { index: 0 });
  ev('message_delta', { delta: { stop_reason: msg.stop_reason, stop_sequence: null }, usage: { output_tokens: 10 } });
  ev('message_stop', {});
  res.end();
}
