// Package packages is packages on demand: the host side of JavaScript's
// bare imports (npm packages) and Python's requirements (pure wheels). It
// resolves versions, fetches with the host's own HTTP client from
// packages.npm_registry and packages.python_index (never through the
// sandboxes' network policy, internal/egress), verifies every download
// against the hash its registry or index gives, unpacks it safely into a
// content-addressed cache that every workspace reads, and describes the
// workspace's packages in a lock that the caller keeps in the workspace,
// so that a fork, a checkpoint or a restart gets the same versions.
// RATIONALE.md says why it is built this way.
//
// Concurrency contract: a Service is safe for concurrent use; calls for
// one workspace are expected one at a time, and calls for different
// workspaces may run at once (two asking for the same package at once
// unpack it once).
//
// # npm
//
// AddNPM takes specifiers ("dayjs", "zod@^3", "npm:@scope/pkg@1.2") and
// reads ranges as npm does (^, ~, x, ||, hyphen ranges, npm's prerelease
// rule; semver_test.go checks a table written by npm's own semver). It
// picks versions as npm does (the "latest" tag when it satisfies, else the
// highest version, deprecated ones last), fetches abbreviated packuments,
// and places the tree as npm's hoisting does: breadth first, names in
// order, each package as near the root as it can go without hiding
// another one that a placed package already uses. Required peer
// dependencies are installed like dependencies; optional dependencies that
// fail are left out; git, file and URL dependencies and aliases are
// refused. No package script ever runs.
//
// # Python
//
// AddPython takes PEP 508 requirements ("attrs", "attrs>=23,<25",
// "rich[jupyter]==13.7.1"), reads the simple index (PEP 503 HTML or PEP
// 691 JSON), takes only wheels tagged py3-none-any (or py2.py3, py3N up to
// py311), follows each wheel's Requires-Dist with its markers evaluated for
// the sandbox (CPython 3.11, sys_platform "wasi", os_name "posix",
// platform_machine "wasm32"), and installs one version of each project.
// A project with no pure wheel is refused with a message that says so;
// two requirements no version satisfies together are a conflict that
// names both. A requirement met after its project's version was chosen,
// which that version does not satisfy, starts the resolution again with
// the requirement known from the start; there is no deeper backtracking
// (a conflict that only an older version of another project would avoid
// is reported as a conflict). Hashes the index gives are checked; a file
// it lists without one is pinned in the lock by its own sha256.
//
// # The cache
//
// <cache_dir>/packages/<address>/ holds one package: pkg/ (its files, what
// a sandbox reads) and meta.json (what the host read of it: sizes, entry
// points). The address is the hash of the file it came from:
// "sha512-<hex>" for an npm tarball (its dist.integrity), "sha256-<hex>"
// for a wheel. An entry is unpacked into <cache_dir>/packages/.tmp and
// renamed into place whole, so an entry that exists is complete and one
// copy on disk serves every workspace. Unpacking refuses entries with ..,
// absolute paths, or links pointing out of the package (links inside it
// are skipped, as npm skips them), and stops at packages.max_package_bytes
// of unpacked files whatever the archive declares.
//
// # The lock
//
// Lock is JSON, written by Marshal with sorted keys:
//
//	{
//	  "lockfileVersion": 1,
//	  "npm": {
//	    "requires": {"dayjs": "^1.11.13"},
//	    "packages": {
//	      "node_modules/dayjs": {
//	        "version": "1.11.13",
//	        "resolved": "https://registry.npmjs.org/dayjs/-/dayjs-1.11.13.tgz",
//	        "integrity": "sha512-…"
//	      },
//	      "node_modules/send/node_modules/ms": {"version": "2.1.3", "integrity": "sha512-…"}
//	    }
//	  },
//	  "python": {
//	    "requires": ["attrs>=23"],
//	    "packages": {
//	      "attrs": {"version": "23.2.0", "wheel": "attrs-23.2.0-py3-none-any.whl", "sha256": "…"}
//	    }
//	  }
//	}
//
// npm.requires are the workspace's own dependencies (a name asked for
// without a range is saved as ^version); npm.packages is keyed by place in
// the tree as package-lock.json's "packages" is, each with its version,
// the tarball's sha512 integrity, and its dependencies and
// optionalDependencies as ranges. python.requires are the workspace's own
// requirements as written; python.packages is keyed by normalized project
// name (PEP 503), each with its version, wheel file name, the wheel's
// sha256 and the names of the projects it requires in the sandbox. A
// lock lives in the workspace, where its
// code can write anything: ParseLock checks every field, and execd never
// fetches from a lock's "resolved" (only from the configured registry or
// index, whose hash must then be the lock's).
//
// # How a guest loader uses the result
//
// The caller keeps the lock in the workspace (Marshal's bytes, for
// instance as /workspace/.execd/packages.lock.json) and mounts CacheDir
// read-only in the sandbox (at, say, /packages); every Dir and Path
// below is relative to that mount. When a workspace starts (new, forked,
// restored, restarted), NPM and Python give its tree and paths from the
// lock alone. When code asks for a package that is not there, AddNPM or
// AddPython resolves it and returns the lock to write back.
//
// JavaScript: a bare specifier is a package name and a subpath
// (ParseNPMSpec splits "@scope/pkg/sub" into "@scope/pkg" and "/sub";
// Node's built-in modules, "node:fs" or "path", are the loader's to refuse
// or provide before asking). The package is NPMTree.Root[name] for the
// workspace's own code, and P.Deps[name] for a file under package P's Dir
// (P is the package whose Dir the importing file is under); a name found
// in neither is not installed. The file within the package's Dir:
//
//   - With Exports, only Exports counts. A string or an array is the
//     target of "."; an object whose keys begin with "." maps subpaths
//     ("." or "./sub"), and one whose keys do not is the conditions of
//     ".". A subpath is looked up exactly, else under the longest key with
//     one "*" whose prefix and suffix match it, the "*" replaced in the
//     target by what it matched. A target is a "./" path, an array (the
//     first that resolves), or an object of conditions tried in its own
//     order: take "browser" (the sandbox has fetch, crypto, TextEncoder,
//     not Node's modules, so a "node" build would fail), then "import" for
//     import or "require" for require(), then "default". A null target, or
//     a subpath not listed, is not exported: an error, as in Node.
//   - Without Exports: "." is Module if set (an ES module entry), else
//     Main, else "index.js"; "./sub" is that file. A path without an
//     extension tries itself, then ".js", ".json", then "/index.js".
//
// A file's format: ".mjs" an ES module, ".cjs" CommonJS, ".json" JSON,
// ".js" an ES module when Type is "module" and CommonJS otherwise.
// CommonJS runs in a function of exports, require, module, __filename and
// __dirname whose require resolves the same way with "require" in place of
// "import". Imports from inside a package resolve against that package's
// Deps, so each copy of a package sees the versions npm would give it.
//
// Python: add PythonEnv.Paths, joined to the mount, to sys.path in their
// order, before the kit's dist-packages (a version the workspace asked
// for wins over the kit's), then call importlib.invalidate_caches() in a
// running interpreter. Each wheel has a directory of its own, so
// namespace packages spread over several wheels work (PEP 420), and
// importlib.metadata finds each wheel's .dist-info there. Nothing of an
// installer runs: no .pth files, no console scripts, no compiled
// bytecode (the mount is read-only; sys.dont_write_bytecode spares the
// attempt).
package packages
