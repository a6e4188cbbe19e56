// njs module for deploy/nginx/execd.conf: where each MCP request to a group
// of execd instances goes. nginx evaluates these while it picks an upstream,
// once the request body is read (client_body_buffer_size holds it in
// memory). Why it routes this way: deploy/RATIONALE.md, "How do several
// instances share the clients?".

// Mcp-Param-* header values may be base64 words ("=?base64?...?=").
function param(v) {
    var m = /^=\?base64\?(.*)\?=$/.exec(v);
    if (m) {
        try {
            return Buffer.from(m[1], 'base64').toString();
        } catch (e) {
            return v;
        }
    }
    return v;
}

function message(r) {
    var text = r.requestText;
    if (!text) {
        return null;
    }
    try {
        return JSON.parse(text);
    } catch (e) {
        return null;
    }
}

// route is the key of nginx's "hash $execd_route consistent": the
// workspace the request works in, so that every client of one workspace
// (2026-07-28 or legacy) reaches the same instance. A 2026-07-28 client
// mirrors it in Mcp-Param-Workspace; a legacy one only has it in the body.
// A call that creates a workspace, or a request of no workspace, goes by
// its legacy session (any instance serves any session: they share the
// session key), or anywhere ("": round robin); the id a new workspace gets
// is minted by its instance to hash back to it (cluster.peers, cluster.self).
// A task (tasks/get, tasks/update, tasks/cancel, and 2025-11-25's
// tasks/result) goes by its id, which its instance minted the same way: a
// 2026-07-28 client mirrors it in Mcp-Name, a legacy one has it in the body.
var taskMethods = { 'tasks/get': true, 'tasks/update': true, 'tasks/cancel': true, 'tasks/result': true };

function route(r) {
    if (taskMethods[r.headersIn['Mcp-Method']] && r.headersIn['Mcp-Name']) {
        return r.headersIn['Mcp-Name'];
    }
    var ws = r.headersIn['Mcp-Param-Workspace'];
    if (ws) {
        return param(ws);
    }
    var msg = message(r);
    if (msg && !Array.isArray(msg) && taskMethods[msg.method] && msg.params && typeof msg.params.taskId === 'string') {
        return msg.params.taskId;
    }
    if (msg && !Array.isArray(msg) && msg.method === 'tools/call' && msg.params &&
        msg.params.arguments && typeof msg.params.arguments.workspace === 'string') {
        return msg.params.arguments.workspace;
    }
    if (msg && !Array.isArray(msg) && msg.method === 'tools/call') {
        return '';
    }
    return r.headersIn['Mcp-Session-Id'] || '';
}

// notice reports a legacy notification or client response (no id and a
// method, or an id and no method).
function notice(m) {
    return m !== null && typeof m === 'object' && !(typeof m.method === 'string' && 'id' in m);
}

// broadcast is "1" for what every instance must see, because it names a
// request or a session that may live on any of them and carries no
// workspace: a legacy session's notifications/cancelled and its answers to
// server requests (POSTs of notifications and responses only), and the
// DELETE that ends a session. execd ignores a cancel or an answer whose id
// it does not hold.
function broadcast(r) {
    if (!r.headersIn['Mcp-Session-Id']) {
        return '';
    }
    if (r.method === 'DELETE') {
        return '1';
    }
    if (r.method !== 'POST') {
        return '';
    }
    var msg = message(r);
    if (Array.isArray(msg)) {
        return msg.length > 0 && msg.every(notice) ? '1' : '';
    }
    return notice(msg) ? '1' : '';
}

export default { route, broadcast };
