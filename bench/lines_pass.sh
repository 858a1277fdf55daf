#!/bin/sh
# CPU of the `stackprobe record` process alone (perf stat --no-inherit: not
# the target's, not the agent's threads), whose share that varies with the
# DWARF loader is the names-and-lines pass after the merge
# (userspace/cli/record_lines.c), on the bench workload (benchload 4 100000
# 35, cpu mode, 999 Hz). Interleaved rounds of: this build with libdw's own
# loading (STACKPROBE_DWARF_LOADER=libdw), this build (dwarf_load.c) with
# no image cache ("nocache"), this build with a cache of its own, warmed by
# its first run ("cached", STACKPROBE_DWARF_CACHE: dwarf_cache.h), and,
# given a second build directory, that build (e.g. the branch point).
# Prints each run and the medians (docs/PERFORMANCE.md, "The DWARF loader").
#
#   flock /tmp/bench.lock bench/lines_pass.sh [build] [rounds] [other-build]
set -eu
build=${1:-build}
rounds=${2:-8}
other=${3:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
command -v perf >/dev/null || { echo "lines_pass: no perf (linux-perf): skipped"; exit 0; }
echo "lines_pass: $(uptime)"
variants="libdw nocache cached"
[ -n "$other" ] && variants="other $variants"
r=1
while [ "$r" -le "$rounds" ]; do
	for v in $variants; do
		sp=$build/stackprobe
		ld=fast
		cache=off
		[ "$v" = other ] && sp=$other/stackprobe
		[ "$v" = libdw ] && ld=libdw
		[ "$v" = cached ] && cache=$out/cache
		rm -f "$out/p.data"
		STACKPROBE_DWARF_CACHE=$cache STACKPROBE_DWARF_LOADER=$ld perf stat --no-inherit -x, -e task-clock,page-faults \
			-o "$out/stat" "$sp" record -q --no-bpf --no-report -F 999 --mode cpu \
			-o "$out/p.data" -- "$build/benchload" 4 100000 35 >/dev/null 2>&1
		ms=$(grep task-clock "$out/stat" | cut -d, -f1)
		pf=$(grep page-faults "$out/stat" | cut -d, -f1)
		echo "$v $r $ms $pf" | tee -a "$out/runs"
	done
	r=$((r + 1))
done
echo "lines_pass: $(uptime)"
# Median of a column of numbers on stdin.
median() { sort -n | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for v in $variants; do
	ms=$(grep "^$v " "$out/runs" | cut -d' ' -f3 | median)
	lo=$(grep "^$v " "$out/runs" | cut -d' ' -f3 | sort -n | head -n1)
	hi=$(grep "^$v " "$out/runs" | cut -d' ' -f3 | sort -n | tail -n1)
	pf=$(grep "^$v " "$out/runs" | cut -d' ' -f4 | median)
	echo "$v: record CLI task-clock median $ms ms (min $lo, max $hi), page faults $pf"
done
