// SPDX-License-Identifier: BSD-2-Clause
// Independent reader for `stackprobe report --format speedscope`
// (tests/test_outputs.c).
//
//   node check_speedscope.cjs FILE.json FOLDED.txt FREQ
//
// Validates FILE against the JSON schema the speedscope npm package ships
// (dist/release/file-format-schema.json) with ajv, then checks what the
// schema cannot: frame indices in range, one weight per sample, each weight
// a whole number k >= 1 of sampling periods (unit nanoseconds) or k (unit
// none), where k is how many samples that one stands for (a cpu-mode record
// can carry several timer periods), endValue = the sum of the weights, and
// that the stacks (profile name, then frame names root first, with the
// folded report's escaping), each counted k times, equal FOLDED.txt, counts
// included. Prints one JSON summary line; exit 1 with the reason otherwise.
'use strict';
const fs = require('fs');
const path = require('path');
const Ajv = require('ajv');

function fail(msg) {
	console.error('check_speedscope: ' + msg);
	process.exit(1);
}

const [file, foldedFile, freqArg] = process.argv.slice(2);
if (!file || !foldedFile || freqArg === undefined)
	fail('usage: check_speedscope.cjs FILE FOLDED FREQ');
const freq = Number(freqArg);
const schemaPath = path.join(path.dirname(require.resolve('speedscope/package.json')),
	'dist', 'release', 'file-format-schema.json');
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);
if (!validate(doc))
	fail('schema: ' + ajv.errorsText(validate.errors));

const frames = doc.shared.frames;
const period = freq ? Math.floor(1e9 / freq) : 0;
const esc = (s) => s.replace(/;/g, ':').replace(/[\n\r]/g, ' ');
const got = new Map();
let total = 0;
for (const p of doc.profiles) {
	if (p.type !== 'sampled') fail('profile ' + p.name + ' is ' + p.type);
	if (p.samples.length !== p.weights.length) fail(p.name + ': samples and weights differ in length');
	const unit = period ? 'nanoseconds' : 'none';
	if (p.unit !== unit) fail(p.name + ': unit ' + p.unit + ', want ' + unit);
	let sum = 0;
	const unitW = period || 1;
	for (const w of p.weights) {
		if (!Number.isInteger(w) || w < unitW || w % unitW !== 0)
			fail(p.name + ': weight ' + w + ', want a multiple k >= 1 of ' + unitW);
		sum += w;
	}
	if (p.startValue !== 0 || p.endValue !== sum) fail(p.name + ': start/end value do not span the weights');
	for (const [j, s] of p.samples.entries()) {
		const k = p.weights[j] / unitW;	// samples this one stands for
		const names = s.map((i) => {
			if (!Number.isInteger(i) || i < 0 || i >= frames.length) fail(p.name + ': frame index ' + i);
			return esc(frames[i].name);
		});
		const key = [esc(p.name), ...names].join(';');
		got.set(key, (got.get(key) || 0) + k);
		total += k;
	}
}
const want = new Map();
for (const line of fs.readFileSync(foldedFile, 'utf8').split('\n')) {
	if (!line) continue;
	const sp = line.lastIndexOf(' ');
	want.set(line.slice(0, sp), (want.get(line.slice(0, sp)) || 0) + Number(line.slice(sp + 1)));
}
for (const [k, n] of want)
	if (got.get(k) !== n) fail('folded stack "' + k + '" x' + n + ', speedscope has x' + (got.get(k) || 0));
for (const [k, n] of got)
	if (!want.has(k)) fail('speedscope stack "' + k + '" x' + n + ' not in the folded report');
console.log(JSON.stringify({ samples: total, stacks: got.size, profiles: doc.profiles.length,
	frames: frames.length, exporter: doc.exporter, active: doc.activeProfileIndex }));
