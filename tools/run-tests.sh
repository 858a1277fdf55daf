#!/bin/bash
# Run test programs, count their results, write "<passed> <failed> <skipped>"
# to RESULT. Understands cmocka's summary lines; a program that prints none
# counts as one test judged by its exit status. Each program gets a hard
# timeout (SPROBE_TEST_TIMEOUT seconds, default 600) so a hang is a failure,
# not a stuck CI.
#   run-tests.sh RESULT PROG [PROG...]      (PROG may be "cmd with args")
set -u
res=$1; shift
timeout_s=${SPROBE_TEST_TIMEOUT:-600}
pass=0 fail=0 skip=0
mkdir -p "$(dirname "$res")"
for prog in "$@"; do
	log=$(mktemp)
	echo "== $prog"
	CMOCKA_MESSAGE_OUTPUT=stdout timeout -k 10 "$timeout_s" $prog >"$log" 2>&1
	rc=$?
	cat "$log"
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
	s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
	if ! grep -q '^\[==========\]' "$log"; then
		# Not a cmocka program: one test, judged by exit status.
		if [ $rc -eq 0 ]; then p=1; else f=1; fi
	elif [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		# Crashed or timed out after (or without) its summary.
		f=1
	fi
	[ $rc -eq 124 ] && echo "!! $prog timed out after ${timeout_s}s"
	[ $rc -ne 0 ] && echo "!! $prog exited with status $rc"
	if [ "$f" -gt 0 ]; then
		# Named by the program and its last word (a test's name, the
		# program an emulator runs), so that the PROGs of a lane that
		# run one program with different arguments keep a log each.
		name=$(basename "${prog%% *}")
		last=$(basename "${prog##* }")
		[ "$last" != "$name" ] && name="$name-$last"
		name=$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.+-' '_')
		# The summary (tools/test-summary.sh) prints these last, where a
		# CI excerpt that keeps only the tail still shows why.
		fdir="$(dirname "$res")/failures"
		mkdir -p "$fdir"
		{
			echo "==== $(basename "$res" .res): $prog (exit $rc)"
			grep -n -E '^\[  (FAILED|ERROR) |Sanitizer|runtime error|Segmentation fault|Aborted' "$log" | tail -n 20
			echo "---- last 60 lines"
			tail -n 60 "$log"
		} > "$fdir/$(basename "$res" .res)-$name.log"
	fi
	pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
	rm -f "$log"
done
echo "$pass $fail $skip" > "$res"
[ $fail -eq 0 ]
