// SPDX-License-Identifier: BSD-2-Clause
// `stackprobe diff --format html` (userspace/report/diff_html.c) in a real
// browser: Debian's chromium driven by playwright-core. Reference: the JSON
// form of the same diff (userspace/report/diff_write.c), of the wall-mode
// and the cpu-mode recordings of build/demo that run.sh makes.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { pathToFileURL } = require('url');
const C = require('./common.cjs');

const URL_ = pathToFileURL(C.path.join(C.OUT, 'diff.html')).href;
const ref = JSON.parse(C.fs.readFileSync(C.path.join(C.OUT, 'diff.json'), 'utf8'));
const skip = C.chromiumMissing();
const p2 = (v) => (100 * v).toFixed(2);
// the page's rounding: a change of 1e-17 is +0.00, not -0.00
const round6 = (v) => Math.round(v * 1e6) / 1e6;
const change = (c) => (round6(c.delta) >= 0 ? '+' : '') + p2(round6(c.delta)) +
	(c.ci95 ? ' [' + p2(c.ci95[0]) + ', ' + p2(c.ci95[1]) + ']' : '') + (c.significant ? ' *' : '');

describe('diff page in chromium', () => {
	let browser, context, seen;

	before(async () => {
		if (skip) return;
		browser = await C.launch();
		context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
		seen = C.watch(context);
	});
	after(async () => { if (browser) await browser.close(); });

	async function open() {
		const page = await context.newPage();
		await page.goto(URL_);
		await page.waitForSelector('#fg .fr');
		return page;
	}

	it('the table lists every function of the JSON diff, in its order, with its changes', { skip: skip || false }, async () => {
		const page = await open();
		const rows = await page.locator('#rows tr').evaluateAll((trs) =>
			trs.slice(1).map((tr) => [...tr.children].map((td) => td.textContent)));
		const want = ref.functions.slice(0, 500);
		assert.ok(want.length > 5, 'functions in the diff: ' + want.length);
		assert.equal(rows.length, want.length);
		rows.forEach((r, i) => {
			const f = want[i];
			assert.equal(r[6], f.name);
			assert.equal(r[0], p2(f.base_share));
			assert.equal(r[1], p2(f.new_share));
			assert.equal(r[2], change(f));
			assert.equal(r[5], change(f.total));
		});
		await page.close();
	});

	it('the flame graph colours grown frames red and shrunk ones blue, and hover says both shares', { skip: skip || false }, async () => {
		const page = await open();
		const colours = await page.locator('#fg .fr').evaluateAll((ds) => ds.map((d) => d.style.background));
		const red = colours.filter((c) => /^rgb\(255, (\d+), \1\)$/.test(c) && c !== 'rgb(255, 255, 255)');
		const blue = colours.filter((c) => /^rgb\((\d+), \1, 255\)$/.test(c) && c !== 'rgb(255, 255, 255)');
		// wall -> cpu mode: the blocked threads' waits shrink, the running
		// code grows.
		assert.ok(red.length > 0 && blue.length > 0, 'red ' + red.length + ', blue ' + blue.length);
		const root = page.locator('#fg .fr').first();
		assert.equal(await root.textContent(), 'all');
		await root.hover();
		assert.equal(await page.locator('#tip').textContent(), 'all: base 100.00 %, new 100.00 %, change +0.00 points');
		await page.screenshot({ path: C.path.join(C.ARTIFACTS, 'diff.png') });
		await page.close();
	});

	it('raises no error and asks for nothing but the page', { skip: skip || false }, async () => {
		assert.deepEqual(seen.errors, []);
		assert.deepEqual(seen.requests.filter((u) => u !== URL_), []);
	});
});
