#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The suspend-window rule, checked on the object (make test-handler-nm,
# mk/capture.mk): backends/linux/handler.c holds the capture signal handler
# and everything it calls, so every function the handler can reach outside
# its own object is an undefined symbol of handler.o. Each must be on the
# allow-list (backends/linux/handler.allow, shell globs).
#
#   handler_nm_test.sh check ALLOW OBJ   every undefined symbol of OBJ is
#                                        allowed, and OBJ defines the handler
#   handler_nm_test.sh selftest ALLOW    the check fails, naming them, on an
#                                        object that calls malloc and printf
# Exit 0 on success, 1 on a failed check, 2 on a usage or tool error.
set -euo pipefail
CC=${CC:-cc}
NM=${NM:-nm}
self=$0

die() { echo "handler_nm_test: $*" >&2; exit 2; }

allowed() {
	local sym=$1 pat
	while IFS= read -r pat; do
		# shellcheck disable=SC2254 # the patterns are globs on purpose
		case $sym in $pat) return 0 ;; esac
	done < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$allow")
	return 1
}

check() {
	local obj=$1 bad=0 sym syms
	[ -f "$obj" ] || die "no object $obj"
	syms=$("$NM" -u "$obj" | awk '{print $NF}' | sed 's/@.*//' | sort -u) ||
		die "$NM -u $obj failed"
	for sym in $syms; do
		if ! allowed "$sym"; then
			echo "FAIL: $obj calls $sym, which is not in $allow" \
				"(the handler may only make async-signal-safe calls: backends/linux/linux.h)"
			bad=1
		fi
	done
	# An object that lost the handler would pass trivially.
	if ! "$NM" --defined-only "$obj" | awk '{print $NF}' | grep -qx sprobe_lx_capture_handler; then
		echo "FAIL: $obj does not define sprobe_lx_capture_handler"
		bad=1
	fi
	[ $bad -eq 0 ] && echo "ok: $obj calls only allowed functions:" $syms
	return $bad
}

selftest() {
	local tmp out
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	printf '%s\n' '#include <stdio.h>' '#include <stdlib.h>' \
		'void sprobe_lx_capture_handler(int sig);' \
		'void sprobe_lx_capture_handler(int sig) { void *p = malloc(16); printf("%p\n", p); (void)sig; }' \
		> "$tmp/bad.c"
	"$CC" -O2 -c "$tmp/bad.c" -o "$tmp/bad.o" || die "cannot compile the self-test object"
	if out=$("$self" check "$allow" "$tmp/bad.o"); then
		echo "FAIL: selftest: the check passed an object that calls malloc"
		return 1
	fi
	sed "s/^/  expected: /" <<<"$out"
	for sym in malloc printf; do
		if ! grep -q "calls $sym," <<<"$out"; then
			echo "FAIL: selftest: the check did not name $sym"
			return 1
		fi
	done
	echo "ok: selftest: the check fails naming malloc and printf"
}

[ $# -ge 2 ] || die "usage: $0 check ALLOW OBJ | selftest ALLOW"
mode=$1 allow=$2
[ -f "$allow" ] || die "no allow-list $allow"
case $mode in
check) [ $# -eq 3 ] || die "usage: $0 check ALLOW OBJ"; check "$3" ;;
selftest) selftest ;;
*) die "unknown mode $mode" ;;
esac
