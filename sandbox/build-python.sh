#!/usr/bin/env bash
# Builds the execd Python guest from Debian's registries alone:
#   sandbox/guests/python.wasm         CPython 3.11 as a wasm32-wasi reactor
#                                      with our glue (python/glue.c, the ABI
#                                      of ABI.md)
#   sandbox/guests/python-stdlib.zip   the files the worker mounts read-only
#                                      at /usr: the standard library in
#                                      local/lib/python3.11, the kit in
#                                      lib/python3/dist-packages, time zones
#                                      in share/zoneinfo
#
#   bash sandbox/build-python.sh       # `make guests` runs it after build.sh
#
# Inputs: CPython from Debian's python3.11 source package, zlib, bzip2 and
# SQLite from Debian's zlib, bzip2 and sqlite3 source packages (upstream
# versions pinned below, any Debian revision, orig tarballs checked against
# their sha256), our patch and glue in sandbox/python/, the header both
# guests share in sandbox/abi/, Debian's clang-14 + lld-14 + wasi-libc, the
# machine's python3.11 as the build Python and tcl for SQLite's
# amalgamation.
#
# Two cached stages under ${EXECD_CACHE:-$HOME/.cache/execd}/build:
#   cpython-<key>   zlib + bzip2 + SQLite + configure + make of libpython3.11.a
#                   (minutes);
#                   keyed by the pins, the patch and the recipe functions
#   kit-<key>       the kit's packages unpacked and compiled (seconds);
#                   keyed by its pins and recipe
#   python-<key>    glue + link + the zip of stdlib and kit (seconds); keyed
#                   by the above and every file in sandbox/python/ and
#                   sandbox/abi/ (the header both guests share)
# so changing the glue never rebuilds CPython. Each stage appears complete
# or not at all: stage 1 by a marker written last, stage 2 by renaming the
# directory it was built in.
set -euo pipefail

PY_UPSTREAM=3.11.2
PY_ORIG_SHA256=2411c74bda5bbcfcddaf4531f66d1adc73f247f529aee981b029513aefdbf849
ZLIB_UPSTREAM=1.2.13.dfsg
ZLIB_ORIG_SHA256=71feb7947e3c00ef125f83b79a4e529bde31171e5babe48b391f06758d1ab0a1
BZIP2_UPSTREAM=1.0.8
BZIP2_ORIG_SHA256=ab5a03176ee106d3f0fa90e381da478ddae405918153cca248e682cd0c4a2269
# SQLite from trixie's sqlite3 source package (bookworm's 3.40.1 does not
# build for WASI; 3.46's sqlite3.h has a __wasi__ block: no WAL, no
# loadable extensions, single-threaded).
SQLITE_UPSTREAM=3.46.1
SQLITE_ORIG_SHA256=d0cdd2ece271b29e7ce18095745d892517ee26d0f270065b3a25c2e9eb11639c
# How SQLite is compiled for the guest. Nothing CPython's configure probes
# for is omitted (progress handler, authorizer, trace, serialize...).
#  - unix-none: the guest is the only process that sees its files, and a
#    lock left behind by a killed interpreter would lock a database for good
#  - TEMP_STORE=3: temporary tables, indices and statement journals stay in
#    memory (counted by the heap cap), never as files in /workspace
#  - no mmap in WASI; no long double arithmetic (soft-float on wasm32:
#    SQLite's double-double path is as exact and faster)
SQLITE_OPTIONS=(-DSQLITE_DEFAULT_UNIX_VFS='"unix-none"' -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION
	-DSQLITE_ENABLE_MATH_FUNCTIONS -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_FTS4 -DSQLITE_ENABLE_RTREE
	-DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_TEMP_STORE=3
	-DSQLITE_MAX_MMAP_SIZE=0 -DLONGDOUBLE_TYPE=double)
# The kit: pure-Python libraries from Debian's architecture-independent
# binary packages, unpacked as apt installs them (/usr/lib/python3/
# dist-packages), with their dependencies (six for dateutil and urllib3,
# et-xmlfile for openpyxl, mpmath for sympy; urllib3, idna, certifi and
# charset-normalizer for requests, whose transport is the host's: the
# sandbox has no sockets, see python/execd_http.py), and tzdata's /usr/share/zoneinfo, which the
# standard library's zoneinfo and Debian's pytz read. Each: package,
# version, sha256 of the .deb (Debian keeps only the current version of a
# suite: when one moves, check it and update its pin).
KIT_DEBS=(
	"python3-dateutil 2.8.2-2 59d696282ffeaf54395452e012715410dc414c6baaa54d4cdae56ac7c217eb31"
	"python3-six 1.16.0-4 fd189e9cecbcf17a1fc20aec30055c8afa9c1eec00cd6e7ab385087a2ab3b0d3"
	"python3-tabulate 0.8.9-1 80715ccbff14c93a11de864a7d6a219492ac3a5fb35d7c165540e22a91774a20"
	"python3-tz 2022.7.1-4 b165d30ef171f9426c496900449b85d290d4c6d2de50e1c3f4adc2b55b6fd534"
	"tzdata 2026f-0+deb12u1 3254eb870c8a949518214805aee5e4276af7699988ea8b9a3a583cd0f1eab31c"
	"python3-openpyxl 3.0.9-1 468490fc3f43f338efc03af25987956ca541b866378d8482a33d63d988e58ce9"
	"python3-et-xmlfile 1.0.1-2.1 a80d31fe47b34f693ea31ba08c1c9783e073c562258a47bf22cc51c05ed666ec"
	"python3-png 0.20220715.0-1 9b42b8cfd9a751c4fc89fae3ec0161f7ae963c1e20883d3cfba2c7968bea3a4e"
	"python3-networkx 2.8.8-1 69888603d1b54696f5c3d02d05527628d2d18661d845109a62fe24aff241aa7b"
	"python3-jinja2 3.1.2-1+deb12u3 914e3a26742b488bca661dd12dc06198262c3a99b68f2f20ef7310aecdf82cae"
	"python3-sympy 1.11.1-1 b437232be31819aafd267ddf2132c16293ef75e02fd58b4ad31eee3ef1d5b49e"
	"python3-mpmath 1.2.1-2 2c219b63cbab11b27208ef4141c116cbb022dc1236e84981fadb46042f3ce235"
	"python3-requests 2.28.1+dfsg-1 c75b5c05d8d4a813bd83c3d432ffe65a2ca13e771bc91d4b9787690097598603"
	"python3-urllib3 1.26.12-1+deb12u4 9dd6fef10317e437f2195cb5ea8b38d8e39e02106c5fda7b16d58b4bb9a85886"
	"python3-idna 3.3-1+deb12u1 0bf81fb1906d3aa607482d09aa3bcbab5c263242b1fd1d93be39658fa783af1a"
	"python3-certifi 2022.9.24-1 121abb6d0af69b57ce7202be38b2db9150e5d627bbaab6c17fe10650d2ced4fc"
	"python3-charset-normalizer 3.0.1-2 f547a25ac5349111ef4ea0c54654cf72fed48193eaf1c658f9309aff3715cd38"
)
# Libraries whose Debian binary packages are architecture-specific (a C
# speed-up beside the pure Python, which is the part the guest can run):
# taken from the source package instead, so that the pin holds on any build
# machine. Each: source package, upstream version, sha256 of the orig
# tarball, the library's directory in it, its distribution name (for the
# metadata importlib.metadata reads).
KIT_SOURCES=(
	"pyyaml 6.0.2 d584d9ec91ad65861cc08d42e834324ef890a082e591037abe114850ff7bbc3e lib/yaml PyYAML"
	"markupsafe 2.1.2 abcabc8c2b26036d62d4c746381a6f7cf60aafcc653198ad678306986b09450d src/markupsafe MarkupSafe"
)
# Shadow stack of the guest (linear memory, placed first so an overflow
# traps instead of corrupting the heap; glue.c's stack guard keeps CPython
# off its last part).
STACK_SIZE=$((2 << 20))
JOBS=${JOBS:-$(nproc)}
# The cross compiler, hermetic: wasi-libc's headers and clang's own only
# (Debian's clang also searches /usr/include, where configure would find the
# build machine's headers).
WASI_CC="clang-14 --target=wasm32-wasi -nostdlibinc -isystem /usr/include/wasm32-wasi"
# Sub-makes must not see the variables of a make that runs this script
# (`make build VERSION=x` would set CPython's own VERSION through MAKEFLAGS).
SUBMAKE=(env -u MAKEFLAGS -u MAKEOVERRIDES -u MFLAGS)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${EXECD_CACHE:-$HOME/.cache/execd}
out_dir=$here/guests
name=build-python.sh
# shellcheck source=sandbox/lib.sh
. "$here/lib.sh"
start=$SECONDS

# ---- recipes (their text is part of the cache keys) ------------------------

# build_zlib SRC_TARBALL OUT_DIR: libz.a and headers for wasm32-wasi.
build_zlib() {
	local tarball=$1 out=$2 d f objs=()
	mkdir -p "$out/src"
	tar -xjf "$tarball" -C "$out/src" --strip-components=1
	d=$out/src
	for f in adler32 compress crc32 deflate gzclose gzlib gzread gzwrite infback inffast inflate inftrees trees uncompr zutil; do
		# shellcheck disable=SC2086
		$WASI_CC -O2 -g0 -DZ_HAVE_UNISTD_H -D_LARGEFILE64_SOURCE=1 -w \
			-c "$d/$f.c" -o "$out/$f.o"
		objs+=("$out/$f.o")
	done
	mkdir -p "$out/include" "$out/lib"
	llvm-ar-14 rcs "$out/lib/libz.a" "${objs[@]}"
	cp "$d/zlib.h" "$d/zconf.h" "$out/include/"
}

# build_bzip2 SRC_TARBALL OUT_DIR: libbz2.a and its header for wasm32-wasi.
build_bzip2() {
	local tarball=$1 out=$2 d=$2/src f objs=()
	mkdir -p "$d" "$out/include" "$out/lib"
	tar -xzf "$tarball" -C "$d" --strip-components=1
	for f in blocksort huffman crctable randtable compress decompress bzlib; do
		# shellcheck disable=SC2086
		$WASI_CC -O2 -g0 -D_FILE_OFFSET_BITS=64 -w -c "$d/$f.c" -o "$out/$f.o"
		objs+=("$out/$f.o")
	done
	llvm-ar-14 rcs "$out/lib/libbz2.a" "${objs[@]}"
	cp "$d/bzlib.h" "$out/include/"
}

# build_sqlite SRC_TARBALL OUT_DIR: libsqlite3.a and headers for
# wasm32-wasi. The amalgamation (sqlite3.c) is made on the build machine:
# its recipe compiles small generators (lemon, mkkeywordhash) and runs
# tclsh.
build_sqlite() {
	local tarball=$1 out=$2 src=$2/src
	mkdir -p "$src" "$out/include" "$out/lib"
	tar -xJf "$tarball" -C "$src" --strip-components=1
	(cd "$src" && run_logged "$out/amalgamation.log" "${SUBMAKE[@]}" CC=clang-14 \
		sh -c './configure --disable-tcl && make sqlite3.c') ||
		{ tail -n 20 "$out/amalgamation.log" >&2; die "making the SQLite amalgamation failed"; }
	# shellcheck disable=SC2086
	with_heartbeat "compiling SQLite" $WASI_CC -O2 -g0 -mmutable-globals "${SQLITE_OPTIONS[@]}" -w \
		-c "$src/sqlite3.c" -o "$out/sqlite3.o" || die "SQLite does not compile"
	llvm-ar-14 rcs "$out/lib/libsqlite3.a" "$out/sqlite3.o"
	cp "$src/sqlite3.h" "$src/sqlite3ext.h" "$out/include/"
}

# build_cpython SRC_TARBALL PATCH ZLIB_DIR BZIP2_DIR SQLITE_DIR OUT_DIR: a
# configured CPython tree in OUT_DIR/src with libpython3.11.a and the
# generated _sysconfigdata.
build_cpython() {
	local tarball=$1 patchfile=$2 zlib=$3 bzip2=$4 sqlite=$5 out=$6 src
	mkdir -p "$out/src"
	tar -xzf "$tarball" -C "$out/src" --strip-components=1
	src=$out/src
	(cd "$src" && patch -p1 -s <"$patchfile") || die "cpython-wasi.patch does not apply"
	(
		cd "$src"
		with_heartbeat "configuring CPython" run_logged "$out/configure.log" \
			"${SUBMAKE[@]}" CONFIG_SITE="$src/Tools/wasm/config.site-wasm32-wasi" \
			PKG_CONFIG_LIBDIR=/nonexistent PKG_CONFIG_PATH= \
			./configure -q \
			--host=wasm32-unknown-wasi \
			--build="$(./config.guess)" \
			--with-build-python=/usr/bin/python3.11 \
			--without-ensurepip --disable-test-modules --disable-ipv6 \
			CC="$WASI_CC" CPP="$WASI_CC -E" \
			LDSHARED=wasm-ld-14 AR=llvm-ar-14 RANLIB=llvm-ranlib-14 \
			CFLAGS="-mmutable-globals" \
			ZLIB_CFLAGS="-I$zlib/include" ZLIB_LIBS="-L$zlib/lib -lz" \
			BZIP2_CFLAGS="-I$bzip2/include" BZIP2_LIBS="-L$bzip2/lib -lbz2" \
			LIBSQLITE3_CFLAGS="-I$sqlite/include" LIBSQLITE3_LIBS="-L$sqlite/lib -lsqlite3" ||
			{ tail -n 40 "$out/configure.log" >&2; die "configure failed"; }
		grep -q '^MODULE_ZLIB_STATE=yes' Makefile || die "configure did not pick up zlib"
		grep -q '^MODULE__BZ2_STATE=yes' Makefile || die "configure did not pick up bzip2"
		grep -q '^MODULE__SQLITE3_STATE=yes' Makefile ||
			die "configure did not pick up SQLite (_sqlite3 would not be built; see $src/config.log)"
		with_heartbeat "compiling CPython" run_logged "$out/make.log" \
			"${SUBMAKE[@]}" make -j"$JOBS" -s libpython3.11.a pybuilddir.txt ||
			{ tail -n 40 "$out/make.log" >&2; die "make failed"; }
	)
}

# link_guest CPYTHON_DIR SQLITE_DIR WORK OUT_WASM: our glue + libpython as a
# reactor. The glue wraps sqlite3_progress_handler (see glue.c).
link_guest() {
	local sqlite=$2 work=$3 out=$4 src=$1/src libs
	{
		echo "/* generated by build-python.sh from driver.py */"
		echo "static const char driver_py[] ="
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$/\\n"/' "$here/python/driver.py"
		echo ";"
	} >"$work/driver.h"
	# shellcheck disable=SC2086
	$WASI_CC -O2 -g0 -DNDEBUG -DSTACK_SIZE=$STACK_SIZE \
		-fmacro-prefix-map="$src"=cpython -fmacro-prefix-map="$here"=sandbox \
		-mmutable-globals -Wall -Wextra -Wno-unused-parameter \
		-Wno-missing-field-initializers -I"$src" -I"$src/Include" -I"$sqlite/include" -I"$here/abi" -I"$work" \
		-c "$here/python/glue.c" -o "$work/glue.o" || die "glue.c does not compile"
	# Link with what the Makefile links python.wasm with (libmpdec, expat,
	# zlib, the WASI emulations, libm), paths relative to the tree.
	libs=$(cd "$src" && "${SUBMAKE[@]}" make -s --no-print-directory -f Makefile \
		-f <(printf 'execd-print-libs:\n\t@echo $(LIBS) $(MODLIBS) $(SYSLIBS)\n') execd-print-libs) ||
		die "cannot read the link libraries from the CPython Makefile"
	# No -O on the link line: clang would run wasm-opt, which rejects the
	# exported mutable __stack_pointer.
	# shellcheck disable=SC2086
	(cd "$src" && clang-14 --target=wasm32-wasi -mexec-model=reactor -fuse-ld=lld -mmutable-globals \
		-Wl,--export=__stack_pointer -Wl,-z,stack-size=$STACK_SIZE -Wl,--stack-first \
		-Wl,--strip-all -Wl,--wrap=sqlite3_progress_handler \
		-o "$out" "$work/glue.o" libpython3.11.a $libs) || die "link failed"
}

# build_kit OUT_DIR: the kit's files as the guest sees them under /usr
# (OUT_DIR/usr/lib/python3/dist-packages with sources and unchecked-hash
# .pyc files, OUT_DIR/usr/share/zoneinfo), without tests, benchmarks, C
# extensions, sympy's Rubi integrator (3.4 MB that need matchpy, which is
# not packaged) or anything outside those two trees, and OUT_DIR/manifest:
# one line per
# package, its version and the paths it provides. Symbolic links between
# time zones become copies (the zip holds files only).
build_kit() {
	local out=$1 dp=$1/usr/lib/python3/dist-packages zi=$1/usr/share/zoneinfo
	local entry pkg version sum dir dist x paths
	mkdir -p "$dp" "$zi" "$out/unpack"
	: >"$out/manifest"
	for entry in "${KIT_DEBS[@]}"; do
		read -r pkg version sum <<<"$entry"
		fetch_deb "$pkg" "$version" "$sum" "$cache/src/debs"
		x=$out/unpack/$pkg
		dpkg-deb -x "$deb_file" "$x" || die "cannot unpack $deb_file"
		paths=
		if [[ -d $x/usr/lib/python3/dist-packages ]]; then
			(cd "$x/usr/lib/python3/dist-packages" && tar -cf - --exclude=tests --exclude=benchmarks \
				--exclude='*.so' --exclude=__pycache__ --exclude=./sympy/integrals/rubi .) | tar -xf - -C "$dp"
			paths=$(cd "$x/usr/lib/python3/dist-packages" && printf 'lib/python3/dist-packages/%s ' *)
		fi
		if [[ -d $x/usr/share/zoneinfo ]]; then
			(cd "$x/usr/share/zoneinfo" && tar -chf - --exclude=./right --exclude=./posix \
				--exclude=./localtime .) | tar -xf - -C "$zi"
			paths+="share/zoneinfo"
		fi
		[[ -n $paths ]] || die "$pkg has no files for the kit"
		echo "$pkg $version $paths" >>"$out/manifest"
	done
	for entry in "${KIT_SOURCES[@]}"; do
		read -r pkg version sum dir dist <<<"$entry"
		fetch_orig "$pkg" "$version" "$sum" "$cache/src/$pkg/${pkg}_${version}.orig.tar.gz"
		x=$out/unpack/$pkg
		mkdir -p "$x"
		tar -xzf "$cache/src/$pkg/${pkg}_${version}.orig.tar.gz" -C "$x" --strip-components=1
		[[ -d $x/$dir ]] || die "no $dir in the $pkg source"
		(cd "$x/$(dirname "$dir")" && tar -cf - --exclude='*.c' --exclude=__pycache__ "$(basename "$dir")") |
			tar -xf - -C "$dp"
		mkdir -p "$dp/$dist-$version.dist-info"
		printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$dist" "$version" >"$dp/$dist-$version.dist-info/METADATA"
		echo "$pkg $version lib/python3/dist-packages/$(basename "$dir") lib/python3/dist-packages/$dist-$version.dist-info" >>"$out/manifest"
	done
	rm -rf "$out/unpack"
	/usr/bin/python3.11 - "$dp" "$JOBS" <<-'EOF' || die "compiling the kit failed"
		import compileall, py_compile, sys
		ok = compileall.compile_dir(sys.argv[1], quiet=1, workers=int(sys.argv[2]), legacy=False,
		    ddir="/usr/lib/python3/dist-packages", invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
		sys.exit(0 if ok else 1)
	EOF
}

# package_files CPYTHON_DIR KIT_DIR WORK OUT_ZIP: the zip the worker mounts at
# /usr. The standard library (local/lib/python3.11): Lib/ without tests,
# IDLE, Tk, turtledemo, ensurepip; plus _sysconfigdata; sources and
# unchecked-hash .pyc files (read-only mount: the source is never consulted
# for validity). Then the kit's trees. Prints what each kit package costs
# in the zip.
package_files() {
	local kit=$2 work=$3 out=$4 src=$1/src lib=$3/stdlib
	mkdir -p "$lib"
	(cd "$src/Lib" && tar -cf - \
		--exclude='./test' --exclude='./idlelib' --exclude='./tkinter' \
		--exclude='./turtledemo' --exclude='./ensurepip' --exclude='./lib2to3/tests' \
		--exclude='./unittest/test' --exclude='./ctypes/test' --exclude='./distutils/tests' \
		--exclude='./sqlite3/test' --exclude='./tkinter' --exclude='./turtle.py' \
		--exclude='__pycache__' --exclude='./site-packages' .) | tar -xf - -C "$lib"
	cp "$src"/build/lib.wasi-wasm32-3.11/_sysconfigdata_*.py "$lib/" ||
		die "no _sysconfigdata in the CPython build"
	# Our own modules beside the standard library (driver.py imports them).
	cp "$here/python/execd_http.py" "$here/python/execd_packages.py" "$lib/"
	cp "$here/python/execd_tools.py" "$lib/"
	# The build Python is the same CPython minor version: same bytecode.
	/usr/bin/python3.11 - "$lib" "$kit" "$out" <<-'EOF' || die "packaging the guest's files failed"
		import compileall, os, py_compile, sys, zipfile
		lib, kit, out = sys.argv[1], sys.argv[2], sys.argv[3]
		# ddir: the path the guest sees, so the output does not name the build directory.
		ok = compileall.compile_dir(lib, quiet=2, workers=1, legacy=False, ddir="/usr/local/lib/python3.11",
		    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
		names = []  # (path in the zip, path on disk)
		for top, prefix in ((lib, "local/lib/python3.11"), (os.path.join(kit, "usr"), "")):
		    for root, dirs, files in os.walk(top):
		        dirs.sort()
		        for f in sorted(files):
		            rel = os.path.relpath(os.path.join(root, f), top)
		            names.append((os.path.join(prefix, rel), os.path.join(root, f)))
		with zipfile.ZipFile(out + ".tmp", "w") as z:
		    for n, path in names:
		        zi = zipfile.ZipInfo(n, date_time=(2023, 2, 8, 0, 0, 0))
		        zi.compress_type = zipfile.ZIP_DEFLATED
		        zi.external_attr = 0o644 << 16
		        with open(path, "rb") as fh:
		            z.writestr(zi, fh.read(), compresslevel=6)
		os.replace(out + ".tmp", out)
		with zipfile.ZipFile(out) as z:
		    infos = z.infolist()
		def cost(paths):
		    # a path, the tree under it, and a module's compiled file
		    prefixes = [p + "/" for p in paths] + [os.path.join(os.path.dirname(p), "__pycache__",
		                os.path.basename(p)[:-3] + ".") for p in paths if p.endswith(".py")]
		    return sum(i.compress_size for i in infos
		               if i.filename in paths or any(i.filename.startswith(p) for p in prefixes))
		print("build-python.sh: standard library: %d bytes in the zip" % cost(["local"]), file=sys.stderr)
		with open(os.path.join(kit, "manifest")) as m:
		    for line in m:
		        pkg, version, *paths = line.split()
		        print("build-python.sh: kit: %s %s: %d bytes in the zip" % (pkg, version, cost(paths)), file=sys.stderr)
	EOF
}

# ---- keys --------------------------------------------------------------------
key1=$({
	declare -f build_zlib build_bzip2 build_sqlite build_cpython
	cat "$here/python/cpython-wasi.patch"
	echo "$PY_UPSTREAM $PY_ORIG_SHA256 $ZLIB_UPSTREAM $ZLIB_ORIG_SHA256 $WASI_CC"
	echo "$BZIP2_UPSTREAM $BZIP2_ORIG_SHA256 $SQLITE_UPSTREAM $SQLITE_ORIG_SHA256 ${SQLITE_OPTIONS[*]}"
} | sha256sum | cut -c1-16)
keykit=$({
	declare -f build_kit
	printf '%s\n' "${KIT_DEBS[@]}" "${KIT_SOURCES[@]}"
} | sha256sum | cut -c1-16)
key2=$({
	echo "$key1 $keykit $STACK_SIZE"
	declare -f link_guest package_files
	for f in "$here"/python/* "$here"/abi/*; do printf '%s\n' "${f#"$here"/}"; cat "$f"; done
} | sha256sum | cut -c1-16)
stage1=$cache/build/cpython-$key1
stagekit=$cache/build/kit-$keykit
stage2=$cache/build/python-$key2

install_outputs() {
	mkdir -p "$out_dir"
	install_file "$stage2/python.wasm" "$out_dir/python.wasm"
	install_file "$stage2/python-stdlib.zip" "$out_dir/python-stdlib.zip"
}

have_stage2() { [[ -f $stage2/python.wasm && -f $stage2/python-stdlib.zip ]]; }
if ! have_stage2; then
	take_lock python
fi
if have_stage2; then
	install_outputs
	say "python.wasm up to date (cache $key2)"
	exit 0
fi
say "building python.wasm (CPython $PY_UPSTREAM, cache $key2)"

apt_install clang-14 lld-14 llvm-14 wasi-libc libclang-rt-14-dev-wasm32 dpkg-dev xz-utils bzip2 patch make python3.11 tcl

# ---- stage 1: zlib + bzip2 + SQLite + libpython3.11.a -------------------------
if [[ ! -f $stage1/done ]]; then
	py_orig=$cache/src/python3.11/python3.11_${PY_UPSTREAM}.orig.tar.gz
	zlib_orig=$cache/src/zlib/zlib_${ZLIB_UPSTREAM}.orig.tar.bz2
	bzip2_orig=$cache/src/bzip2/bzip2_${BZIP2_UPSTREAM}.orig.tar.gz
	sqlite_orig=$cache/src/sqlite3/sqlite3_${SQLITE_UPSTREAM}.orig.tar.xz
	fetch_orig python3.11 "$PY_UPSTREAM" "$PY_ORIG_SHA256" "$py_orig"
	fetch_orig zlib "$ZLIB_UPSTREAM" "$ZLIB_ORIG_SHA256" "$zlib_orig"
	fetch_orig bzip2 "$BZIP2_UPSTREAM" "$BZIP2_ORIG_SHA256" "$bzip2_orig"
	fetch_orig sqlite3 "$SQLITE_UPSTREAM" "$SQLITE_ORIG_SHA256" "$sqlite_orig"
	rm -rf "$stage1"
	mkdir -p "$stage1"
	say "building zlib $ZLIB_UPSTREAM for wasm32-wasi"
	build_zlib "$zlib_orig" "$stage1/zlib"
	say "building bzip2 $BZIP2_UPSTREAM for wasm32-wasi"
	build_bzip2 "$bzip2_orig" "$stage1/bzip2"
	say "building SQLite $SQLITE_UPSTREAM for wasm32-wasi"
	build_sqlite "$sqlite_orig" "$stage1/sqlite"
	say "configuring and building CPython $PY_UPSTREAM for wasm32-wasi (a few minutes; cache $key1)"
	stage1_start=$SECONDS
	build_cpython "$py_orig" "$here/python/cpython-wasi.patch" "$stage1/zlib" "$stage1/bzip2" "$stage1/sqlite" \
		"$stage1/cpython"
	say "libpython3.11.a built in $(elapsed "$stage1_start")"
	touch "$stage1/done"
fi

work=$(mktemp -d "$cache/work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- the kit, in a directory renamed into place ----------------------------
if [[ ! -f $stagekit/manifest ]]; then
	say "building the kit (cache $keykit)"
	build_kit "$work/kit"
	rm -rf "$stagekit"
	mv "$work/kit" "$stagekit"
fi

# ---- stage 2: glue, link, the zip, in a directory renamed into place -------
mkdir "$work/out"
link_guest "$stage1/cpython" "$stage1/sqlite" "$work" "$work/out/python.wasm"
package_files "$stage1/cpython" "$stagekit" "$work" "$work/out/python-stdlib.zip"
rm -rf "$stage2"
mv "$work/out" "$stage2"
install_outputs
say "built python.wasm ($(stat -c %s "$stage2/python.wasm") bytes) and python-stdlib.zip ($(stat -c %s "$stage2/python-stdlib.zip") bytes), cache $key2, in $(elapsed "$start")"
