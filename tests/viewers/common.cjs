// SPDX-License-Identifier: BSD-2-Clause
// Shared by the viewers lane's tests (tests/viewers/*.test.cjs, run by
// tests/viewers/run.sh): where the inputs are, the folded report as the
// reference every viewer is compared with, and the browser.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

// run.sh makes the inputs (a recording of build/demo and its outputs) and
// says where; a test run by hand without it would read stale files.
const OUT = process.env.VIEWERS_OUT;
const ARTIFACTS = process.env.VIEWERS_ARTIFACTS;
if (!OUT || !ARTIFACTS)
	throw new Error('VIEWERS_OUT and VIEWERS_ARTIFACTS unset: run tests/viewers/run.sh');
const CHROMIUM = process.env.VIEWERS_CHROMIUM || '/usr/bin/chromium';

// "a;b;c N" lines -> Map(stack -> count), as tests/outputs/*.cjs read them.
function readFolded(file) {
	const m = new Map();
	for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
		if (!line) continue;
		const sp = line.lastIndexOf(' ');
		const k = line.slice(0, sp);
		m.set(k, (m.get(k) || 0) + Number(line.slice(sp + 1)));
	}
	return m;
}

function total(folded) {
	let n = 0;
	for (const v of folded.values()) n += v;
	return n;
}

// Samples whose stack holds a frame named NAME (each sample once, however
// often the name occurs in it: what a flame graph's search covers).
function samplesWith(folded, name) {
	let n = 0;
	for (const [k, v] of folded)
		if (k.split(';').slice(1).includes(name)) n += v;
	return n;
}

// Why the browser cannot run, or null. Only a missing or non-starting
// binary is a reason to skip; once it starts, a failed launch is a failure.
function chromiumMissing() {
	if (!fs.existsSync(CHROMIUM))
		return CHROMIUM + ' not installed (make deps installs chromium, tools/deps.d/viewers.list)';
	try {
		execFileSync(CHROMIUM, ['--version'], { stdio: 'pipe', timeout: 30000 });
	} catch (e) {
		return CHROMIUM + ' --version failed: ' + String(e.stderr || e.message).trim();
	}
	return null;
}

async function launch() {
	const { chromium } = require('playwright-core');
	// --no-sandbox: the lane runs as root, where chromium's sandbox refuses.
	return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

// Every request, console error and page error of a browser context, for the
// "no network" and "no error" assertions.
function watch(context) {
	const seen = { requests: [], errors: [] };
	context.on('request', (r) => seen.requests.push(r.url()));
	context.on('page', (page) => {
		page.on('console', (m) => { if (m.type() === 'error') seen.errors.push('console: ' + m.text()); });
		page.on('pageerror', (e) => seen.errors.push('pageerror: ' + e.message));
	});
	return seen;
}

module.exports = { OUT, ARTIFACTS, CHROMIUM, readFolded, total, samplesWith, chromiumMissing,
	launch, watch, path, fs };
