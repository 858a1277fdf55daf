#!/bin/sh
# Fetch Debian's cmocka source into DIR (for the mingw build of cmocka in
# mk/windows.mk; there is no mingw cmocka package).
#
#   tools/win-cmocka-src.sh DIR
#
# Idempotent and non-interactive. When apt knows no deb-src for cmocka it
# adds one file, /etc/apt/sources.list.d/stackprobe-deb-src.sources (deb-src
# for the suites of this Debian release, main only), runs apt-get update and
# retries. We only *download* the source (apt-get source --download-only) and
# unpack the upstream tarball with tar, so neither dpkg-source nor a build
# dependency is needed. DIR/src/cmocka.c and DIR/include/cmocka.h exist
# afterwards.
set -eu
dir=$1
[ -f "$dir/src/cmocka.c" ] && [ -f "$dir/include/cmocka.h" ] && exit 0

srcfile=/etc/apt/sources.list.d/stackprobe-deb-src.sources
have_src() { apt-cache showsrc cmocka 2>/dev/null | grep -q '^Package: cmocka'; }

if ! have_src; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "win-cmocka: apt has no deb-src entry for cmocka; run 'sudo make deps-windows-src' or add deb-src lines" >&2
		exit 1
	fi
	if [ ! -e "$srcfile" ]; then
		codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
		if [ -z "$codename" ]; then
			echo "win-cmocka: cannot tell the Debian release from /etc/os-release" >&2
			exit 1
		fi
		echo "win-cmocka: adding deb-src entry $srcfile ($codename)"
		cat > "$srcfile" <<SRC
# Added by stackprobe tools/win-cmocka-src.sh: source packages, to build
# cmocka for mingw (there is no binary mingw package).
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	fi
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	if ! have_src; then
		echo "win-cmocka: apt still knows no source package 'cmocka' (check $srcfile)" >&2
		exit 1
	fi
fi

tmp=$(mktemp -d)
chmod 0777 "$tmp"  # apt downloads as _apt when it can write there
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get source --download-only -qq cmocka >/dev/null)
orig=$(ls "$tmp"/cmocka_*.orig.tar.* 2>/dev/null | head -n 1)
if [ -z "$orig" ]; then
	echo "win-cmocka: apt-get source cmocka gave no .orig tarball" >&2
	exit 1
fi
mkdir -p "$tmp/x"
tar -xf "$orig" -C "$tmp/x"
top=$(ls -d "$tmp"/x/*/ | head -n 1)
[ -f "$top/src/cmocka.c" ] || { echo "win-cmocka: no src/cmocka.c in $orig" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
cp -r "$top" "$dir"
echo "win-cmocka: $(basename "$orig") unpacked into $dir"
