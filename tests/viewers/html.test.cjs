// SPDX-License-Identifier: BSD-2-Clause
// The HTML report (`report --format html`, userspace/report/html.c and
// html_page.c) in a real browser: Debian's chromium driven by
// playwright-core, the file opened by its file:// URL. References: the
// folded report of the same recording of build/demo (frames, samples) and
// its trace report (every capture window, written by another writer).
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { pathToFileURL } = require('url');
const C = require('./common.cjs');

const HTML = C.path.join(C.OUT, 'demo.html');
const URL_ = pathToFileURL(HTML).href;
const folded = C.readFolded(C.path.join(C.OUT, 'demo.folded'));
const TOTAL = C.total(folded);
const trace = JSON.parse(C.fs.readFileSync(C.path.join(C.OUT, 'demo.trace.json'), 'utf8'));
// The JSON report of the same recording: each function's shares and their
// 95 % intervals, as another writer computes them.
const report = JSON.parse(C.fs.readFileSync(C.path.join(C.OUT, 'demo.json'), 'utf8'));
const fnOf = new Map(report.functions.map((f) => [f.name, f]));
const hw = (e) => (100 * e).toFixed(2);
const handlers = trace.traceEvents.filter((e) => e.name === 'handler');
const kpauses = trace.traceEvents.filter((e) => e.cat === 'kernel' && /^kernel pause/.test(e.name));
const tidsWithWindows = new Set([...handlers, ...kpauses].map((e) => e.tid));

const skip = C.chromiumMissing();

// Samples per thread label ("name-tid", the folded report's root frame).
const perThread = new Map();
for (const [k, v] of folded) {
	const t = k.split(';')[0];
	perThread.set(t, (perThread.get(t) || 0) + v);
}

describe('HTML report in chromium', () => {
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
		page.on('dialog', (d) => { seen.errors.push('dialog: ' + d.message()); d.dismiss(); });
		await page.goto(URL_);
		await page.waitForSelector('#fg .fr');
		return page;
	}

	// The widest drawn frame named NAME, as a locator.
	async function frame(page, name) {
		const i = await page.evaluate((name) => {
			let best = -1, bw = -1;
			document.querySelectorAll('#fg .fr').forEach((d, i) => {
				const w = d.getBoundingClientRect().width;
				if (d.textContent === name && w > bw) { best = i; bw = w; }
			});
			return best;
		}, name);
		assert.ok(i >= 0, 'no frame named ' + name + ' in the flame graph');
		return page.locator('#fg .fr').nth(i);
	}
	const width = async (loc) => (await loc.boundingBox()).width;
	// Width of the first child of the widest parse_json / its width.
	const childShare = (page) => page.evaluate(() => {
		const ds = [...document.querySelectorAll('#fg .fr')].filter((d) => !d.classList.contains('anc'));
		const p = ds.filter((d) => d.textContent === 'parse_json')
			.sort((a, b) => b.getBoundingClientRect().width - a.getBoundingClientRect().width)[0];
		const pb = p.getBoundingClientRect();
		const c = ds.find((d) => { const b = d.getBoundingClientRect();
			return Math.abs(b.bottom - pb.top) < 3 && Math.abs(b.left - pb.left) < 0.5; });
		return c ? c.getBoundingClientRect().width / pb.width : -1;
	});
	const fullWidth = (page) => page.evaluate(() => document.getElementById('fg').clientWidth);

	it('loads with every section filled and the summary of the recording', { skip: skip || false }, async () => {
		const page = await open();
		const sum = await page.locator('#sum-samples').textContent();
		assert.match(sum, new RegExp('^' + TOTAL + ' in \\d+ captures'));
		assert.match(await page.locator('#sum-command').textContent(), /demo 2$/);
		assert.match(await page.locator('#sum-mode').textContent(), /^wall mode, 199 Hz/);
		assert.match(await page.locator('#sum-procs').textContent(), /^1 /);
		assert.ok(await page.locator('#procs tbody tr').count() === 1, 'one process row');
		const proc = await page.locator('#procs tbody tr').first().locator('td').allTextContents();
		assert.equal(proc[3], 'demo');
		assert.equal(proc[7], 'exit 0', 'how the process ended');
		assert.ok(await page.locator('#dist tr').count() >= 2, 'distribution rows');
		assert.ok(await page.locator('#hist .bar').count() > 0, 'histogram bars');
		assert.match(await page.locator('#drops').textContent(), /Records lost in the stream \(queue full\): 0/);
		await page.screenshot({ path: C.path.join(C.ARTIFACTS, 'html-page.png'), fullPage: true });
		await page.close();
	});

	it('flame graph: the folded frames drawn, the root counting every sample', { skip: skip || false }, async () => {
		const page = await open();
		for (const name of ['parse_json', 'compress_reply', 'churn', 'lock_loop', 'all', ...perThread.keys()]) {
			const f = await frame(page, name);
			const box = await f.boundingBox();
			assert.ok(box && box.width > 1 && box.height > 10, name + ' not drawn: ' + JSON.stringify(box));
		}
		const root = await frame(page, 'all');
		await root.hover();
		assert.equal(await page.locator('#fg-details').textContent(), 'all (' + TOTAL + ' samples, 100.00%)');
		// The tooltip follows the pointer and says the same first line.
		assert.ok(await page.locator('#tip').isVisible());
		assert.equal((await page.locator('#tip').textContent()).split('\n')[0], 'all (' + TOTAL + ' samples, 100.00%)');
		await page.close();
	});

	it('hover shows the frame, its samples and share', { skip: skip || false }, async () => {
		const page = await open();
		await (await frame(page, 'compress_reply')).hover();
		const text = await page.locator('#fg-details').textContent();
		const m = /^compress_reply \((\d+) samples?, (\d+\.\d\d)%\); function total (\d+\.\d\d)% \u00b1 (\d+\.\d\d), self (\d+\.\d\d)% \u00b1 (\d+\.\d\d) \(95 %\)$/.exec(text);
		assert.ok(m, 'details line: ' + JSON.stringify(text));
		// The function's shares and intervals, as the JSON report has them.
		const f = fnOf.get('compress_reply');
		assert.equal(m[3], (100 * f.total_share).toFixed(2));
		assert.equal(m[4], hw(f.total_err95));
		assert.equal(m[5], (100 * f.self_share).toFixed(2));
		assert.equal(m[6], hw(f.self_err95));
		const per = new Map();
		for (const [k, v] of folded) {
			const p = k.split(';');
			if (p.includes('compress_reply')) per.set(p[0], (per.get(p[0]) || 0) + v);
		}
		assert.equal(Number(m[1]), Math.max(...per.values()));
		assert.equal(m[2], (100 * Number(m[1]) / TOTAL).toFixed(2));
		await page.close();
	});

	it('click zooms: the frame takes the full width, its children scale, others go', { skip: skip || false }, async () => {
		const page = await open();
		const W = await fullWidth(page);
		const pj = await frame(page, 'parse_json');
		const w0 = await width(pj);
		assert.ok(w0 < W / 2, 'parse_json already wide: ' + w0);
		const kids0 = await page.evaluate(() => document.querySelectorAll('#fg .fr').length);
		const share0 = await childShare(page);
		assert.ok(share0 > 0 && share0 <= 1, 'parse_json has a child: ' + share0);
		await pj.click();
		await page.waitForFunction(() => !document.getElementById('fg-reset').disabled);
		const z = await frame(page, 'parse_json');
		assert.ok(Math.abs(await width(z) - W) < 1, 'zoomed width ' + (await width(z)) + ' of ' + W);
		// Every frame drawn now is parse_json, inside it, or an ancestor.
		const names = await page.evaluate(() => [...document.querySelectorAll('#fg .fr')].map((d) => d.textContent));
		assert.ok(!names.includes('compress_reply'), 'compress_reply still drawn: ' + names.join(','));
		assert.ok(!names.includes('lock_loop'), 'lock_loop (another thread) still drawn');
		assert.ok(names.length < kids0);
		// Its first child (drawn above it at its left edge) kept its share
		// of it: the children scale with the zoom.
		assert.ok(Math.abs(await childShare(page) - share0) < 0.005, 'child share ' + share0 + ' -> ' + (await childShare(page)));
		await page.screenshot({ path: C.path.join(C.ARTIFACTS, 'html-zoomed.png') });
		await page.locator('#fg-reset').click();
		await page.waitForFunction(() => document.getElementById('fg-reset').disabled);
		assert.ok(Math.abs(await width(await frame(page, 'parse_json')) - w0) < 0.5);
		await frame(page, 'compress_reply');
		await page.close();
	});

	it('search highlights the matching frames and shows the matched share', { skip: skip || false }, async () => {
		const page = await open();
		await page.locator('#fg-search').fill('^parse_json$');
		await page.waitForFunction(() => /Matched/.test(document.getElementById('fg-matched').textContent));
		const got = await page.evaluate(() => [...document.querySelectorAll('#fg .fr')].map((d) => ({
			name: d.textContent, match: d.classList.contains('match'), bg: getComputedStyle(d).backgroundColor,
		})));
		const hits = got.filter((g) => g.match);
		assert.ok(hits.length >= 2, 'parse_json of both compute threads: ' + hits.length);
		for (const g of got) {
			assert.equal(g.match, g.name === 'parse_json', g.name + ' match=' + g.match);
			if (g.match) assert.equal(g.bg, 'rgb(230, 0, 230)', 'highlight colour');
			else assert.notEqual(g.bg, 'rgb(230, 0, 230)', g.name + ' highlighted');
		}
		const text = await page.locator('#fg-matched').textContent();
		const want = (100 * C.samplesWith(folded, 'parse_json') / TOTAL).toFixed(2);
		assert.equal(text, 'Matched: ' + want + '%');
		await page.screenshot({ path: C.path.join(C.ARTIFACTS, 'html-search.png') });
		await page.locator('#fg-search').fill('');
		await page.waitForFunction(() => !document.querySelector('#fg .fr.match'));
		assert.equal(await page.locator('#fg-matched').textContent(), '');
		await page.close();
	});

	it('the function table gives the shares of each function with their intervals', { skip: skip || false }, async () => {
		const page = await open();
		const heads = await page.locator('#funcs thead th').allTextContents();
		assert.deepEqual(heads.map((h) => h.trim()), ['function', 'self', '\u00b1', 'total', '\u00b1']);
		const rows = await page.locator('#funcs tbody tr').evaluateAll((trs) =>
			trs.map((tr) => [...tr.children].map((td) => td.textContent)));
		assert.ok(rows.length >= 5, 'rows: ' + rows.length);
		for (const r of rows) {
			const f = fnOf.get(r[0]);
			assert.ok(f, 'no such function in the JSON report: ' + r[0]);
			assert.equal(r[1], (100 * f.self_share).toFixed(2) + '%');
			assert.equal(r[2], f.self_err95 !== null ? hw(f.self_err95) : '-');
			assert.equal(r[3], (100 * f.total_share).toFixed(2) + '%');
			assert.equal(r[4], f.total_err95 !== null ? hw(f.total_err95) : '-');
		}
		assert.match(await page.locator('#funcs-note').textContent(), /95 % interval/);
		await page.close();
	});

	it('the thread table lists every thread with its samples, sorts, and zooms the graph', { skip: skip || false }, async () => {
		const page = await open();
		const heads = await page.locator('#threads thead th').allTextContents();
		const col = (h) => { const i = heads.indexOf(h); assert.ok(i >= 0, 'no column ' + h); return i; };
		const rows = async () => (await page.locator('#threads tbody tr').evaluateAll((trs) =>
			trs.map((tr) => [...tr.children].map((td) => td.textContent))));
		const got = new Map();
		for (const r of await rows())
			if (Number(r[col('samples')]) > 0) got.set(r[col('name')] + '-' + r[col('tid')], Number(r[col('samples')]));
		assert.deepEqual(got, perThread);
		// Sorted by samples on a click, most first; a second click reverses.
		await page.locator('#threads thead th', { hasText: /^samples$/ }).click();
		let s = (await rows()).map((r) => Number(r[col('samples')]));
		assert.deepEqual(s, [...s].sort((a, b) => b - a));
		await page.locator('#threads thead th', { hasText: /^samples$/ }).click();
		s = (await rows()).map((r) => Number(r[col('samples')]));
		assert.deepEqual(s, [...s].sort((a, b) => a - b));
		// Clicking a thread zooms the flame graph into it.
		const first = (await rows()).find((r) => r[col('name')] === 'compute-0');
		await page.locator('#threads tbody tr', { hasText: 'compute-0' }).first().click();
		await page.waitForFunction(() => !document.getElementById('fg-reset').disabled);
		const label = 'compute-0-' + first[col('tid')];
		assert.ok(Math.abs(await width(await frame(page, label)) - (await fullWidth(page))) < 1);
		await page.close();
	});

	it('the timeline draws one mark per capture window, zooms, pans and shows a window', { skip: skip || false }, async () => {
		const page = await open();
		const cv = page.locator('#tl');
		const ds = () => cv.evaluate((c) => ({ ...c.dataset }));
		let d = await ds();
		// As many marks as the trace report has windows, and a row for
		// each thread that has any.
		assert.ok(handlers.length > 100, 'the recording has windows: ' + handlers.length);
		assert.equal(Number(d.selfMarks), handlers.length);
		assert.equal(Number(d.kernelMarks), kpauses.length);
		assert.equal(Number(d.binMarks), 0);
		const rowTids = d.rows.split(',').map(Number);
		assert.deepEqual(new Set(rowTids), tidsWithWindows);
		assert.match(await page.locator('#tl-note').textContent(), new RegExp(' ' + handlers.length + ' self-reported'));

		// The longest handler window of a compute thread, from the trace.
		const tid = [...tidsWithWindows].find((t) => perThread.has('compute-0-' + t));
		assert.ok(tid, 'compute-0 has windows');
		const w = handlers.filter((e) => e.tid === tid).reduce((a, b) => (b.dur > a.dur ? b : a));
		const t0 = await page.evaluate(() => Number(JSON.parse(document.getElementById('sp-data').textContent).tl.t0));
		const startNs = Math.round(w.ts * 1000) - t0;
		await cv.scrollIntoViewIfNeeded();
		const box = await cv.boundingBox();
		const geo = async () => {
			d = await ds();
			const plotW = box.width - Number(d.gutter) - 8;
			const x = box.x + Number(d.gutter) + (startNs + w.dur * 500 - Number(d.v0)) / (Number(d.v1) - Number(d.v0)) * plotW;
			const lane = Number(d.lanes) - 1;	// self is the last lane
			const y = box.y + Number(d.axisH) + rowTids.indexOf(tid) * Number(d.rowH) + lane * Number(d.laneH) + Number(d.laneH) / 2;
			return { x, y };
		};
		let p = await geo();
		await page.mouse.move(p.x, p.y);
		for (let i = 0; i < 30; i++) {
			await page.mouse.wheel(0, -100);
			p = await geo();
			await page.mouse.move(p.x, p.y);
		}
		d = await ds();
		assert.ok(Number(d.v1) - Number(d.v0) < 5e6, 'zoomed to under 5 ms: ' + (Number(d.v1) - Number(d.v0)));
		assert.ok(Number(d.selfMarks) < handlers.length, 'fewer marks in a zoomed view');
		await page.mouse.move(p.x + 1, p.y);
		await page.mouse.move(p.x, p.y);
		const text = await page.locator('#tl-details').textContent();
		const m = /self-reported window \(handler entry → exit\) (\d+\.\d{3}) µs at (\d+\.\d{9}) s$/.exec(text);
		assert.ok(m, 'details: ' + JSON.stringify(text));
		assert.ok(text.startsWith('compute-0-' + tid + ': '), text);
		assert.equal(Number(m[1]), w.dur, 'the duration the trace has');
		assert.equal(Math.round(Number(m[2]) * 1e9), startNs, 'the start the trace has');
		await page.screenshot({ path: C.path.join(C.ARTIFACTS, 'html-timeline.png') });

		// Dragging pans by the distance moved.
		const before = Number(d.v0), span = Number(d.v1) - Number(d.v0);
		const plotW = box.width - Number(d.gutter) - 8;
		await page.mouse.down();
		await page.mouse.move(p.x - 100, p.y, { steps: 5 });
		await page.mouse.up();
		d = await ds();
		assert.ok(Math.abs(Number(d.v0) - before - 100 / plotW * span) < span * 0.01,
			'panned from ' + before + ' to ' + d.v0);
		// Reset shows every window again.
		await page.locator('#tl-reset').click();
		d = await ds();
		assert.equal(Number(d.selfMarks), handlers.length);
		await page.close();
	});

	it('makes no network request and raises no script error', { skip: skip || false }, async () => {
		const foreign = seen.requests.filter((u) => u !== URL_);
		assert.ok(seen.requests.includes(URL_), 'the page itself was not requested');
		assert.deepEqual(foreign, []);
		assert.deepEqual(seen.errors, []);
	});
});
