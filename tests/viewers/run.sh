#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The viewers lane (mk/viewers.mk, `make test-viewers`): the outputs opened
# in the tools people open them in.
#
#   run.sh RESULT STACKPROBE DEMO NODE_MODULES
#
# Records build/demo once, writes every output of it into
# build/test-out/viewers/, runs tests/viewers/*.test.cjs with node's test
# runner and writes "<passed> <failed> <skipped>" (its counts) to RESULT.
# Screenshots go to build/test-results/viewers/. A test skips, saying why,
# only when chromium or go cannot run at all; any other trouble fails.
set -u
res=$1 cli=$2 demo=$3 modules=$4
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(dirname "$res")/..
out=$build/test-out/viewers
art=$(dirname "$res")/viewers
mkdir -p "$(dirname "$res")"
echo "0 1 0" > "$res"	# until the runner has counted: a crash here is a failure
rm -rf "$out" "$art" && mkdir -p "$out" "$art" || exit 1
out=$(cd "$out" && pwd) art=$(cd "$art" && pwd)

# The inputs: one wall-mode and one cpu-mode recording (cpu mode writes
# weighted samples), each in every format the viewers read.
"$cli" record -q -F 199 -o "$out/demo.data" -- "$demo" 2 || exit 1
"$cli" record -q -F 199 --mode cpu -o "$out/cpu.data" -- "$demo" 1 || exit 1
for t in demo cpu; do
	for f in folded:folded json:json pprof:pb.gz speedscope:speedscope.json svg:svg trace:trace.json html:html; do
		"$cli" report -i "$out/$t.data" --format "${f%%:*}" -o "$out/$t.${f#*:}" || exit 1
	done
done
# What changed between the two recordings (wall -> cpu mode): the diff's
# page and, as the reference, its JSON.
for f in html:html json:json; do
	"$cli" diff --format "${f%%:*}" -o "$out/diff.${f#*:}" "$out/demo.data" "$out/cpu.data" || exit 1
done
# One thread alone (--tid), as a user narrows a report: its pprof too.
tid=$(sed -n 's/^compute-0-\([0-9]*\);.*/\1/p' "$out/demo.folded" | head -n 1)
[ -n "$tid" ] || { echo "no compute-0 thread in the demo's folded report"; exit 1; }
for f in folded:folded pprof:pb.gz; do
	"$cli" report -i "$out/demo.data" --tid "$tid" --format "${f%%:*}" -o "$out/tid.${f#*:}" || exit 1
done

# go tool pprof writes its state under HOME (~/pprof) and go under GOCACHE:
# both into the build tree, not the user's home.
export HOME=$out/home GOCACHE=$out/home/gocache PPROF_TMPDIR=$out/home/pprof
mkdir -p "$HOME"
export NODE_PATH=$modules VIEWERS_OUT=$out VIEWERS_ARTIFACTS=$art
log=$out/node-test.log
# One test file at a time: two cores are shared, and chromium is heavy.
node --test --test-concurrency=1 --test-reporter=tap "$here"/*.test.cjs 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$log")
f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$log")
s=$(sed -n 's/^# skipped \([0-9]*\)$/\1/p' "$log")
c=$(sed -n 's/^# cancelled \([0-9]*\)$/\1/p' "$log")
if [ -z "$p" ] || [ -z "$f" ]; then
	echo "!! node --test printed no summary (exit $rc)"
	exit 1
fi
f=$((f + ${c:-0}))
# A non-zero exit with no failed test (a crash of the runner) still fails.
[ $rc -ne 0 ] && [ $f -eq 0 ] && f=1
echo "$p $f ${s:-0}" > "$res"
echo "viewers: $p passed, $f failed, ${s:-0} skipped (screenshots: $art)"
[ $f -eq 0 ]
