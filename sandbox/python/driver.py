# execd Python guest: runs one cell in __main__ with REPL semantics.
# Embedded into python.wasm by build-python.sh and run once by glue.c's
# execd_init; glue.c calls run_cell(source) per cell. Imports here are
# builtin or frozen only (start-up time); traceback is imported on the
# first error.
import _ast
import builtins
import os
import sys

import execd

# The host's interrupt trips SIGINT (cpython-wasi.patch): make sure it
# raises KeyboardInterrupt.
try:
    import _signal

    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
except (ImportError, OSError, ValueError):
    pass

# Relative paths in the code mean the workspace, when there is one.
try:
    os.chdir("/workspace")
except OSError:
    pass

_main = sys.modules["__main__"].__dict__
_cells = {}  # "<cell-N>" -> source, for tracebacks of code defined in it
_MAX_CELLS = 500
_MAX_VALUE = 1 << 20
_TOP_LEVEL_AWAIT = 0x2000  # PyCF_ALLOW_TOP_LEVEL_AWAIT
_CO_COROUTINE = 0x80
_count = 0
_loop = None


def _await(coro):
    global _loop
    import asyncio

    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop.run_until_complete(coro)


def _run(source, name):
    tree = compile(source, name, "exec", _ast.PyCF_ONLY_AST | _TOP_LEVEL_AWAIT)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = _ast.Expression(tree.body.pop().value)
    code = compile(tree, name, "exec", _TOP_LEVEL_AWAIT)
    r = eval(code, _main)
    if code.co_flags & _CO_COROUTINE:
        _await(r)
    if last is None:
        return None
    code = compile(last, name, "eval", _TOP_LEVEL_AWAIT)
    value = eval(code, _main)
    if code.co_flags & _CO_COROUTINE:
        value = _await(value)
    if value is None:
        return None
    builtins._ = value
    text = repr(value)
    if len(text) > _MAX_VALUE:
        text = text[:_MAX_VALUE] + "..."
    return text


def _flush():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass


def _describe(exc):
    try:
        message = str(exc)
    except BaseException:
        message = "<unprintable %s>" % type(exc).__name__
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == "<execd>":
        tb = tb.tb_next
    try:
        import linecache
        import traceback

        for name, src in _cells.items():
            linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        stack = "".join(traceback.format_exception(type(exc), exc, tb))
        traceback.clear_frames(exc.__traceback__)
    except BaseException:
        stack = "%s: %s\n" % (type(exc).__name__, message)
    return type(exc).__name__, message, stack


def run_cell(source):
    """Runs source as the next cell; returns (status, value, error)."""
    global _count
    _count += 1
    name = "<cell-%d>" % _count
    _cells[name] = source
    if len(_cells) > _MAX_CELLS:
        del _cells[next(iter(_cells))]
    exc = None
    value = None
    try:
        execd._poll(True)
        try:
            value = _run(source, name)
        finally:
            execd._poll(False)
    except BaseException as e:
        exc = e
    _flush()
    if exc is None:
        return "ok", value, None
    if isinstance(exc, MemoryError):
        status = "oom"
    elif isinstance(exc, KeyboardInterrupt) and execd._fired():
        status = "interrupted"
    else:
        status = "error"
    try:
        err = _describe(exc)
    finally:
        exc = None
    return status, None, err
