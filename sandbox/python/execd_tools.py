"""Code mode: the tools of the operator's upstream MCP servers.

    from execd import tools
    tools.<server>.<tool>(**args)   # or (args_dict)
    tools.list()                    # [{server, name, description, inputSchema, access}]
    help(tools.<server>.<tool>)     # its description and parameters

A call returns the tool's structuredContent when it has one, else its text
(JSON-parsed when it is JSON); with images, {"text": ..., "images": [bytes,
...]} (each can be show()n). A result with isError, or a call execd refuses
or that fails, raises ToolError (also execd.ToolError). A call blocks until
the upstream answers; the host's stop raises KeyboardInterrupt, as
everywhere, and cancels the call upstream.

Each call goes to the host through the builtin _execd_tools (tools.c,
execd.tool_call of sandbox/ABI.md) and is read back with _execd_net's wait,
head, body and close, like a request of execd_http.
"""

import json

import _execd_net
import _execd_tools

__all__ = ["ToolError", "tools"]


class ToolError(Exception):
    """A call of an upstream's tool that has no value: server and tool name
    it, code says why ("tool_error": the tool's own failure; otherwise
    execd's word: "limit", "timeout", "refused", "unknown_tool", ...)."""

    def __init__(self, message, server="", tool="", code=""):
        super().__init__(message)
        self.server, self.tool, self.code = server, tool, code


def _read(id):
    """The finished call's answer, with its images' bytes; forgotten on
    the host."""
    try:
        a = json.loads(_execd_net.head(id))
        for im in a.get("images") or ():
            im["bytes"] = _execd_net.body(id, im["length"])
    finally:
        _execd_net.close(id)
    return a


def _ask(request):
    id = _execd_tools.call(json.dumps(request))
    _execd_net.wait(id)
    return _read(id)


def _parsed(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _call(server, tool, args):
    a = _ask({"server": server, "tool": tool, "arguments": args})
    if "error" in a:
        raise ToolError(a["error"], server, tool, a.get("code", ""))
    text = a.get("text", "")
    if a.get("isError"):
        raise ToolError(text or "tools.%s.%s failed" % (server, tool), server, tool, "tool_error")
    if "structuredContent" in a:
        return a["structuredContent"]
    if a.get("images"):
        return {"text": text, "images": [im["bytes"] for im in a["images"]]}
    return _parsed(text) if text.strip() else text


# The listing, as last read: server -> {name or ident: entry}.
_listed = {}


def _list():
    a = _ask({"list": True})
    if "error" in a:
        raise ToolError(a["error"], code=a.get("code", ""))
    _listed.clear()
    _callers.clear()
    for t in a["tools"]:
        by = _listed.setdefault(t["server"], {})
        by[t["name"]] = by[t["ident"]] = t
    return [{k: t[k] for k in ("server", "name", "description", "inputSchema", "access")} for t in a["tools"]]


def _type(schema):
    if not isinstance(schema, dict):
        return "Any"
    t = schema.get("type")
    if isinstance(t, list):
        return " | ".join(_type({"type": x}) for x in t)
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json.dumps(v) for v in schema["enum"][:8])
    if t == "array":
        return "list[%s]" % _type(schema.get("items"))
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
            "object": "dict", "null": "None"}.get(t, "Any")


def _doc(t):
    schema = t.get("inputSchema") or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    lines = [t.get("description") or "(no description)", ""]
    if t.get("access") == "ask":
        lines += ["Each call asks the person first.", ""]
    if props:
        lines.append("Parameters:")
        for name, p in props.items():
            opt = "" if name in required else ", optional"
            desc = p.get("description", "") if isinstance(p, dict) else ""
            lines.append("    %s (%s%s)%s" % (name, _type(p), opt, ": " + desc if desc else ""))
    else:
        lines.append("Parameters: none")
    return "\n".join(lines)


def _caller(server, name, entry):
    real = entry["name"] if entry else name

    def call(args=None, /, **kwargs):
        if args is not None:
            if not isinstance(args, dict):
                raise TypeError("tools.%s.%s takes keyword arguments or one dict" % (server, name))
            kwargs = {**args, **kwargs}
        return _call(server, real, kwargs)

    call.__name__ = call.__qualname__ = name if name.isidentifier() else "tool"
    call.__module__ = "execd.tools." + server
    call.__doc__ = _doc(entry) if entry else "tools.%s.%s (not listed: tools.list() lists the tools)" % (server, name)
    return call


# The callers made, (server, name) -> function; made anew after a listing.
_callers = {}


class _Server:
    __slots__ = ("_name",)

    def __init__(self, name):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        f = _callers.get((self._name, name))
        if f is not None:
            return f
        entry = _listed.get(self._name, {}).get(name)
        if entry is None:
            try:
                _list()
            except ToolError:
                pass
            entry = _listed.get(self._name, {}).get(name)
        f = _callers[(self._name, name)] = _caller(self._name, name, entry)
        return f

    def __setattr__(self, name, value):
        raise AttributeError("tools.%s is read-only" % self._name)

    def __dir__(self):
        if self._name not in _listed:
            try:
                _list()
            except ToolError:
                pass
        return sorted({t["ident"] for t in _listed.get(self._name, {}).values()})

    def __repr__(self):
        return "<tools.%s: dir() lists its tools>" % self._name


_servers = {}


class _Tools:
    """The tools of the operator's upstream MCP servers: tools.<server>.<tool>(**args),
    tools.list(); help(tools.<server>.<tool>) describes one."""

    __slots__ = ()

    def list(self):
        """The tools this code may call: [{server, name, description, inputSchema, access}]."""
        return _list()

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        s = _servers.get(name)
        if s is None:
            s = _servers[name] = _Server(name)
        return s

    def __setattr__(self, name, value):
        raise AttributeError("tools is read-only")

    def __dir__(self):
        if not _listed:
            try:
                _list()
            except ToolError:
                pass
        return ["list"] + sorted(_listed)

    def __repr__(self):
        return "<execd tools: tools.list() lists them>"


tools = _Tools()
