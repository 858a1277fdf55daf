#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# What libstackprobe.so exports (make test-exports, mk/exports.mk). The
# library is LD_PRELOADed ahead of every library of the profiled program, so
# each symbol it exports replaces the program's own of that name: it may
# export the public API and the libc functions the agent interposes, nothing
# else.
#
# The allowed lists are derived, never written here: the public API is every
# function declared SPROBE_API in include/stackprobe.h and
# include/stackprobe/*.h; the interposed functions are the plain names of the
# version script's global: section (userspace/libstackprobe.map). Each check
# names the offending symbols.
#
#   exports_test.sh headers            every non-static function declared in
#                                      a public header carries SPROBE_API
#   exports_test.sh exports LIB        every defined dynamic symbol of LIB is
#                                      SPROBE_API or an interposed name
#   exports_test.sh api LIB ARCHIVE    every SPROBE_API function ARCHIVE
#                                      defines is exported by LIB
#   exports_test.sh agent LIB OBJ...   every global function the agent's
#                                      objects define is exported by LIB
#                                      (else it silently stops interposing)
#   exports_test.sh selftest           the exports and agent checks fail,
#                                      naming them, on a library that exports
#                                      an internal / hides a wrapper
# Exit 0 on success, 1 on a failed check, 2 on a usage or tool error.
set -euo pipefail
CC=${CC:-cc}
NM=${NM:-nm}
MAP=${SPROBE_EXPORTS_MAP:-userspace/libstackprobe.map}
self=$0

die() { echo "exports_test: $*" >&2; exit 2; }

# "api NAME" / "static NAME" / "bare NAME" for every top-level function
# declaration of the public headers. The preprocessor strips comments and
# resolves #if; SPROBE_API is turned into a token the parser can see.
# Declarations are cut at ';' and '{' outside braces, so static inline
# bodies and struct members are skipped. win.h's declarations are under
# _WIN32: a second pass defines it.
header_decls() {
	local pass
	for pass in "" "-D_WIN32"; do
		printf '#include <stackprobe.h>\n#include <stackprobe/win.h>\n' |
			"$CC" -E -D_GNU_SOURCE $pass -DSPROBE_API=__sprobe_api__ -Iinclude -x c - ||
			die "cannot preprocess the public headers"
	done | awk '
	/^# [0-9]+ "/ { ours = ($3 ~ /include\/stackprobe(\.h|\/)/); next }
	ours { text = text " " $0 }
	function emit(s,   name) {
		if (s ~ /typedef/ || !match(s, /sprobe_[A-Za-z0-9_]+[ \t]*\(/))
			return
		name = substr(s, RSTART, RLENGTH)
		sub(/[ \t]*\($/, "", name)
		if (s ~ /__sprobe_api__/)
			print "api", name
		else if (s ~ /(^|[^A-Za-z0-9_])static([^A-Za-z0-9_]|$)/)
			print "static", name
		else
			print "bare", name
	}
	END {
		depth = 0; stmt = ""; n = length(text)
		for (i = 1; i <= n; i++) {
			c = substr(text, i, 1)
			if (c == "{") { if (depth == 0) emit(stmt); depth++; stmt = ""; continue }
			if (c == "}") { depth--; continue }
			if (depth > 0) continue
			if (c == ";") { emit(stmt); stmt = ""; continue }
			stmt = stmt c
		}
	}' | sort -u
}

api_names() {
	local names
	names=$(header_decls | awk '$1 == "api" { print $2 }')
	# A parse that finds nothing would let every check pass.
	[ "$(printf '%s\n' "$names" | grep -c .)" -ge 50 ] ||
		die "found $(printf '%s\n' "$names" | grep -c .) SPROBE_API declarations; the header parse is broken"
	printf '%s\n' "$names"
}

# The plain names of the version script's global: section (the sprobe_*
# pattern is not a name: the API comes from the headers).
interposed_names() {
	[ -r "$MAP" ] || die "no version script $MAP"
	sed -e 's|/\*.*\*/||g' "$MAP" | awk '
	/\/\*/ { incomment = 1 }
	incomment { if ($0 ~ /\*\//) incomment = 0; next }
	/^[ \t]*global:/ { g = 1; next }
	/^[ \t]*local:/ { g = 0; next }
	g && /^[ \t]*[A-Za-z_][A-Za-z0-9_]*;[ \t]*$/ { gsub(/[ \t;]/, ""); print }' | sort -u
}

# The defined dynamic symbols of a shared library, without @version.
dynamic_defined() {
	[ -r "$1" ] || die "no library $1"
	"$NM" -D --defined-only "$1" | awk 'NF >= 3 { print $3 } NF == 2 { print $2 }' |
		sed 's/@.*//' | sort -u
}

check_headers() {
	local bare
	bare=$(header_decls | awk '$1 == "bare" { print $2 }')
	if [ -n "$bare" ]; then
		echo "FAIL: declared in a public header without SPROBE_API (hidden in libstackprobe.so):"
		printf '  %s\n' $bare
		return 1
	fi
	echo "ok: $(api_names | wc -l) public functions, each declared SPROBE_API"
}

check_exports() {
	local lib=$1 allowed exported bad
	allowed=$( { api_names; interposed_names; } | sort -u)
	exported=$(dynamic_defined "$lib")
	[ -n "$exported" ] || { echo "FAIL: $lib defines no dynamic symbol"; return 1; }
	bad=$(comm -23 <(printf '%s\n' "$exported") <(printf '%s\n' "$allowed"))
	if [ -n "$bad" ]; then
		echo "FAIL: $lib exports $(printf '%s\n' "$bad" | wc -l) symbols that are neither SPROBE_API" \
			"(include/) nor interposed ($MAP):"
		printf '  %s\n' $bad
		return 1
	fi
	echo "ok: $lib exports $(printf '%s\n' "$exported" | wc -l) symbols," \
		"$(comm -12 <(printf '%s\n' "$exported") <(interposed_names) | wc -l) of them interposed libc names"
}

check_api() {
	local lib=$1 ar=$2 defined missing
	[ -r "$ar" ] || die "no archive $ar"
	defined=$("$NM" -g --defined-only "$ar" 2>/dev/null | awk '$2 == "T" { print $3 }' | sort -u)
	missing=$(comm -12 <(printf '%s\n' "$defined") <(api_names) |
		comm -23 - <(dynamic_defined "$lib"))
	if [ -n "$missing" ]; then
		echo "FAIL: SPROBE_API functions defined in $ar but not exported by $lib:"
		printf '  %s\n' $missing
		return 1
	fi
	echo "ok: the $(comm -12 <(printf '%s\n' "$defined") <(api_names) | wc -l) SPROBE_API" \
		"functions $ar defines are all exported by $lib"
}

check_agent() {
	local lib=$1 wrappers hidden unlisted
	shift
	[ $# -gt 0 ] || die "agent: no object given"
	# Global functions of default visibility: the helpers the agent's
	# files share are hidden (userspace/agent/agent_internal.h), never exported,
	# and are no wrappers. readelf, since nm does not show visibility.
	wrappers=$(readelf -sW "$@" | awk '($4 == "FUNC" || $4 == "IFUNC") &&
		($5 == "GLOBAL" || $5 == "WEAK") && $6 == "DEFAULT" && $7 != "UND" { print $8 }' | sort -u)
	[ -n "$wrappers" ] || { echo "FAIL: $* define no global function (no wrapper?)"; return 1; }
	hidden=$(comm -23 <(printf '%s\n' "$wrappers") <(dynamic_defined "$lib"))
	unlisted=$(comm -23 <(printf '%s\n' "$wrappers") <(interposed_names))
	if [ -n "$hidden" ] || [ -n "$unlisted" ]; then
		echo "FAIL: agent functions that would not interpose (add each to the global: list of $MAP):"
		printf '  %s\n' $( { printf '%s\n' $hidden $unlisted; } | sort -u)
		return 1
	fi
	echo "ok: all $(printf '%s\n' "$wrappers" | wc -l) agent wrappers are exported by $lib"
	local later
	later=$(comm -13 <(printf '%s\n' "$wrappers") <(interposed_names) | tr '\n' ' ')
	[ -z "$later" ] || echo "   listed in $MAP, no wrapper yet: $later"
}

# The checks must be able to fail: a library exporting internals, and an
# agent object with a wrapper the version script does not list.
check_selftest() {
	local tmp out rc
	tmp=$(mktemp -d /tmp/stackprobe-exports.XXXXXX)
	trap 'rm -rf "$tmp"' RETURN
	cat > "$tmp/leak.c" <<-'EOF'
	const char *sprobe_version(void) { return "x"; }      /* API: allowed */
	int sighold(int s) { return s; }                      /* interposed: allowed */
	int ro_hash(int x) { return x; }                      /* internal */
	int sprobe_snapshot__reset(int x) { return x; }       /* private sprobe_ */
	EOF
	"$CC" -shared -fPIC -w -o "$tmp/leak.so" "$tmp/leak.c" || die "cannot build $tmp/leak.so"
	rc=0; out=$("$self" exports "$tmp/leak.so") || rc=$?
	[ $rc -eq 1 ] || { echo "FAIL: exports check passed (rc $rc) a library exporting internals: $out"; return 1; }
	for s in ro_hash sprobe_snapshot__reset; do
		grep -qx "  $s" <<<"$out" || { echo "FAIL: exports check did not name $s: $out"; return 1; }
	done
	for s in sprobe_version sighold; do
		! grep -qx "  $s" <<<"$out" || { echo "FAIL: exports check named allowed $s: $out"; return 1; }
	done
	echo "ok: exports check fails on a leaking library and names ro_hash, sprobe_snapshot__reset"

	cat > "$tmp/agent.c" <<-'EOF'
	int dup2(int a, int b) { return a + b; }              /* listed: exported */
	int sprobe_unlisted_wrapper(int a) { return a; }      /* not interposed */
	int unlisted_wrapper(int a) { return a; }             /* made local by the map */
	EOF
	"$CC" -c -fPIC -w -o "$tmp/agent.o" "$tmp/agent.c" &&
		"$CC" -shared -o "$tmp/agent.so" "$tmp/agent.o" -Wl,--version-script="$MAP" ||
		die "cannot build $tmp/agent.so"
	rc=0; out=$("$self" agent "$tmp/agent.so" "$tmp/agent.o") || rc=$?
	[ $rc -eq 1 ] || { echo "FAIL: agent check passed (rc $rc) an unlisted wrapper: $out"; return 1; }
	for s in unlisted_wrapper sprobe_unlisted_wrapper; do
		grep -qx "  $s" <<<"$out" || { echo "FAIL: agent check did not name $s: $out"; return 1; }
	done
	! grep -qx "  dup2" <<<"$out" || { echo "FAIL: agent check named the listed dup2: $out"; return 1; }
	echo "ok: agent check fails on a wrapper missing from $MAP and names it"
}

[ $# -ge 1 ] || die "usage: exports_test.sh headers|exports LIB|api LIB ARCHIVE|agent LIB OBJ...|selftest"
cmd=$1; shift
case "$cmd" in
headers) check_headers ;;
exports) [ $# -eq 1 ] || die "usage: exports LIB"; check_exports "$1" ;;
api) [ $# -eq 2 ] || die "usage: api LIB ARCHIVE"; check_api "$1" "$2" ;;
agent) [ $# -ge 2 ] || die "usage: agent LIB OBJ..."; check_agent "$@" ;;
selftest) check_selftest ;;
*) die "unknown check $cmd" ;;
esac
