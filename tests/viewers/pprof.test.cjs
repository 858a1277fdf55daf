// SPDX-License-Identifier: BSD-2-Clause
// `report --format pprof` read by the real pprof: `go tool pprof` from
// Debian's golang-go (the same reader as Pyroscope's and Parca's profile
// code), on every pprof file run.sh wrote (wall mode, cpu mode with
// weighted samples, one thread by --tid). Reference: the folded report of
// the same data file and options.
'use strict';
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('child_process');
const C = require('./common.cjs');

function goMissing() {
	try {
		execFileSync('go', ['version'], { stdio: 'pipe', timeout: 30000 });
	} catch (e) {
		return 'go cannot run (' + String(e.code || e.message) +
			'): make deps installs golang-go (tools/deps.d/viewers.list)';
	}
	return null;
}

function pprof(args, file) {
	return execFileSync('go', ['tool', 'pprof', ...args, file],
		{ encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000 });
}

// pprof marks a function inlined at a Location's pc with " (inline)"; the
// folded report names that frame "f (inlined)", as perf does.
// pprof's -top does not always mark an inlined function (a Location's
// inner Line keeps the plain name there): -top rows are compared by the
// plain name, the inline mark dropped on both sides.
function inl(name) {
	return name.replace(/ \(inline\)$/, ' (inlined)');
}
function plain(name) {
	return name.replace(/ \((inline|inlined)\)$/, '');
}

// -top table rows -> Map(name -> {flat, cum}), the rows' sum ("accounting
// for X") and the profile's total ("of Z total").
function parseTop(text) {
	const m = /Showing nodes accounting for (\S+), \S+ of (\S+) total/.exec(text);
	assert.ok(m, 'no -top summary line:\n' + text);
	const rows = new Map();
	let order = [];
	let inTable = false;
	for (const line of text.split('\n')) {
		if (/^\s+flat\s+flat%\s+sum%\s+cum\s+cum%/.test(line)) { inTable = true; continue; }
		if (!inTable || !line.trim()) continue;
		const r = /^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*)$/.exec(line);
		assert.ok(r, 'unparsed -top row: ' + line);
		const name = plain(r[6]);
		const had = rows.get(name);
		// Both an inlined and an out-of-line row of one function: flat
		// adds up; cum cannot be told from the two rows (a sample may
		// hold both), so it is not compared for that name.
		rows.set(name, had ? { flat: String(Number(had.flat) + Number(r[1])), cum: had.cum,
				       merged: true }
				   : { flat: r[1], cum: r[4] });
		order.push(name);
	}
	return { shown: m[1], total: m[2], rows, order };
}

// -traces with counts -> Map("thread_name-thread_id;root;...;leaf" -> n),
// the folded report's shape, built from pprof's own labels and stacks.
function parseTraces(text) {
	const got = new Map();
	// Each trace opens with a separator line, and one closes the list.
	const blocks = text.split(/^-+\+-+$/m).slice(1);
	assert.equal(blocks.pop().trim(), '', 'text after the last separator');
	assert.ok(blocks.length > 0, 'no traces:\n' + text);
	for (const b of blocks) {
		const labels = {};
		const frames = [];
		let n = null;
		for (const line of b.split('\n')) {
			if (!line.trim()) continue;
			const lab = /^\s*(\w+):\s+(.*)$/.exec(line);
			if (n === null && lab) { labels[lab[1]] = lab[2].trim(); continue; }
			const first = /^\s+(\d+)\s+(.*)$/.exec(line);
			if (n === null && first) { n = Number(first[1]); frames.push(inl(first[2])); continue; }
			frames.push(inl(line.trim()));
		}
		assert.ok(n !== null, 'trace without a count:\n' + b);
		assert.ok(labels.thread_name !== undefined && labels.thread_id !== undefined,
			'trace without the thread labels: ' + JSON.stringify(labels));
		const key = [labels.thread_name + '-' + labels.thread_id, ...frames.reverse()].join(';');
		got.set(key, (got.get(key) || 0) + n);
	}
	return got;
}

// Self samples (leaf) and samples holding the name (cum) per function name.
function flatCum(folded) {
	const flat = new Map(), cum = new Map();
	for (const [k, v] of folded) {
		const fr = k.split(';').slice(1).map(plain);
		if (fr.length) flat.set(fr[fr.length - 1], (flat.get(fr[fr.length - 1]) || 0) + v);
		for (const name of new Set(fr)) cum.set(name, (cum.get(name) || 0) + v);
	}
	return { flat, cum };
}

const skip = goMissing();
const inputs = [
	{ tag: 'demo', type: 'wall' },
	{ tag: 'cpu', type: 'cpu' },
	{ tag: 'tid', type: 'wall' },
];

// Skipped test by test (the runner counts skipped tests, not suites).
describe('go tool pprof', () => {
	for (const { tag, type } of inputs) {
		const pb = C.path.join(C.OUT, tag + '.pb.gz');
		const folded = C.readFolded(C.path.join(C.OUT, tag + '.folded'));
		const total = C.total(folded);

		it(tag + ': -traces, stack by stack, with the thread labels, equals the folded report', { skip: skip || false }, () => {
			const got = parseTraces(pprof(['-sample_index=samples', '-traces'], pb));
			assert.deepEqual(Object.fromEntries([...got].sort()), Object.fromEntries([...folded].sort()));
		});

		it(tag + ': -top has the folded report\'s total, top function, flat and cum of every function', { skip: skip || false }, () => {
			const top = parseTop(pprof(['-sample_index=samples', '-nodefraction=0', '-top'], pb));
			assert.equal(Number(top.total), total);
			assert.equal(Number(top.shown), total, 'nodes dropped despite -nodefraction=0');
			const { flat, cum } = flatCum(folded);
			// The first row is a function with the most self samples (ties
			// in any order).
			const most = Math.max(...flat.values());
			assert.equal(flat.get(top.order[0]), most, 'top function ' + top.order[0]);
			assert.equal(top.rows.size, cum.size, 'functions: ' + top.order.join(', '));
			for (const [name, r] of top.rows) {
				assert.equal(Number(r.flat), flat.get(name) || 0, name + ' flat');
				if (!r.merged)
					assert.equal(Number(r.cum), cum.get(name), name + ' cum');
			}
		});

		it(tag + ': the default sample type is ' + type + ' time, count x period', { skip: skip || false }, () => {
			const text = pprof(['-top'], pb);
			assert.match(text, new RegExp('^Type: ' + type + '$', 'm'));
			const t = /of (\d+(?:\.\d+)?)(ns|us|ms|s|mins|hrs) total/.exec(text);
			assert.ok(t, 'no time total:\n' + text);
			const scale = { ns: 1, us: 1e3, ms: 1e6, s: 1e9, mins: 60e9, hrs: 3600e9 }[t[2]];
			const want = total * Math.floor(1e9 / 199);	// run.sh records at 199 Hz
			// pprof rounds the total to the digits it prints ("1.51s"):
			// within half a unit of the last one (and 1 ns of float slack).
			const decimals = (t[1].split('.')[1] || '').length;
			const tol = 0.5 * Math.pow(10, -decimals) * scale + 1;
			assert.ok(Math.abs(Number(t[1]) * scale - want) <= tol,
				t[0] + ', want ' + want + ' ns (within ' + tol + ' ns)');
		});
	}

	it('-raw shows the thread labels of every sample; -tagfocus selects a thread by them', { skip: skip || false }, () => {
		const pb = C.path.join(C.OUT, 'demo.pb.gz');
		const folded = C.readFolded(C.path.join(C.OUT, 'demo.folded'));
		const raw = pprof(['-raw'], pb);
		const samples = raw.slice(raw.indexOf('Samples:'), raw.indexOf('Locations'));
		const n = (re) => (samples.match(re) || []).length;
		const rows = n(/^\s+\d+\s+\d+.*:.*$/gm);
		assert.ok(rows > 0, 'no samples in -raw:\n' + raw);
		// pprof prints the string labels on one line, the numeric ones
		// on the next: the thread's and its process's (pid, comm).
		assert.equal(n(/^\s+comm:\[[^\]]*\] thread_name:\[[^\]]+\]$/gm), rows);
		assert.equal(n(/^\s+pid:\[\d+\] thread_id:\[\d+\]$/gm), rows);
		// docs/OUTPUTS.md's example: one thread by its name.
		let want = 0;
		for (const [k, v] of folded) if (/^compute-0-\d+$/.test(k.split(';')[0])) want += v;
		assert.ok(want > 0);
		const top = parseTop(pprof(['-sample_index=samples', '-tagfocus=thread_name=compute-0', '-top'], pb));
		assert.equal(Number(top.shown), want);
		assert.equal(Number(top.total), C.total(folded));
	});
});
