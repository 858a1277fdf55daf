// SPDX-License-Identifier: BSD-2-Clause
// `report --format speedscope` loaded into the speedscope web app itself:
// the build the npm package ships (node_modules/speedscope/dist/release),
// in chromium, served with the profile from a local http server on
// 127.0.0.1 (speedscope fetches #profileURL=, which needs http, as
// `npx speedscope FILE` does it). Reference: the folded report.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('http');
const C = require('./common.cjs');

const APP = C.path.join(require.resolve('speedscope/package.json'), '..', 'dist', 'release');
const folded = C.readFolded(C.path.join(C.OUT, 'demo.folded'));
const PERIOD_MS = Math.floor(1e9 / 199) / 1e6;	// run.sh records at 199 Hz

// Per thread (the profile names): samples, and per frame name the samples
// holding it (speedscope's Total) and those it is the leaf of (Self).
const threads = new Map();
for (const [k, v] of folded) {
	const [t, ...fr] = k.split(';');
	if (!threads.has(t)) threads.set(t, { samples: 0, total: new Map(), self: new Map() });
	const th = threads.get(t);
	th.samples += v;
	for (const n of new Set(fr)) th.total.set(n, (th.total.get(n) || 0) + v);
	if (fr.length) th.self.set(fr[fr.length - 1], (th.self.get(fr[fr.length - 1]) || 0) + v);
}

// "809.05ms", "1.08s" and the like -> milliseconds, and how far from the
// exact value the printed digits may be (half a unit of the last one).
function ms(s) {
	const m = /^(\d+)(?:\.(\d+))?(ns|µs|us|ms|s)$/.exec(s);
	assert.ok(m, 'time ' + JSON.stringify(s));
	const unit = { ns: 1e-6, 'µs': 1e-3, us: 1e-3, ms: 1, s: 1e3 }[m[3]];
	const digits = m[2] ? m[2].length : 0;
	return { v: Number(m[1] + '.' + (m[2] || '0')) * unit, tol: 0.5 * 10 ** -digits * unit * 1.001 };
}

const skip = C.chromiumMissing();

// Skipped test by test (the runner counts skipped tests, not suites).
describe('speedscope app in chromium', () => {
	let browser, context, seen, server, base;

	before(async () => {
		if (skip) return;
		// The app and /profiles/<file>, nothing else; 127.0.0.1 only.
		server = http.createServer((req, res) => {
			const u = decodeURIComponent(new URL(req.url, 'http://x').pathname);
			const f = u.startsWith('/profiles/') ? C.path.join(C.OUT, C.path.basename(u))
				: C.path.join(APP, C.path.normalize(u === '/' ? '/index.html' : u));
			C.fs.readFile(f, (err, data) => {
				res.writeHead(err ? 404 : 200);
				res.end(err ? '' : data);
			});
		});
		await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
		base = 'http://127.0.0.1:' + server.address().port;
		browser = await C.launch();
		context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
		seen = C.watch(context);
	});
	after(async () => {
		if (browser) await browser.close();
		if (server) server.close();
	});

	async function open(file) {
		const page = await context.newPage();
		await page.goto(base + '/index.html#profileURL=' + encodeURIComponent(base + '/profiles/' + file));
		// The toolbar names the active profile "(i/N)" once the file is imported.
		await page.getByText(new RegExp('\\(1/' + threads.size + '\\)')).waitFor();
		return page;
	}

	// The sandwich view's rows: Total, Self, name.
	async function sandwich(page) {
		await page.getByText('Sandwich', { exact: false }).first().click();
		await page.getByText('Symbol Name').waitFor();
		const text = await page.evaluate(() => document.body.innerText);
		const rows = new Map();
		for (const m of text.matchAll(/^(\S+) \([^)]*\)\n\t(\S+) \([^)]*\)\n\t(.+)$/gm))
			rows.set(m[3], { total: ms(m[1]), self: ms(m[2]) });
		return rows;
	}

	function checkRows(rows, thread) {
		const th = threads.get(thread);
		assert.deepEqual([...rows.keys()].sort(), [...th.total.keys()].sort(), thread + ': frame names');
		for (const [name, r] of rows) {
			// count x period, to the digits speedscope prints.
			const near = (t, n) => Math.abs(t.v - n * PERIOD_MS) <= t.tol;
			assert.ok(near(r.total, th.total.get(name)), name + ' total ' + JSON.stringify(r.total));
			assert.ok(near(r.self, th.self.get(name) || 0), name + ' self ' + JSON.stringify(r.self));
		}
	}

	it('opens the file on the thread with the most samples; its frames and times in the sandwich view', { skip: skip || false }, async () => {
		const page = await open('demo.speedscope.json');
		// Wall mode samples every thread at every tick, so several may tie.
		const max = Math.max(...[...threads.values()].map((t) => t.samples));
		// The "(1/N)" is a span of its own inside the toolbar's title.
		const title = await page.getByText(new RegExp('\\(1/' + threads.size + '\\)')).first()
			.locator('xpath=..').textContent();
		const most = /^(.+?)\s*\(1\/\d+\)$/.exec(title.trim())?.[1];
		assert.ok(threads.has(most), 'active profile ' + JSON.stringify(title) + ' is no thread of the file');
		assert.equal(threads.get(most).samples, max, most + ' opened first');
		await page.screenshot({ path: C.path.join(C.ARTIFACTS, 'speedscope-time-order.png') });
		checkRows(await sandwich(page), most);
		await page.close();
	});

	it('lists every thread as a profile; the compute thread shows parse_json and compress_reply', { skip: skip || false }, async () => {
		const page = await open('demo.speedscope.json');
		await page.getByText(new RegExp('\\(1/' + threads.size + '\\)')).click();
		for (const t of threads.keys()) await page.getByText(t, { exact: true }).first().waitFor();
		const compute = [...threads.keys()].find((t) => /^compute-0-\d+$/.test(t));
		assert.ok(compute, 'no compute-0 thread in the folded report');
		await page.getByText(compute, { exact: true }).first().click();
		await page.getByText(new RegExp('^' + compute + ' \\(\\d+/' + threads.size + '\\)$')).waitFor();
		const rows = await sandwich(page);
		assert.ok(rows.has('parse_json') && rows.has('compress_reply'), [...rows.keys()].join(', '));
		checkRows(rows, compute);
		await page.screenshot({ path: C.path.join(C.ARTIFACTS, 'speedscope-sandwich.png') });
		await page.close();
	});

	it('raises no error and asks only the local server', { skip: skip || false }, async () => {
		assert.ok(seen.requests.length > 0);
		assert.deepEqual(seen.requests.filter((u) => !u.startsWith(base + '/')), []);
		assert.deepEqual(seen.errors, []);
	});
});
