// SPDX-License-Identifier: BSD-2-Clause
// A hot JS function for tests/test_perfmap.c, run with
// `node --perf-basic-prof`: V8 compiles hotLoop and writes its address
// range to /tmp/perf-PID.map. argv[2]: rounds (default 300). Prints the pid.
'use strict';
function hotLoop(n) {
	let s = 0;
	for (let i = 0; i < n; i++)
		s = (s + i * 7) % 1000003;
	return s;
}
function outer(k) {
	let t = 0;
	for (let j = 0; j < k; j++)
		t += hotLoop(1000000);
	return t;
}
console.log(process.pid);
outer(+process.argv[2] || 300);
