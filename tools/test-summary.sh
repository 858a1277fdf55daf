#!/bin/sh
# Sum the per-lane results written by run-tests.sh and print the closing
# line. Fails when any test failed or when nothing ran at all.
set -u
dir=$1
pass=0 fail=0 skip=0 lanes=""
for f in "$dir"/*.res; do
	[ -e "$f" ] || continue
	read -r p f2 s < "$f"
	lanes="$lanes $(basename "$f" .res):$p/$f2/$s"
	pass=$((pass + p)); fail=$((fail + f2)); skip=$((skip + s))
done
# What failed, last, so that an output cut to its tail still says why.
if [ -d "$dir/failures" ]; then
	for l in "$dir"/failures/*.log; do
		[ -e "$l" ] && cat "$l"
	done
fi
echo "lanes (passed/failed/skipped):$lanes"
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
