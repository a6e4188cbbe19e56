"""Pure-Python wheels installed by execd, for the sandbox's interpreter.

The host resolves, fetches, verifies and unpacks wheels into a cache the
sandbox reads at /packages (one directory per wheel) and records the
workspace's packages in /workspace/.execd/packages.lock.json. This module
puts the workspace's wheels on sys.path before each cell (when the lock
changed since it last looked), turns a cell's ``%pip install NAME`` and
``!pip install NAME`` lines into calls of install(), and gives install()
(``from execd import install``) to the code. driver.py calls prepare_cell.
"""
import json
import os
import re
import sys

import execd

__all__ = ["install", "installed"]

LOCK = "/workspace/.execd/packages.lock.json"

_paths = []  # the entries this module put on sys.path
_gen = ""  # the lock generation they came from
_seen = None  # (mtime, size) of the lock when last looked at
_hints = {}  # driver.py's _HINTS: what the sandbox has instead
_installed = []  # what the last refresh said is installed


class PackageError(ImportError):
    """Packages could not be installed: the message says why (not found, no
    pure wheel, a conflict, refused by the operator's policy...)."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


def _ask(req):
    ans = json.loads(execd._packages(json.dumps(req)))
    if "error" in ans:
        raise PackageError(ans["error"], ans.get("code"))
    return ans


def _apply(ans):
    """Puts the answer's wheel directories on sys.path, in its order, before
    the kit's dist-packages (a version the workspace asked for wins)."""
    global _paths, _gen
    if ans.get("unchanged"):
        return
    new = list(ans.get("paths") or [])
    for p in _paths:
        if p in sys.path and p not in new:
            sys.path.remove(p)
    at = len(sys.path)
    for i, p in enumerate(sys.path):
        if p.endswith("dist-packages"):
            at = i
            break
    for p in reversed(new):
        if p in sys.path:
            sys.path.remove(p)
        sys.path.insert(at, p)
    _paths, _gen = new, ans.get("gen", "")
    import importlib

    importlib.invalidate_caches()


def refresh():
    """Brings sys.path up to the workspace's lock, if it changed."""
    global _seen
    try:
        st = os.stat(LOCK)
        seen = (st.st_mtime_ns, st.st_size)
    except OSError:
        seen = None
    if seen == _seen:
        return
    if seen is None and not _paths:
        _seen = None
        return
    _apply(_ask({"op": "python", "have": _gen}))
    _seen = seen


def install(*requirements):
    """install("python-slugify", "attrs>=23"): installs pure-Python wheels
    (and what they require) into the workspace and makes them importable.
    Returns the list of (name, version) installed or changed. Raises
    PackageError when they cannot be (the message says why)."""
    reqs = []
    for r in requirements:
        if isinstance(r, (list, tuple)):
            reqs.extend(r)
        else:
            reqs.append(r)
    reqs = [str(r) for r in reqs]
    if not reqs:
        raise TypeError("install() takes the names of the packages to install")
    try:
        ans = _ask({"op": "install", "language": "python", "packages": reqs})
    except PackageError as e:
        if e.code == "not_pure":
            for r in reqs:
                key = re.split(r"[\s\[<>=!~;]", r, 1)[0].lower()
                hint = _hints.get(key) or _hints.get(key.replace("-", "_"))
                if hint:
                    e.args = (e.args[0] + " " + hint,)
                    break
        raise
    _apply(ans)
    global _seen
    try:
        st = os.stat(LOCK)
        _seen = (st.st_mtime_ns, st.st_size)
    except OSError:
        pass
    return [(p["name"], p["version"]) for p in ans.get("installed", [])]


def installed():
    """The workspace's Python packages as (name, version), from its lock."""
    try:
        with open(LOCK) as f:
            lock = json.load(f)
    except OSError:
        return []
    pkgs = (lock.get("python") or {}).get("packages") or {}
    return sorted((n, e.get("version")) for n, e in pkgs.items())


def _pip(line):
    """%pip install a b==1 / %pip list, as notebooks take them."""
    import shlex

    args = shlex.split(line)
    if not args:
        raise SystemExit("usage: %pip install NAME[==VERSION] ...")
    cmd, rest = args[0], args[1:]
    if cmd == "install":
        reqs, skip = [], False
        for a in rest:
            if skip:
                skip = False
                continue
            if a in ("-q", "--quiet", "-U", "--upgrade", "--no-cache-dir", "--user", "--no-deps", "-qq"):
                continue
            if a in ("-i", "--index-url", "--extra-index-url", "-r", "--requirement", "-c", "--constraint"):
                raise ValueError("%%pip install: %s is not taken here (the operator chooses the index)" % a)
            if a.startswith("-"):
                continue
            reqs.append(a)
        got = install(*reqs)
        if got:
            print("Installed " + " ".join("%s-%s" % g for g in got))
        else:
            print("Requirement already satisfied: " + " ".join(reqs))
        return None
    if cmd in ("list", "freeze"):
        for n, v in installed():
            print(("%s==%s" if cmd == "freeze" else "%-30s %s") % (n, v))
        return None
    raise ValueError("%%pip %s: only install, list and freeze are available here" % cmd)


_PIP_LINE = re.compile(r"^([ \t]*)[%!]pip3?[ \t]+(.*)$", re.M)


def prepare_cell(source):
    """The cell's source with its %pip / !pip lines made calls (same line
    numbers), after sys.path has caught up with the lock."""
    try:
        refresh()
    except PackageError as e:
        print("execd: the workspace's packages are not usable: %s" % e, file=sys.stderr)
    if "pip" not in source or _PIP_LINE.search(source) is None:
        return source
    return _PIP_LINE.sub(lambda m: "%s__import__('execd_packages')._pip(%r)" % (m.group(1), m.group(2)), source)


def setup(hints):
    global _hints
    _hints = dict((k.lower(), v) for k, v in hints.items())
    execd.install = install
