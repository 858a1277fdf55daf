#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Install test (make test-install, mk/outputs.mk): install into a temporary
# DESTDIR with PREFIX=/usr, then, using only what was installed:
#   - build examples/embed.c with the installed pkg-config file, shared and
#     static, and run both (the example checks its own results);
#   - run the installed CLI on the data file the example wrote;
#   - render both installed man pages with man -l (no warnings allowed).
# Prints one line per check; exit 1 at the first failure.
#   install_test.sh [MAKE]
set -euo pipefail
MAKE=${1:-make}
tmp=$(mktemp -d /tmp/stackprobe-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

$MAKE --no-print-directory install DESTDIR="$dest" PREFIX=/usr >"$tmp/install.log" 2>&1 \
	|| { cat "$tmp/install.log"; fail "make install"; }
for f in usr/bin/stackprobe usr/lib/libstackprobe.a usr/lib/libstackprobe.so \
	 usr/lib/libstackprobe.so.0 usr/include/stackprobe.h usr/include/stackprobe/sampler.h \
	 usr/include/stackprobe/report.h usr/lib/pkgconfig/stackprobe.pc \
	 usr/share/man/man1/stackprobe.1 usr/share/man/man3/libstackprobe.3; do
	[ -e "$dest/$f" ] || fail "not installed: /$f"
done
ok "make install DESTDIR=... PREFIX=/usr put every file in place"

export PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_PATH=$dest/usr/lib/pkgconfig PKG_CONFIG_LIBDIR=$dest/usr/lib/pkgconfig
cflags=$(pkg-config --cflags stackprobe) || fail "pkg-config --cflags"
libs=$(pkg-config --libs stackprobe) || fail "pkg-config --libs"
slibs=$(pkg-config --static --libs stackprobe) || fail "pkg-config --static --libs"
case "$cflags $libs" in *"$dest"*) ;; *) fail "pkg-config paths do not point into DESTDIR: $cflags $libs";; esac
# The example must come from the installed headers only: no -Iinclude.
cc -std=gnu11 -Wall -Wextra -Werror -pthread $cflags -o "$tmp/embed-shared" examples/embed.c $libs \
	|| fail "build examples/embed.c against the installed shared library"
ok "built embed.c with: $cflags $libs"
cc -std=gnu11 -Wall -Wextra -Werror -pthread $cflags -o "$tmp/embed-static" examples/embed.c \
	-Wl,-Bstatic -lstackprobe -Wl,-Bdynamic ${slibs/-lstackprobe/} \
	|| fail "build examples/embed.c against the installed static library"
ok "built embed.c statically with: $slibs"
# The shared build must really load the installed library.
LD_LIBRARY_PATH=$dest/usr/lib ldd "$tmp/embed-shared" >"$tmp/ldd.txt"
grep -q "$dest/usr/lib/libstackprobe.so.0" "$tmp/ldd.txt" \
	|| { cat "$tmp/ldd.txt"; fail "embed-shared does not load the installed libstackprobe.so.0"; }
LD_LIBRARY_PATH=$dest/usr/lib "$tmp/embed-shared" "$tmp/embed.data" >"$tmp/shared.out" 2>&1 \
	|| { cat "$tmp/shared.out"; fail "embed (shared) failed"; }
tail -n 2 "$tmp/shared.out"
ok "embed (shared) ran and passed its checks"
"$tmp/embed-static" >"$tmp/static.out" 2>&1 || { cat "$tmp/static.out"; fail "embed (static) failed"; }
ok "embed (static) ran and passed its checks"
"$dest/usr/bin/stackprobe" report -i "$tmp/embed.data" >"$tmp/report.txt" \
	|| fail "installed stackprobe report on the example's data file"
grep -q 'embed_spin' "$tmp/report.txt" || { cat "$tmp/report.txt"; fail "report has no embed_spin"; }
ok "installed CLI reports the example's data file (embed_spin present)"
for page in man1/stackprobe.1 man3/libstackprobe.3; do
	out=$(MANWIDTH=80 man --warnings -l "$dest/usr/share/man/$page" 2>&1 >"$tmp/page.txt") \
		|| fail "man -l $page"
	[ -z "$out" ] || fail "man -l $page warns: $out"
	[ "$(wc -l <"$tmp/page.txt")" -gt 20 ] || fail "man -l $page rendered almost nothing"
done
ok "man -l renders stackprobe(1) and libstackprobe(3) without warnings"
