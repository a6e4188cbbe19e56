#!/usr/bin/env bash
# debian-base.sh CACHE_DIR: makes, once, a Debian bookworm tree with
# debootstrap (no image registry is needed) in CACHE_DIR/debian-bookworm/
# and prints its path. It is laid out like the official debian:bookworm-slim
# image: deb822 sources in /etc/apt/sources.list.d/debian.sources, no apt
# lists, documentation and locales excluded by dpkg. deploy/check.sh boots a
# copy of it with systemd and imports it as the base of the image it builds.
set -euo pipefail
cache=$1
dir=$cache/debian-bookworm
[[ -f $dir.complete ]] && { echo "$dir"; exit 0; }

mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
mirror=${mirror:-http://deb.debian.org/debian}
tmp=$(mktemp -d "$cache/debian-bookworm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "debian-base.sh: debootstrap bookworm from $mirror (about a minute)" >&2
debootstrap --variant=minbase bookworm "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
	{ tail -20 "$tmp/debootstrap.log" >&2; exit 1; }
r=$tmp/root
rm -f "$r/etc/apt/sources.list"
cat >"$r/etc/apt/sources.list.d/debian.sources" <<-SRC
	Types: deb
	URIs: $mirror
	Suites: bookworm bookworm-updates
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

	Types: deb
	URIs: ${mirror%/debian}/debian-security
	Suites: bookworm-security
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
cat >"$r/etc/dpkg/dpkg.cfg.d/excludes" <<-EXC
	path-exclude /usr/share/doc/*
	path-include /usr/share/doc/*/copyright
	path-exclude /usr/share/man/*
	path-exclude /usr/share/info/*
	path-exclude /usr/share/locale/*
	path-include /usr/share/locale/locale.alias
EXC
find "$r/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
find "$r/usr/share/man" "$r/usr/share/info" -mindepth 1 -delete
find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin "$r"/var/cache/apt/archives/*.deb
rm -rf "$dir" "$dir.complete" && mv "$r" "$dir"
touch "$dir.complete"
echo "$dir"
