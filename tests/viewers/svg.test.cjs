// SPDX-License-Identifier: BSD-2-Clause
// The SVG flame graph (`report --format svg`, userspace/report/svg.c) in a
// real browser: Debian's chromium driven by playwright-core, the file opened
// by its file:// URL as a user opens it. Reference: the folded report of
// the same recording of build/demo.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { pathToFileURL } = require('url');
const C = require('./common.cjs');

const SVG = C.path.join(C.OUT, 'demo.svg');
const URL_ = pathToFileURL(SVG).href;
const folded = C.readFolded(C.path.join(C.OUT, 'demo.folded'));
const TOTAL = C.total(folded);
const FULL_W = 1200 - 2 * 10;	// svg.c: IMG_W - 2 * PAD

const skip = C.chromiumMissing();

// Skipped test by test (the runner counts skipped tests, not suites).
describe('SVG flame graph in chromium', () => {
	let browser, context, seen;

	before(async () => {
		if (skip) return;
		browser = await C.launch();
		// Wider than the image, so one SVG unit is one CSS pixel.
		context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
		seen = C.watch(context);
	});
	after(async () => { if (browser) await browser.close(); });

	async function open() {
		const page = await context.newPage();
		await page.goto(URL_);
		await page.waitForSelector('#samples g.f');
		return page;
	}

	// The widest frame of the samples graph named NAME, as a locator, with
	// its title and geometry.
	async function frame(page, name) {
		const i = await page.evaluate((name) => {
			let best = -1, bw = -1;
			document.querySelectorAll('#samples g.f').forEach((g, i) => {
				const t = g.querySelector('title').textContent;
				if (t.startsWith(name + ' (') && +g.dataset.w > bw) { best = i; bw = +g.dataset.w; }
			});
			return best;
		}, name);
		assert.ok(i >= 0, 'no frame named ' + name + ' in the samples graph');
		const loc = page.locator('#samples g.f').nth(i);
		return { loc, rect: loc.locator('rect'), title: await loc.locator('title').textContent() };
	}

	const width = async (rect) => Number(await rect.getAttribute('width'));

	it('renders the frames of the folded report, root counting every sample', { skip: skip || false }, async () => {
		const page = await open();
		for (const name of ['parse_json', 'compress_reply', 'churn', 'lock_loop', 'all']) {
			const f = await frame(page, name);
			const box = await f.rect.boundingBox();
			// Drawn (laid out with a size), not only present in the DOM.
			assert.ok(box && box.width > 1 && box.height > 10, name + ' not drawn: ' + JSON.stringify(box));
			assert.ok(await f.rect.isVisible(), name + ' hidden');
		}
		const root = await frame(page, 'all');
		assert.match(root.title, new RegExp('^all \\(' + TOTAL + ' samples, 100\\.00%\\)$'));
		// Every thread label of the folded report is a frame.
		const threads = new Set([...folded.keys()].map((k) => k.split(';')[0]));
		for (const t of threads) await frame(page, t);
		await page.close();
	});

	it('hover shows the frame, its samples and share', { skip: skip || false }, async () => {
		const page = await open();
		const f = await frame(page, 'compress_reply');
		const details = page.locator('#samples .details');
		await f.rect.hover();
		await page.waitForFunction(() => document.querySelector('#samples .details').textContent.trim() !== '');
		const text = await details.textContent();
		const m = /^compress_reply \((\d+) samples?, (\d+\.\d\d)%\)$/.exec(text);
		assert.ok(m, 'details line: ' + JSON.stringify(text));
		// The widest compress_reply is one thread's: its count is that
		// thread's folded count, and the share is of all samples.
		const perThread = new Map();
		for (const [k, v] of folded) {
			const p = k.split(';');
			if (p.includes('compress_reply')) perThread.set(p[0], (perThread.get(p[0]) || 0) + v);
		}
		assert.equal(Number(m[1]), Math.max(...perThread.values()));
		assert.equal(m[2], (100 * Number(m[1]) / TOTAL).toFixed(2));
		// The native tooltip (the title element) says the same.
		assert.equal(f.title, text);
		// Leaving the frame clears the line.
		await page.mouse.move(5, 5);
		await page.waitForFunction(() => document.querySelector('#samples .details').textContent.trim() === '');
		await page.close();
	});

	it('click zooms: the frame takes the full width, its children scale, others hide', { skip: skip || false }, async () => {
		const page = await open();
		const pj = await frame(page, 'parse_json');
		const w0 = await width(pj.rect);
		assert.ok(w0 < FULL_W / 2, 'parse_json already wide: ' + w0);
		const child = pj.loc.locator('xpath=following-sibling::*[1]');	// drawn right after: its first child
		const cw0 = await width(child.locator('rect'));
		const other = await frame(page, 'compress_reply');	// a sibling, not inside parse_json
		assert.ok(await other.rect.isVisible());

		await pj.rect.click();
		await page.waitForSelector('#samples .unzoom:not(.hide)');
		assert.equal(await width(pj.rect), FULL_W);
		const box = await pj.rect.boundingBox();
		assert.ok(Math.abs(box.width - FULL_W) < 1, 'on screen: ' + box.width);
		assert.ok(Math.abs(await width(child.locator('rect')) - cw0 * FULL_W / w0) < 0.1,
			'child not scaled with the zoom');
		assert.ok(await other.rect.isHidden(), 'compress_reply still shown after zooming into parse_json');
		await page.screenshot({ path: C.path.join(C.ARTIFACTS, 'svg-zoomed.png') });

		// "Reset Zoom" goes back to the whole graph.
		await page.locator('#samples .unzoom').click();
		await page.waitForSelector('#samples .unzoom.hide', { state: 'attached' });
		assert.ok(Math.abs(await width(pj.rect) - w0) < 0.01);
		assert.ok(await other.rect.isVisible());
		await page.close();
	});

	it('search highlights the matching frames and shows the matched share', { skip: skip || false }, async () => {
		const page = await open();
		// The Search control asks with a prompt, as flamegraph.pl's does.
		page.once('dialog', (d) => d.accept('^parse_json$'));
		await page.locator('.search').click();
		await page.waitForFunction(() => /Matched/.test(document.querySelector('#samples .matched').textContent));
		const got = await page.evaluate(() => [...document.querySelectorAll('#samples g.f')].map((g) => ({
			name: g.querySelector('title').textContent.replace(/ \([^(]*\)$/, ''),
			match: g.classList.contains('match'),
			fill: getComputedStyle(g.querySelector('rect')).fill,
		})));
		const hits = got.filter((g) => g.match);
		assert.ok(hits.length >= 2, 'parse_json of both compute threads: ' + hits.length);
		for (const g of got) {
			assert.equal(g.match, g.name === 'parse_json', g.name + ' match=' + g.match);
			if (g.match) assert.equal(g.fill, 'rgb(230, 0, 230)', 'highlight colour');
			else assert.notEqual(g.fill, 'rgb(230, 0, 230)', g.name + ' highlighted');
		}
		const text = await page.locator('#samples .matched').textContent();
		const share = Number(/^Matched: (\d+\.\d\d)%$/.exec(text)?.[1]);
		const want = 100 * C.samplesWith(folded, 'parse_json') / TOTAL;
		assert.ok(Math.abs(share - want) < 0.02, text + ', folded says ' + want.toFixed(2) + '%');
		await (await frame(page, 'parse_json')).rect.hover();	// the details line in the picture too
		await page.screenshot({ path: C.path.join(C.ARTIFACTS, 'svg-search.png') });

		// Clicking again ("Reset Search") clears the highlight and the share.
		assert.equal(await page.locator('.search').textContent(), 'Reset Search');
		await page.locator('.search').click();
		await page.waitForFunction(() => !document.querySelector('g.f.match'));
		assert.equal((await page.locator('#samples .matched').textContent()).trim(), '');
		await page.close();
	});

	it('makes no network request and raises no script error', { skip: skip || false }, async () => {
		// After the tests above (hover, zoom, search: every script path),
		// the file's own URL is the only one the pages asked for.
		const foreign = seen.requests.filter((u) => u !== URL_);
		assert.ok(seen.requests.includes(URL_), 'the SVG itself was not requested');
		assert.deepEqual(foreign, []);
		assert.deepEqual(seen.errors, []);
	});
});
