# shellcheck shell=bash disable=SC2154  # name and cache are the caller's
# Shared by build.sh and build-python.sh (sourced, not run): messages, the
# Debian toolchain and source packages, the build lock, a heartbeat for long
# compiles. The caller sets `name` (the prefix of its messages) and `cache`
# before sourcing, and runs under `set -euo pipefail`. Nothing here shapes
# the build output, so none of it is part of the cache keys.

say() { printf '%s: %s\n' "$name" "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}

# elapsed START: seconds since START (a $SECONDS value), as "1m05s" or "42s".
elapsed() {
	local s=$((SECONDS - $1))
	if ((s >= 60)); then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

# install_file SRC DST: copies SRC to DST, with SRC's mode, by way of a
# temporary file beside DST renamed over it: a reader never sees half a
# file, and two builds installing at once (two `make build` in one
# checkout) each rename their own copy instead of racing for one name.
install_file() {
	local src=$1 dst=$2 tmp base
	base=${dst##*/}
	# The temporary name keeps DST's extension: it stays ignored by git
	# (sandbox/guests/*.wasm) and, with its leading dot, out of go:embed.
	tmp=$(mktemp --suffix=".${base##*.}" "${dst%/*}/.${base%.*}.XXXXXX") || die "cannot create a temporary file beside $dst"
	if ! { cp "$src" "$tmp" && chmod --reference="$src" "$tmp" && mv -f "$tmp" "$dst"; }; then
		rm -f "$tmp"
		die "cannot install $dst"
	fi
}

# ---- Debian packages -------------------------------------------------------

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

apt_updated=
apt_update() {
	[[ -n $apt_updated ]] && return
	as_root apt-get update -qq >/dev/null || die "apt-get update failed"
	apt_updated=1
}

# apt_install PKG...: installs those not installed yet.
apt_install() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	say "installing ${missing[*]}"
	apt_update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
		die "apt-get install ${missing[*]} failed"
}

# ensure_deb_src: adds a deb-src entry for the machine's mirror and keyring
# (suites bookworm bookworm-updates trixie: CPython is in bookworm, QuickJS
# only in trixie), then forgets that apt was updated. Returns 1 when the
# entry was already there.
deb_src_list=/etc/apt/sources.list.d/execd-deb-src.sources
ensure_deb_src() {
	local mirror keyring
	[[ -f $deb_src_list ]] && return 1
	say "adding $deb_src_list (deb-src: bookworm bookworm-updates trixie)"
	mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
	keyring=$(sed -n 's/^Signed-By: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
	as_root tee "$deb_src_list" >/dev/null <<-EOF
		Types: deb-src
		URIs: ${mirror:-http://deb.debian.org/debian}
		Suites: bookworm bookworm-updates trixie
		Components: main
		Signed-By: ${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}
	EOF
	apt_updated=
}

# src_versions PKG: the versions of source package PKG apt knows.
src_versions() { apt-cache showsrc "$1" 2>/dev/null | sed -n 's/^Version: //p'; }

# fetch_orig PKG UPSTREAM SHA256 FILE: makes sure FILE, the orig tarball of
# source package PKG at the pinned upstream version (any Debian revision),
# is there with the right sha256: downloads it (adding the deb-src entry if
# apt does not know the package) unless it already is, and fails when the
# upstream moved or the tarball changed.
fetch_orig() {
	local pkg=$1 upstream=$2 sum=$3 file=$4 version re
	re="^([0-9]+:)?${upstream//./\\.}-[^-]+$"
	if [[ ! -f $file ]] || ! echo "$sum  $file" | sha256sum -c --status; then
		version=$(src_versions "$pkg" | grep -E "$re" | sort -V | tail -n1 || true)
		if [[ -z $version ]]; then
			ensure_deb_src || true
			apt_update
			version=$(src_versions "$pkg" | grep -E "$re" | sort -V | tail -n1 || true)
		fi
		[[ -n $version ]] || die "no $pkg source package with upstream $upstream (found: $(src_versions "$pkg" | tr '\n' ' ')); update the pin and its sha256 after checking the new release"
		say "fetching $pkg $version source"
		mkdir -p "$(dirname "$file")"
		(cd "$(dirname "$file")" && apt-get source -qq --download-only --tar-only "$pkg=$version" >/dev/null 2>&1) ||
			die "apt-get source $pkg=$version failed"
	fi
	[[ -f $file ]] || die "$file missing after apt-get source $pkg"
	echo "$sum  $file" | sha256sum -c --status ||
		die "sha256 of $file is $(sha256sum "$file" | cut -d' ' -f1), expected $sum: upstream tarball changed, refusing to build"
}

# fetch_deb PKG VERSION SHA256 DIR: makes sure DIR holds the binary package
# PKG at exactly VERSION, its .deb checked against SHA256, and sets deb_file
# to its path: downloads it with apt-get download unless it is there, and
# fails when the mirror no longer has that version (Debian keeps only the
# current one of each suite) or the file changed.
deb_file=
fetch_deb() {
	local pkg=$1 version=$2 sum=$3 dir=$4 glob
	glob="${pkg}_${version/:/%3a}_*.deb"
	mkdir -p "$dir"
	deb_file=$(find "$dir" -maxdepth 1 -name "$glob" | head -n1)
	if [[ -z $deb_file ]] || ! echo "$sum  $deb_file" | sha256sum -c --status; then
		if [[ -n $deb_file ]]; then rm -f "$deb_file"; fi
		say "fetching $pkg $version"
		if ! (cd "$dir" && apt-get download -qq "$pkg=$version" >/dev/null 2>&1); then
			apt_update
			(cd "$dir" && apt-get download -qq "$pkg=$version" >/dev/null 2>&1) ||
				die "apt-get download $pkg=$version failed (the mirror has: $(apt-cache madison "$pkg" | awk '{print $3}' | tr '\n' ' ')); update the pin and its sha256 after checking the new version"
		fi
		deb_file=$(find "$dir" -maxdepth 1 -name "$glob" | head -n1)
	fi
	[[ -n $deb_file ]] || die "no $glob in $dir after apt-get download"
	echo "$sum  $deb_file" | sha256sum -c --status ||
		die "sha256 of $deb_file is $(sha256sum "$deb_file" | cut -d' ' -f1), expected $sum: package changed, refusing to build"
}

# ---- build lock and progress -----------------------------------------------

# take_lock NAME: one build of NAME at a time (make guests from several
# checkouts share the cache); held until the script exits (fd 9).
take_lock() {
	mkdir -p "$cache/build"
	exec 9>"$cache/build/$1.lock"
	if ! flock -n 9; then
		say "waiting for another build of $1"
		flock 9
	fi
}

# run_logged LOG CMD...: runs CMD with its output in LOG.
run_logged() {
	local log=$1
	shift
	"$@" >"$log" 2>&1
}

# with_heartbeat LABEL CMD...: runs CMD and, while it runs, says LABEL and
# the elapsed time every HEARTBEAT seconds (default 30).
with_heartbeat() {
	local label=$1 start=$SECONDS ticker rc=0
	shift
	(
		nap=
		trap 'kill $nap 2>/dev/null; exit 0' TERM
		while :; do
			sleep "${HEARTBEAT:-30}" &
			nap=$!
			wait "$nap"
			say "$label: $(elapsed "$start") so far"
		done
	) &
	ticker=$!
	"$@" || rc=$?
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	return "$rc"
}
