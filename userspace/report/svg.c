/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `stackprobe report --format svg`: one self-contained SVG file (inline
 * style and script, no network) holding two flame graphs:
 *
 *   1. samples: all -> thread ("name-tid", as in the folded report) ->
 *      frames root first; width = samples. Hover shows the frame, its
 *      samples and share; click zooms into it (its ancestors stay, full
 *      width); "Reset Zoom" or Escape goes back. "Search" (or Ctrl-F)
 *      asks for a regexp, colours the matching frames and shows the share
 *      of each graph they cover ("Matched: N%"); click again to reset.
 *   2. pause cost per thread (when the file has capture windows): the same
 *      tree weighted by the capture window each sample cost its thread
 *      (signal handler entry -> exit), so the widest towers are the threads
 *      and code paths that paid most of the profiler's pause.
 *
 * Frames narrower than 0.1 px are not drawn (as flamegraph.pl does, to keep
 * the file small); the subtitle says how many were left out. Every name is
 * escaped for XML; invalid UTF-8 and control bytes become U+FFFD.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe.h>

#include "userspace/report/outputs.h"
#include "userspace/common/sort_compat.h"

#define IMG_W 1200.0
#define PAD 10.0
#define FRAME_H 16
#define MIN_W 0.1		/* px: narrower frames are not drawn */
#define FONT_W 6.6		/* px per character of the 11 px font, roughly */

enum node_kind { N_ROOT, N_THREAD, N_FRAME };

struct node {
	uint32_t name;		/* id in names */
	uint32_t first, next;	/* first child, next sibling (UINT32_MAX: none) */
	uint8_t kind;
	uint64_t value;
};

struct tree {
	struct node *v;
	size_t n, cap;
	struct ro_map child;	/* parent << 32 | name -> node */
	uint32_t depth;		/* deepest node depth + 1 */
	size_t pruned;		/* frames left out by MIN_W */
};

struct fg {
	struct sprobe_report *r;
	struct ro_strtab names;
	struct ro_map name_of_pc;
	struct ro_map name_of_tid;	/* thread label "name-tid" per tid */
	struct tree samples, pause;
	uint32_t path[2 + SPROBE_REPORT_MAX_FRAMES];
};

static long name_id(struct ro_strtab *t, const char *s)
{
	return ro_strtab__intern(t, s, strlen(s));
}

static long tree_node(struct tree *t, uint32_t parent, uint32_t name, uint8_t kind)
{
	uint64_t key = (uint64_t)parent << 32 | name;
	uint32_t id;

	if (ro_map__get(&t->child, key, &id))
		return id;
	if (ro_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		return -ENOMEM;
	id = (uint32_t)t->n++;
	t->v[id] = (struct node){ .name = name, .first = UINT32_MAX, .next = UINT32_MAX,
				  .kind = kind };
	if (parent != UINT32_MAX) {
		t->v[id].next = t->v[parent].first;
		t->v[parent].first = id;
	}
	if (ro_map__put(&t->child, key, id))
		return -ENOMEM;
	return id;
}

/* Add VALUE along PATH (names: root, thread, frames root first). */
static int tree_add(struct tree *t, const uint32_t *path, uint32_t n, uint64_t value)
{
	uint32_t parent = UINT32_MAX;

	for (uint32_t d = 0; d < n; d++) {
		long id = tree_node(t, parent, path[d], d == 0 ? N_ROOT : d == 1 ? N_THREAD : N_FRAME);

		if (id < 0)
			return (int)id;
		t->v[id].value += value;
		parent = (uint32_t)id;
	}
	if (n > t->depth)
		t->depth = n;
	return 0;
}

static int fg_add(const struct sprobe_report_sample *s, void *ctx)
{
	struct fg *g = ctx;
	uint32_t tname;
	long id;
	int err;

	/* A thread's label is the same for all its samples (the report
	 * gives each thread its last name), so build it once. */
	if (!ro_map__get(&g->name_of_tid, s->tid, &tname)) {
		char label[64];
		size_t ln = strlen(s->thread_name);
		char *thread = malloc(ln + sizeof(label));

		if (!thread)
			return -ENOMEM;
		snprintf(label, sizeof(label), "-%u", s->tid);
		memcpy(thread, s->thread_name, ln);
		strcpy(thread + ln, label);
		id = name_id(&g->names, thread);
		free(thread);
		if (id < 0 || ro_map__put(&g->name_of_tid, s->tid, (uint32_t)id))
			return -ENOMEM;
		tname = (uint32_t)id;
	}
	g->path[0] = 0;		/* "all", interned first */
	g->path[1] = tname;
	for (uint32_t i = 0; i < s->nframes && i < SPROBE_REPORT_MAX_FRAMES; i++) {
		uint64_t pc = s->pcs[s->nframes - 1 - i];	/* root first */
		uint32_t nid;

		if (!ro_map__get(&g->name_of_pc, pc, &nid)) {
			struct sprobe_report_frame f;

			err = sprobe_report__resolve(g->r, pc, &f);
			if (err)
				return err;
			id = name_id(&g->names, f.name);
			if (id < 0 || ro_map__put(&g->name_of_pc, pc, (uint32_t)id))
				return -ENOMEM;
			nid = (uint32_t)id;
		}
		g->path[2 + i] = nid;
	}
	uint32_t n = 2 + (s->nframes < SPROBE_REPORT_MAX_FRAMES ? s->nframes : SPROBE_REPORT_MAX_FRAMES);

	err = tree_add(&g->samples, g->path, n, s->weight ? s->weight : 1);
	if (!err && s->window_ns)
		err = tree_add(&g->pause, g->path, n, s->window_ns);
	return err;
}

/* ---- output ------------------------------------------------------------- */

static const char script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"'use strict';\n"
	"var W = 1200, PAD = 10, FONT_W = 6.6;\n"
	"function frames(graph) { return graph.querySelectorAll('g.f'); }\n"
	"function nameOf(g) { var t = g.querySelector('title').textContent;\n"
	"  var i = t.lastIndexOf(' ('); return i < 0 ? t : t.slice(0, i); }\n"
	"function fit(g, x, w) {\n"
	"  var r = g.querySelector('rect'), t = g.querySelector('text');\n"
	"  r.setAttribute('x', x.toFixed(2)); r.setAttribute('width', w.toFixed(2));\n"
	"  t.setAttribute('x', (x + 3).toFixed(2));\n"
	"  var name = nameOf(g), n = Math.floor((w - 6) / FONT_W);\n"
	"  t.textContent = n < 3 ? '' : name.length <= n ? name : name.slice(0, n - 2) + '..';\n"
	"}\n"
	"function zoom(g) {\n"
	"  var graph = g.closest('g.graph');\n"
	"  var x0 = +g.dataset.x, w0 = +g.dataset.w, d0 = +g.dataset.d, scale = (W - 2 * PAD) / w0;\n"
	"  frames(graph).forEach(function (e) {\n"
	"    var x = +e.dataset.x, w = +e.dataset.w, d = +e.dataset.d, eps = 1e-6;\n"
	"    if (d < d0 && x <= x0 + eps && x + w >= x0 + w0 - eps) {\n"
	"      e.classList.remove('hide'); e.classList.add('parent'); fit(e, PAD, W - 2 * PAD);\n"
	"    } else if (d >= d0 && x >= x0 - eps && x + w <= x0 + w0 + eps) {\n"
	"      e.classList.remove('hide', 'parent'); fit(e, PAD + (x - x0) * scale, w * scale);\n"
	"    } else {\n"
	"      e.classList.add('hide');\n"
	"    }\n"
	"  });\n"
	"  graph.querySelector('.unzoom').classList.remove('hide');\n"
	"}\n"
	"function unzoom(graph) {\n"
	"  frames(graph).forEach(function (e) {\n"
	"    e.classList.remove('hide', 'parent'); fit(e, +e.dataset.x, +e.dataset.w);\n"
	"  });\n"
	"  graph.querySelector('.unzoom').classList.add('hide');\n"
	"}\n"
	"document.addEventListener('click', function (ev) {\n"
	"  if (ev.target.closest('.search')) { askSearch(); return; }\n"
	"  var u = ev.target.closest('.unzoom');\n"
	"  if (u) { unzoom(u.closest('g.graph')); return; }\n"
	"  var g = ev.target.closest('g.f'); if (g) zoom(g);\n"
	"});\n"
	/* Search, as flamegraph.pl's: a regexp from a prompt (the SVG has no
	 * input element), matching frames turn purple, and each graph says the
	 * share of its width the matches cover (overlapping matches, e.g. a
	 * recursive function, counted once; unzoomed coordinates, so the share
	 * is of the whole graph whatever the zoom). */
	"function search(term) {\n"
	"  var re; try { re = new RegExp(term); } catch (e) {\n"
	"    re = new RegExp(term.replace(/[.*+?^${}()|[\\]\\\\]/g, '\\\\$&')); }\n"
	"  document.querySelectorAll('g.graph').forEach(function (graph) {\n"
	"    var spans = [];\n"
	"    frames(graph).forEach(function (e) {\n"
	"      var m = re.test(nameOf(e)); e.classList.toggle('match', m);\n"
	"      if (m) spans.push([+e.dataset.x, +e.dataset.x + +e.dataset.w]);\n"
	"    });\n"
	"    spans.sort(function (a, b) { return a[0] - b[0]; });\n"
	"    var covered = 0, end = -Infinity;\n"
	"    spans.forEach(function (s) {\n"
	"      if (s[0] > end) { covered += s[1] - s[0]; end = s[1]; }\n"
	"      else if (s[1] > end) { covered += s[1] - end; end = s[1]; }\n"
	"    });\n"
	"    graph.querySelector('.matched').textContent =\n"
	"      'Matched: ' + (100 * covered / (W - 2 * PAD)).toFixed(2) + '%';\n"
	"  });\n"
	"  document.querySelector('.search').textContent = 'Reset Search';\n"
	"}\n"
	"function unsearch() {\n"
	"  document.querySelectorAll('g.f.match').forEach(function (e) { e.classList.remove('match'); });\n"
	"  document.querySelectorAll('.matched').forEach(function (e) { e.textContent = ' '; });\n"
	"  document.querySelector('.search').textContent = 'Search';\n"
	"}\n"
	"function askSearch() {\n"
	"  if (document.querySelector('g.f.match')) { unsearch(); return; }\n"
	"  var term = prompt('Search frames (regexp allowed, e.g. ^parse_)', '');\n"
	"  if (term) search(term);\n"
	"}\n"
	"document.addEventListener('keydown', function (ev) {\n"
	"  if (ev.key === 'Escape') document.querySelectorAll('g.graph').forEach(unzoom);\n"
	"  if ((ev.ctrlKey || ev.metaKey) && ev.key === 'f') { ev.preventDefault(); askSearch(); }\n"
	"});\n"
	"document.addEventListener('mouseover', function (ev) {\n"
	"  var g = ev.target.closest('g.f');\n"
	"  if (!g) return;\n"
	"  var graph = g.closest('g.graph');\n"
	"  graph.querySelector('.details').textContent = g.querySelector('title').textContent;\n"
	"});\n"
	"document.addEventListener('mouseout', function (ev) {\n"
	"  var g = ev.target.closest('g.f');\n"
	"  if (g) g.closest('g.graph').querySelector('.details').textContent = ' ';\n"
	"});\n"
	"]]></script>\n";

static const char style[] =
	"<style type=\"text/css\">\n"
	"  text { font-family: Verdana, sans-serif; font-size: 11px; fill: #000; }\n"
	"  .title { font-size: 17px; }\n"
	"  .sub { font-size: 12px; fill: #444; }\n"
	"  .details { font-size: 12px; }\n"
	"  .unzoom, .search { cursor: pointer; fill: #36c; }\n"
	"  .matched { font-size: 12px; }\n"
	"  g.f.match rect { fill: rgb(230,0,230); }\n"
	"  g.f { cursor: pointer; }\n"
	"  g.f text { pointer-events: none; }\n"
	"  g.f:hover rect { stroke: #000; stroke-width: 0.5; }\n"
	"  g.parent rect { opacity: 0.5; }\n"
	"  .hide { display: none; }\n"
	"</style>\n";

/* Stable colour from the name: flamegraph.pl's warm palette for frames,
 * blue-green for the pause graph, greys and blues for root and threads. */
static void colour(FILE *o, const char *name, uint8_t kind, bool pause)
{
	uint64_t h = ro_hash(name, strlen(name), 0x5eed);
	unsigned a = (unsigned)(h & 0xff), b = (unsigned)(h >> 8 & 0xff), c = (unsigned)(h >> 16 & 0xff);

	if (kind == N_ROOT)
		fputs("rgb(200,200,200)", o);
	else if (kind == N_THREAD)
		fprintf(o, "rgb(%u,%u,230)", 120 + a % 60, 160 + b % 60);
	else if (pause)
		fprintf(o, "rgb(%u,%u,%u)", 40 + a % 60, 170 + b % 70, 160 + c % 80);
	else
		fprintf(o, "rgb(%u,%u,%u)", 205 + a % 50, b % 230, c % 55);
}

struct layout {
	FILE *o;
	const struct fg *g;
	const struct tree *t;
	bool pause;
	double y0;		/* y of the root row's top */
	double px_per_unit;
	uint64_t total;
};

static int cmp_by_name(const void *a, const void *b, void *arg)
{
	const struct fg *g = arg;

	return strcmp(ro_strtab__get(&g->names, *(const uint32_t *)a),
		      ro_strtab__get(&g->names, *(const uint32_t *)b));
}

static void share_text(FILE *o, const struct layout *L, uint64_t v)
{
	double pct = L->total ? 100.0 * (double)v / (double)L->total : 0.0;

	if (L->pause)
		fprintf(o, " (%.1f us, %.2f%% of the pause)", (double)v / 1000.0, pct);
	else
		fprintf(o, " (%" PRIu64 " sample%s, %.2f%%)", v, v == 1 ? "" : "s", pct);
}

/* Nodes in the subtree of ID (recursion depth <= SPROBE_REPORT_MAX_FRAMES + 2). */
static size_t subtree_size(const struct tree *t, uint32_t id)
{
	size_t n = 1;

	for (uint32_t c = t->v[id].first; c != UINT32_MAX; c = t->v[c].next)
		n += subtree_size(t, c);
	return n;
}

/* Draw node ID at depth D and x, then its children (sorted by name, as
 * flamegraph.pl does, so equal stacks line up across threads). */
static int draw(struct layout *L, struct tree *t, uint32_t id, uint32_t d, double x)
{
	const struct node *nd = &t->v[id];
	const char *name = ro_strtab__get(&L->g->names, nd->name);
	double w = (double)nd->value * L->px_per_unit;
	double y = L->y0 - (double)d * FRAME_H;
	size_t nk = 0, maxc;
	uint32_t *kids;

	if (w < MIN_W) {
		t->pruned += subtree_size(t, id);	/* said in the subtitle */
		return 0;
	}
	fprintf(L->o, "<g class=\"f\" data-x=\"%.2f\" data-w=\"%.2f\" data-d=\"%u\"><title>", x, w, d);
	ro_xml_str(L->o, name, 0);
	share_text(L->o, L, nd->value);
	fprintf(L->o, "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" rx=\"2\" fill=\"",
		x, y, w, FRAME_H - 1);
	colour(L->o, name, nd->kind, L->pause);
	fprintf(L->o, "\"/><text x=\"%.2f\" y=\"%.1f\">", x + 3, y + 11.5);
	maxc = w > 6 ? (size_t)((w - 6) / FONT_W) : 0;
	if (maxc >= 3)
		ro_xml_str(L->o, name, strlen(name) <= maxc ? 0 : maxc - 2);
	fputs("</text></g>\n", L->o);

	for (uint32_t c = nd->first; c != UINT32_MAX; c = t->v[c].next)
		nk++;
	if (!nk)
		return 0;
	kids = malloc(nk * sizeof(*kids));
	if (!kids)
		return -ENOMEM;
	nk = 0;
	for (uint32_t c = nd->first; c != UINT32_MAX; c = t->v[c].next)
		kids[nk++] = t->v[c].name;
	/* kids holds names; sort them, then look each child up again. */
	sprobe_qsort_r(kids, nk, sizeof(*kids), cmp_by_name, (void *)L->g);
	for (size_t i = 0; i < nk; i++) {
		uint32_t cid;
		int err;

		ro_map__get(&t->child, (uint64_t)id << 32 | kids[i], &cid);
		err = draw(L, t, cid, d + 1, x);
		if (err) {
			free(kids);
			return err;
		}
		x += (double)t->v[cid].value * L->px_per_unit;
	}
	free(kids);
	return 0;
}

/* One graph: heading, hover line, reset link, frames. Returns its height. */
static int graph(FILE *o, struct fg *g, struct tree *t, bool pause, double top, const char *heading,
		 double *height)
{
	struct layout L = { .o = o, .g = g, .t = t, .pause = pause };
	double gh = (double)t->depth * FRAME_H;
	int err;

	L.total = t->n ? t->v[0].value : 0;
	L.px_per_unit = L.total ? (IMG_W - 2 * PAD) / (double)L.total : 0;
	L.y0 = top + 24 + gh - FRAME_H;
	fprintf(o, "<g class=\"graph\" id=\"%s\">\n", pause ? "pause" : "samples");
	fprintf(o, "<text x=\"%.0f\" y=\"%.1f\" class=\"sub\">%s</text>\n", PAD, top + 12, heading);
	fprintf(o, "<text x=\"%.0f\" y=\"%.1f\" class=\"unzoom hide\" text-anchor=\"end\">Reset Zoom</text>\n",
		IMG_W - PAD, top + 12);
	if (t->n)
		err = draw(&L, t, 0, 0, PAD);
	else
		err = 0;
	fprintf(o, "<text x=\"%.0f\" y=\"%.1f\" class=\"details\"> </text>\n", PAD,
		top + 24 + gh + 14);
	fprintf(o, "<text x=\"%.0f\" y=\"%.1f\" class=\"matched\" text-anchor=\"end\"> </text>\n</g>\n",
		IMG_W - PAD, top + 24 + gh + 14);
	*height = 24 + gh + 24;
	return err;
}

static void subtitle(FILE *o, const struct sprobe_report_info *info, size_t pruned)
{
	char cmd[200];
	size_t cl = 0;

	for (uint32_t i = 0; i < info->cmdline_len && cl + 1 < sizeof(cmd); i++)
		cmd[cl++] = info->cmdline[i] ? info->cmdline[i] : ' ';
	cmd[cl] = '\0';
	fprintf(o, "<text x=\"%.0f\" y=\"44\" class=\"sub\">", PAD);
	if (info->has_header) {
		fputs("command: ", o);
		ro_xml_str(o, cmd, 0);
		fprintf(o, " (pid %u) \xc2\xb7 %s mode, %u Hz \xc2\xb7 ", info->pid,
			info->mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall", info->freq_hz);
	}
	fprintf(o, "%" PRIu64 " samples in %.3f s</text>\n", info->samples, (double)info->wall_ns / 1e9);
	fprintf(o, "<text x=\"%.0f\" y=\"62\" class=\"sub\">file: ", PAD);
	if (info->status == SPROBE_DF_COMPLETE)
		fputs("complete", o);
	else {
		fputs(info->status == SPROBE_DF_CUT_SHORT ? "CUT SHORT: " : "ERROR: ", o);
		ro_xml_str(o, info->message, 0);
	}
	fprintf(o, " \xc2\xb7 drops: %" PRIu64 " records lost in the stream, %" PRIu64
		   " thread-captures dropped",
		info->lost, info->threads_dropped);
	if (pruned)
		fprintf(o, " \xc2\xb7 %zu frames narrower than %.1f px not drawn", pruned, MIN_W);
	fputs("</text>\n", o);
}

static void tree_free(struct tree *t)
{
	free(t->v);
	ro_map__free(&t->child);
}

int sprobe_report__write_svg(struct sprobe_report *r, FILE *out)
{
	struct sprobe_report_info info = { .sz = sizeof(info) };
	struct fg g = { .r = r };
	FILE *body = NULL;
	char *bodybuf = NULL;
	size_t bodylen = 0;
	double top = 80, h1 = 0, h2 = 0;
	int err;

	err = sprobe_report__info(r, &info);
	if (err)
		return err;
	if (name_id(&g.names, "all") != 0) {
		err = -ENOMEM;
		goto out;
	}
	err = sprobe_report__foreach_sample(r, fg_add, &g);
	if (err)
		goto out;
	/* The graphs go to memory first: the subtitle (pruned count) and the
	 * image height are known only after drawing. */
	body = open_memstream(&bodybuf, &bodylen);
	if (!body) {
		err = -ENOMEM;
		goto out;
	}
	err = graph(body, &g, &g.samples, false, top,
		    "Samples: all \xe2\x86\x92 thread \xe2\x86\x92 stack (root at the bottom; "
		    "hover for details, click to zoom)", &h1);
	if (!err && g.pause.n)
		err = graph(body, &g, &g.pause, true, top + h1 + 10,
			    "Pause cost per thread: width = capture-window time the thread spent "
			    "stopped in that stack (signal handler entry \xe2\x86\x92 exit)", &h2);
	if (fclose(body) != 0 && !err)
		err = -ENOMEM;
	body = NULL;
	if (err)
		goto out;

	double height = top + h1 + (h2 ? h2 + 10 : 0) + 10;

	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		     "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
		     "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
		IMG_W, height, IMG_W, height);
	fputs(style, out);
	fputs(script, out);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\"/>\n",
		IMG_W, height);
	fprintf(out, "<text x=\"%.0f\" y=\"24\" class=\"title\">stackprobe: ", PAD);
	ro_xml_str(out, info.source ? info.source : "profile", 0);
	fputs("</text>\n", out);
	fprintf(out, "<text x=\"%.0f\" y=\"24\" class=\"search\" text-anchor=\"end\">Search</text>\n",
		IMG_W - PAD);
	subtitle(out, &info, g.samples.pruned + g.pause.pruned);
	fwrite(bodybuf, 1, bodylen, out);
	fputs("</svg>\n", out);
out:
	free(bodybuf);
	ro_strtab__free(&g.names);
	ro_map__free(&g.name_of_pc);
	ro_map__free(&g.name_of_tid);
	tree_free(&g.samples);
	tree_free(&g.pause);
	return err;
}
