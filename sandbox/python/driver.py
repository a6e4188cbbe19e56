# execd Python guest: runs one cell in __main__ with REPL semantics.
# Embedded into python.wasm by build-python.sh and run once by glue.c's
# execd_init; glue.c calls run_cell(source) per cell and reseed() in a clone
# of a memory image. Imports here are builtin or frozen, and traceback and
# linecache, which the report of an error needs: imported at init (paid
# once per daemon: new interpreters are copies of this one), reporting an
# error imports nothing, so it neither needs memory the error may have
# taken (out of memory) nor leaves those modules' objects in the middle of
# a heap that a memory bomb filled, where they would split the space the
# bomb frees. The names of builtins used here come from a copy glue.c made
# before any cell ran.
import _ast
import _io
import builtins
import os
import sys
import warnings

import _execd_net
import execd
import execd_packages
import linecache
import traceback


def show(x):
    """show(x): attach an image to the call's result. x is a path (read
    here), the bytes of a PNG, JPEG, GIF or WebP image, or an object with
    _repr_png_() (as IPython displays it)."""
    if isinstance(x, (str, os.PathLike)):
        with open(x, "rb") as f:
            x = f.read()
    elif not isinstance(x, (bytes, bytearray, memoryview)) and hasattr(x, "_repr_png_"):
        x = x._repr_png_()
    execd._show(x)


def _input(prompt=""):
    """input(prompt): ask the person through the MCP client and return the
    answer; EOFError when they decline, when the client cannot ask, or when
    nobody answers in time. The prompt is also written to stdout, as input()
    does without a terminal."""
    prompt = str(prompt)
    if prompt:
        sys.stdout.write(prompt)
        sys.stdout.flush()
    return execd._input(prompt)


execd.show = show
builtins.input = _input

import execd_tools  # code mode: from execd import tools

execd.tools, execd.ToolError = execd_tools.tools, execd_tools.ToolError

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
_TB_KEEP = 50  # frames kept at each end of a long traceback

# The streams on fds 1 and 2 (the run's captured stdout and stderr), as
# CPython made them: unbuffered text, fds left open when closed.
_stdout, _stderr = sys.stdout, sys.stderr


def _stream(fd):
    return _io.TextIOWrapper(_io.FileIO(fd, "w", closefd=False), encoding="utf-8",
                             errors="backslashreplace", newline="\n", write_through=True)


def _restore_stdio():
    """Puts sys.stdout and sys.stderr back on the capture, whatever the last
    cell did to them (replaced, set to None, closed)."""
    global _stdout, _stderr
    if _stdout.closed:
        _stdout = _stream(1)
    if _stderr.closed:
        _stderr = _stream(2)
    sys.stdout = sys.__stdout__ = _stdout
    sys.stderr = sys.__stderr__ = _stderr


# Libraries the sandbox cannot have (C extensions, the network): importing
# one fails with a message that says what it offers instead, so that the
# code's author changes course instead of retrying.
_OFFERS = ("Available: sqlite3, csv, json, statistics, math, decimal, fractions (standard library); "
           "dateutil, tabulate, pytz, openpyxl, png (pypng), networkx, yaml, jinja2, sympy, mpmath, requests. "
           "Pure-Python packages install with %pip install NAME (or from execd import install); "
           "packages with C extensions cannot be installed.")
_NUMERIC = ("For numerics use lists with math, statistics, fractions and decimal, mpmath (matrices, "
            "high precision) or sympy (exact and symbolic).")
_TABLES = ("For tables use csv or sqlite3 (SQL, also in memory: sqlite3.connect(':memory:')), "
           "statistics for summaries, tabulate to print and openpyxl for .xlsx files.")
_PLOTS = "There is no plotting library; png (pypng) writes PNG images from rows of pixels."
_NET = ("The network is reached through requests, urllib.request or http.client (to the hosts the operator "
        "allows); asynchronous HTTP clients cannot run here (no event loop).")
_HINTS = {
    "numpy": _NUMERIC,
    "scipy": ("Use statistics and math, mpmath (special functions, quadrature, root finding, ODEs), "
              "sympy, or networkx for graphs."),
    "sklearn": _NUMERIC,
    "pandas": _TABLES,
    "polars": _TABLES,
    "pyarrow": _TABLES,
    "statsmodels": "statistics has mean, stdev, correlation, linear_regression and NormalDist.",
    "matplotlib": _PLOTS,
    "seaborn": _PLOTS,
    "plotly": _PLOTS,
    "PIL": "png (pypng) reads and writes PNG images.",
    "httpx": _NET,
    "aiohttp": _NET,
    "bs4": "html.parser (standard library) parses HTML.",
    "lxml": "xml.etree.ElementTree (standard library) parses XML.",
}


class _Unavailable:
    """The last finder on sys.meta_path: an import of a library in _HINTS
    (when nothing else found it) raises ModuleNotFoundError with the hint.
    A lookup (importlib.util.find_spec) still answers None, as code that
    probes for an optional library expects."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        hint = _HINTS.get(name) if path is None else None
        if hint is None:
            return None
        try:  # an import statement, __import__ or import_module, not a lookup
            importing = sys._getframe(2).f_code.co_name == "_find_and_load_unlocked"
        except ValueError:
            importing = False
        if not importing:
            return None
        raise ModuleNotFoundError("No module named %r: it cannot be installed in this sandbox. %s %s"
                                  % (name, hint, _OFFERS), name=name)


sys.meta_path.append(_Unavailable)
execd_packages.setup(_HINTS)


class _Patching:
    """A loader that runs a module's own, then hands the module to a
    function of execd_http (imported then, not before)."""

    def __init__(self, loader, patch):
        self._loader, self._patch = loader, patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        import execd_http

        getattr(execd_http, self._patch)(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _NetworkPatcher:
    """The first finder on sys.meta_path: http.client, requests.adapters and
    requests.sessions are loaded as always, then made to send through the
    host (execd_http), before any other module sees them."""

    _patches = {"http.client": "patch_http_client", "requests.adapters": "patch_requests",
                "requests.sessions": "patch_requests_sessions"}

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        patch = cls._patches.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is cls or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Patching(spec.loader, patch)
                return spec
        return None


sys.meta_path.insert(0, _NetworkPatcher)

# requests 2.28 warns, at its import, that Debian's charset-normalizer 3
# is newer than it knows (it works: Debian ships the two together).
warnings.filterwarnings("ignore", message=r"urllib3 \(.*\) or chardet \(.*\)/charset_normalizer \(.*\) doesn't match",
                        module="requests")

_env_text = ""  # the run's secrets as last put in os.environ (JSON)
_env_names = ()


def _refresh_env():
    """os.environ holds the placeholders of the run's secrets (the host
    gives them per run: they depend on the workspace's principal)."""
    global _env_text, _env_names
    text = _execd_net.env()
    if text == _env_text:
        return
    import json

    env = json.loads(text) if text else {}
    for name in _env_names:
        if name not in env:
            os.environ.pop(name, None)
    for name, placeholder in env.items():
        os.environ[name] = placeholder
    _env_text, _env_names = text, tuple(env)


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


def _cut(tb):
    """Splices the middle out of a traceback longer than 2 * _TB_KEEP frames
    (a RecursionError's has thousands, and formatting each costs a parse of
    its line). Returns (frames left out, a function that undoes the cut)."""
    n, t = 0, tb
    while t is not None:
        n, t = n + 1, t.tb_next
    if n <= 2 * _TB_KEEP:
        return 0, lambda: None
    head = tb
    for _ in range(_TB_KEEP - 1):
        head = head.tb_next
    tail = was = head.tb_next
    for _ in range(n - 2 * _TB_KEEP):
        tail = tail.tb_next
    head.tb_next = tail

    def undo():
        head.tb_next = was

    return n - 2 * _TB_KEEP, undo


def _describe(exc):
    try:
        message = str(exc)
    except BaseException:
        message = "<unprintable %s>" % type(exc).__name__
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == "<execd>":
        tb = tb.tb_next
    undo = []
    try:
        for name, src in _cells.items():
            linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        omitted, u = _cut(tb)
        undo.append(u)
        seen, e = {id(exc)}, exc
        while True:  # the chained exceptions' tracebacks too
            e = e.__cause__ if e.__cause__ is not None else e.__context__
            if e is None or id(e) in seen:
                break
            seen.add(id(e))
            n, u = _cut(e.__traceback__)
            omitted += n
            undo.append(u)
        stack = "".join(traceback.format_exception(type(exc), exc, tb))
        if omitted:
            stack += "(%d frames of the traceback above are not shown)\n" % omitted
        for u in undo:
            u()
        traceback.clear_frames(exc.__traceback__)
    except BaseException:
        for u in undo:
            u()
        stack = "%s: %s\n" % (type(exc).__name__, message)
    return type(exc).__name__, message, stack


def run_cell(source):
    """Runs source as the next cell; returns (status, value, error)."""
    global _count
    _count += 1
    try:
        source = execd_packages.prepare_cell(source)
    except Exception:
        pass
    name = "<cell-%d>" % _count
    _cells[name] = source
    if len(_cells) > _MAX_CELLS:
        del _cells[next(iter(_cells))]
    exc = None
    value = None
    _restore_stdio()
    try:
        _refresh_env()
    except BaseException:
        pass
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
    # A stop the host asked for is the status whatever exception it ended
    # in (KeyboardInterrupt, or what a library made of it: sqlite3's
    # OperationalError "interrupted").
    if execd._fired():
        status = "interrupted"
    elif isinstance(exc, MemoryError):
        status = "oom"
    else:
        status = "error"
    try:
        err = _describe(exc)
    finally:
        exc = None
    return status, None, err


def reseed():
    """Fresh entropy for every random generator seeded so far (glue.c's
    execd_reseed, in a clone of a memory image): the random module's global
    instance (what CPython reseeds in a forked child) and tempfile's name
    sequence. Generators the code made itself are its state, and stay as
    they were."""
    random = sys.modules.get("random")
    inst = getattr(random, "_inst", None)
    if inst is not None:
        inst.seed()
    tempfile = sys.modules.get("tempfile")
    seq = getattr(tempfile, "_name_sequence", None)
    rng = getattr(seq, "_rng", None)
    if rng is not None:
        rng.seed()
