// SPDX-License-Identifier: BSD-2-Clause
// Independent reader for `stackprobe report --format pprof` (tests/test_outputs.c).
//
//   node check_pprof.cjs PROFILE.pb.gz FOLDED.txt MODE FREQ [PATH=BUILDID ...]
//
// Decodes the profile with the npm package pprof-format (not our code),
// rebuilds the folded stacks from it (thread label, then function names
// root first, with the folded report's escaping) and requires them to equal
// FOLDED.txt line for line, counts included. Checks the sample types and
// period for MODE (wall|cpu) and FREQ (Hz), that every id points at
// something, every address lies in its mapping, every sample carries the
// thread labels, and that each PATH=BUILDID (from readelf, by the caller)
// has a mapping with that build id. Prints one JSON summary line; exit 1
// with the reason on the first mismatch.
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const { Profile } = require('pprof-format');

function fail(msg) {
	console.error('check_pprof: ' + msg);
	process.exit(1);
}

const [file, foldedFile, mode, freqArg, ...expectBuildIds] = process.argv.slice(2);
if (!file || !foldedFile || !mode || !freqArg)
	fail('usage: check_pprof.cjs PROFILE FOLDED MODE FREQ [PATH=BUILDID...]');
const freq = Number(freqArg);

const raw = fs.readFileSync(file);
if (raw[0] !== 0x1f || raw[1] !== 0x8b)
	fail('not gzip (no 1f 8b magic)');
const p = Profile.decode(zlib.gunzipSync(raw));
const strs = p.stringTable.strings;
const S = (i) => {
	if (i < 0 || i >= strs.length) fail('string index ' + i + ' out of range');
	return strs[i];
};
if (strs[0] !== '') fail('string_table[0] is not ""');

// Sample types and period.
const types = p.sampleType.map((t) => S(t.type) + '/' + S(t.unit));
const timeType = (mode === 'cpu' ? 'cpu' : 'wall') + '/nanoseconds';
if (types[0] !== 'samples/count') fail('sample type 0 is ' + types[0]);
const period = freq ? Math.floor(1e9 / freq) : 0;
if (freq) {
	if (types[1] !== timeType) fail('sample type 1 is ' + types[1] + ', want ' + timeType);
	if (S(p.periodType.type) + '/' + S(p.periodType.unit) !== timeType) fail('period type');
	if (Number(p.period) !== period) fail('period ' + p.period + ', want ' + period);
	if (S(p.defaultSampleType) !== (mode === 'cpu' ? 'cpu' : 'wall')) fail('default sample type');
}
const pauseIdx = types.indexOf('pause/nanoseconds');

// Tables by id.
const byId = (arr, what) => {
	const m = new Map();
	for (const x of arr) {
		if (!x.id) fail(what + ' with id 0');
		if (m.has(Number(x.id))) fail('duplicate ' + what + ' id ' + x.id);
		m.set(Number(x.id), x);
	}
	return m;
};
const maps = byId(p.mapping, 'mapping');
const locs = byId(p.location, 'location');
const funcs = byId(p.function, 'function');

for (const l of p.location) {
	// One Line per function: those inlined at the address first, its own last.
	if (l.line.length < 1 || l.line.length > 32) fail('location ' + l.id + ' has ' + l.line.length + ' lines');
	for (const ln of l.line)
		if (!funcs.has(Number(ln.functionId))) fail('location ' + l.id + ': bad function id');
	if (l.mappingId) {
		const m = maps.get(Number(l.mappingId));
		if (!m) fail('location ' + l.id + ': bad mapping id');
		const a = BigInt(l.address);
		if (a < BigInt(m.memoryStart) || a >= BigInt(m.memoryLimit))
			fail('location ' + l.id + ' address outside its mapping');
	}
}
for (const [path, id] of expectBuildIds.map((s) => s.split('='))) {
	const m = p.mapping.find((x) => S(x.filename) === path);
	if (!m) fail('no mapping for ' + path);
	if (S(m.buildId) !== id) fail(path + ': build id ' + S(m.buildId) + ', readelf says ' + id);
}

// Folded escaping, as the folded report does it.
const esc = (s) => s.replace(/;/g, ':').replace(/[\n\r]/g, ' ');

const got = new Map();
let total = 0, pauseTotal = 0n;
for (const s of p.sample) {
	const v = s.value.map((x) => BigInt(x));
	if (v.length !== types.length) fail('sample with ' + v.length + ' values for ' + types.length + ' types');
	const count = Number(v[0]);
	if (count <= 0) fail('sample with count ' + count);
	if (freq && v[1] !== BigInt(count) * BigInt(period)) fail('time value != count x period');
	if (pauseIdx >= 0) pauseTotal += v[pauseIdx];
	let tid = null, tname = null;
	for (const l of s.label) {
		const k = S(l.key);
		if (k === 'thread_id') tid = Number(l.num);
		if (k === 'thread_name') tname = S(l.str);
	}
	if (tid === null || tname === null) fail('sample without thread_id/thread_name labels');
	// An inlined function is a frame of its own in the folded report,
	// named "f (inlined)".
	const frames = s.locationId.flatMap((id) => {
		const l = locs.get(Number(id));
		if (!l) fail('sample points at missing location ' + id);
		return l.line.map((ln, k) => esc(S(funcs.get(Number(ln.functionId)).name) +
						 (k + 1 < l.line.length ? ' (inlined)' : '')));
	}).reverse(); // pprof is leaf first, folded root first
	const key = [esc(tname) + '-' + tid, ...frames].join(';');
	got.set(key, (got.get(key) || 0) + count);
	total += count;
}

const want = new Map();
let wantTotal = 0;
for (const line of fs.readFileSync(foldedFile, 'utf8').split('\n')) {
	if (!line) continue;
	const sp = line.lastIndexOf(' ');
	const n = Number(line.slice(sp + 1));
	want.set(line.slice(0, sp), (want.get(line.slice(0, sp)) || 0) + n);
	wantTotal += n;
}
for (const [k, n] of want)
	if (got.get(k) !== n) fail('folded stack "' + k + '" x' + n + ', pprof has x' + (got.get(k) || 0));
for (const [k, n] of got)
	if (!want.has(k)) fail('pprof stack "' + k + '" x' + n + ' not in the folded report');

console.log(JSON.stringify({
	samples: total, folded_samples: wantTotal, stacks: got.size, types,
	period: Number(p.period), mappings: p.mapping.length,
	mappings_with_build_id: p.mapping.filter((m) => S(m.buildId) !== '').length,
	locations: p.location.length, functions: p.function.length,
	pause_ns: pauseTotal.toString(), comments: p.comment.map((c) => S(c)),
	time_nanos: p.timeNanos.toString(), duration_nanos: p.durationNanos.toString(),
}));
