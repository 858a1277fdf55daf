/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `stackprobe diff --format html`: one self-contained page with the table
 * of changes (as the text form) and a differential flame graph: a frame as
 * wide as the larger of its two shares (children in proportion within
 * their parent, so a stack gone from the new run still shows), red where
 * its share grew, blue where it shrank, deeper colour for a larger change,
 * grey when unchanged; hover says both shares and the change, a click
 * zooms.
 *
 * Hostile input: names reach the page only inside the JSON data, written
 * with ro_json_str() and then made script-safe ('<', '>' and '&' only ever
 * occur inside JSON strings, where \u escapes mean the same); the script
 * puts them into the page with textContent only. The Content-Security-Policy
 * (default-src 'none') refuses any request the page could make.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/report/diff.h"
#include "userspace/report/diff_html.h"
#include "userspace/report/outputs.h"

/* Frames under this share of both runs are left out of the graph's data. */
#define DIFF_PRUNE 1e-5

static void jchange(FILE *o, const struct sprobe_rep_change *c)
{
	fputc('[', o);
	sprobe_rep__diff_jnum(o, c->base);
	fputc(',', o);
	sprobe_rep__diff_jnum(o, c->now);
	fputc(',', o);
	sprobe_rep__diff_jnum(o, c->delta);
	fputc(',', o);
	sprobe_rep__diff_jnum(o, c->lo);
	fputc(',', o);
	sprobe_rep__diff_jnum(o, c->hi);
	fprintf(o, ",%d]", c->significant ? 1 : 0);
}

/* The page's data as JSON, into a memory buffer. */
static int data_json(struct sprobe_rep_diff *d, const struct sprobe_diff_opts *opts, char **buf,
		     size_t *len)
{
	FILE *o = open_memstream(buf, len);
	double wb = d->base.weight ? (double)d->base.weight : 1.0;
	double wn = d->now.weight ? (double)d->now.weight : 1.0;

	if (!o)
		return -ENOMEM;
	fputs("{\"base\":", o);
	ro_json_str(o, opts->base_name ? opts->base_name : "BASE");
	fputs(",\"new\":", o);
	ro_json_str(o, opts->new_name ? opts->new_name : "NEW");
	fprintf(o, ",\"base_samples\":%" PRIu64 ",\"new_samples\":%" PRIu64
		   ",\"alpha\":%g,\"tests\":%zu,\"significant\":%zu,\"rows\":[",
		d->base.samples, d->now.samples, d->alpha, d->tested, d->significant);
	for (size_t i = 0; i < d->nrows; i++) {
		fputs(i ? ",[" : "[", o);
		ro_json_str(o, d->rows[i].name);
		fputc(',', o);
		jchange(o, &d->rows[i].self);
		fputc(',', o);
		jchange(o, &d->rows[i].total);
		fputc(']', o);
	}
	/* stacks as [frames root first, base share, new share] */
	fputs("],\"stacks\":[", o);
	for (size_t i = 0, n = 0; i < d->stacks.keys.n; i++) {
		double sb = (double)d->stack_counts.v[2 * i] / wb;
		double sn = (double)d->stack_counts.v[2 * i + 1] / wn;

		if (sb < DIFF_PRUNE && sn < DIFF_PRUNE)
			continue;
		fputs(n++ ? ",[" : "[", o);
		ro_json_str(o, sprobe_rep__bytemap_key(&d->stacks, (uint32_t)i));
		fprintf(o, ",%.9g,%.9g]", sb, sn);
	}
	fputs("]}", o);
	return fclose(o) ? -ENOMEM : 0;
}

static const char page_style[] =
	"body{font:13px system-ui,sans-serif;margin:16px;color:#222}\n"
	"h1{font-size:18px}table{border-collapse:collapse;margin:8px 0}\n"
	"td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #eee}\n"
	"td.n,th.n{text-align:left;font-family:monospace}\n"
	"tr.sig td{font-weight:bold}.up{color:#b00}.down{color:#04b}\n"
	"#fg{position:relative;width:100%;border:1px solid #ccc;overflow:hidden}\n"
	".fr{position:absolute;height:16px;font:11px monospace;line-height:16px;overflow:hidden;"
	"white-space:nowrap;border-right:1px solid #fff;box-sizing:border-box;cursor:pointer;"
	"padding-left:2px}\n"
	"#tip{position:fixed;background:#ffe;border:1px solid #999;padding:4px;font:12px monospace;"
	"pointer-events:none}\n";

static const char page_body[] =
	"<h2>Differential flame graph</h2>\n"
	"<p>Width: the larger of the frame's two shares, children within their parent. Colour: change of its share, "
	"<span class=\"up\">red grew</span>, <span class=\"down\">blue shrank</span>. "
	"Click a frame to zoom, the root to reset.</p>\n"
	"<div id=\"fg\"></div><div id=\"tip\" hidden></div>\n"
	"<h2>Functions</h2>\n<p id=\"legend\"></p>\n<table id=\"rows\"></table>\n";

static const char page_script[] =
	"(function () {\n"
	"var D = JSON.parse(document.getElementById('sp-data').textContent);\n"
	"function el(t, c, x) { var e = document.createElement(t); if (c) e.className = c;"
	" if (x !== undefined) e.textContent = x; return e; }\n"
	"function p2(v) { return v === null ? '-' : (100 * v).toFixed(2); }\n"
	"function ch(c) { var d = Math.round(c[2] * 1e6) / 1e6; return (d >= 0 ? '+' : '') + p2(d) + (c[3] === null ? '' :"
	" ' [' + p2(c[3]) + ', ' + p2(c[4]) + ']') + (c[5] ? ' *' : ''); }\n"
	"document.getElementById('legend').textContent = 'Shares in %, changes in points with "
	"their 95 % interval; * significant at ' + (100 * D.alpha) + ' % after Holm\\'s "
	"correction over ' + D.tests + ' tests.';\n"
	"var t = document.getElementById('rows'), h = el('tr');\n"
	"['self base', 'self new', 'self change', 'total base', 'total new', 'total change', "
	"'function'].forEach(function (x, i) { h.appendChild(el('th', i == 6 ? 'n' : '', x)); });\n"
	"t.appendChild(h);\n"
	"D.rows.slice(0, 500).forEach(function (r) {\n"
	"  var tr = el('tr', r[1][5] || r[2][5] ? 'sig' : '');\n"
	"  [p2(r[1][0]), p2(r[1][1]), ch(r[1]), p2(r[2][0]), p2(r[2][1]), ch(r[2])].forEach("
	"function (x, i) { var c = [r[1], r[2]][i < 3 ? 0 : 1]; tr.appendChild(el('td',"
	" (i % 3 == 2 && c[5]) ? (c[2] > 0 ? 'up' : 'down') : '', x)); });\n"
	"  tr.appendChild(el('td', 'n', r[0])); t.appendChild(tr);\n"
	"});\n"
	"// kids keyed by frame name: no prototype (a frame may be named 'constructor')\n"
	"var root = { name: 'all', b: 0, n: 0, kids: Object.create(null) };\n"
	"D.stacks.forEach(function (s) {\n"
	"  var node = root; root.b += s[1]; root.n += s[2];\n"
	"  s[0].split(';').forEach(function (f) {\n"
	"    var k = node.kids[f]; if (!k) { k = node.kids[f] = { name: f, b: 0, n: 0, kids: Object.create(null),"
	" parent: node }; }\n"
	"    k.b += s[1]; k.n += s[2]; node = k;\n"
	"  });\n"
	"});\n"
	"var fg = document.getElementById('fg'), tip = document.getElementById('tip'), zoom = root;\n"
	"function colour(n) {\n"
	"  var d = n.n - n.b, m = Math.min(1, Math.abs(d) * 20);\n"
	"  if (Math.abs(d) < 1e-4) return 'rgb(220,220,220)';\n"
	"  var c = Math.round(230 - 150 * m);\n"
	"  return d > 0 ? 'rgb(255,' + c + ',' + c + ')' : 'rgb(' + c + ',' + c + ',255)';\n"
	"}\n"
	"function render() {\n"
	"  fg.textContent = ''; var W = fg.clientWidth || 1000, depth = 0;\n"
	"  // A frame takes the larger of its two shares, its children the parent's\n"
	"  // width in proportion to theirs: a frame gone from the new run still shows.\n"
	"  function big(n) { return Math.max(n.n, n.b); }\n"
	"  (function put(n, x, w, d) {\n"
	"    if (w < 0.5) return;\n"
	"    depth = Math.max(depth, d);\n"
	"    var e = el('div', 'fr', n.name); e.style.left = x + 'px'; e.style.width = w + 'px';\n"
	"    e.style.top = (d * 17) + 'px'; e.style.background = colour(n); e.node = n;\n"
	"    fg.appendChild(e);\n"
	"    var ks = Object.keys(n.kids).sort(), sum = 0;\n"
	"    ks.forEach(function (k) { sum += big(n.kids[k]); });\n"
	"    var cx = x, scale = Math.max(sum, big(n)) || 1;\n"
	"    ks.forEach(function (k) { var c = n.kids[k], cw = big(c) / scale * w; put(c, cx, cw, d + 1); cx += cw; });\n"
	"  })(zoom, 0, W, 0);\n"
	"  fg.style.height = ((depth + 1) * 17) + 'px';\n"
	"}\n"
	"fg.addEventListener('click', function (ev) { var n = ev.target.node; if (!n) return;"
	" zoom = n === zoom ? (n.parent || root) : n; render(); });\n"
	"fg.addEventListener('mousemove', function (ev) { var n = ev.target.node;"
	" if (!n) { tip.hidden = true; return; }\n"
	"  var d = Math.round((n.n - n.b) * 1e6) / 1e6;  /* sums of shares: no -0.00 */\n"
	"  tip.textContent = n.name + ': base ' + p2(n.b) + ' %, new ' + p2(n.n) + ' %, change '"
	" + (d >= 0 ? '+' : '') + p2(d) + ' points';\n"
	"  tip.hidden = false; tip.style.left = (ev.clientX + 12) + 'px';"
	" tip.style.top = (ev.clientY + 12) + 'px'; });\n"
	"fg.addEventListener('mouseleave', function () { tip.hidden = true; });\n"
	"window.addEventListener('resize', render);\n"
	"render();\n"
	"})();\n";

int sprobe_rep__diff_html(struct sprobe_rep_diff *d, struct sprobe_report *base,
			  struct sprobe_report *now, const struct sprobe_diff_opts *opts, FILE *o)
{
	char *json = NULL;
	size_t len = 0;
	int err = sprobe_rep__diff_fold(d, base, now);

	if (!err)
		err = data_json(d, opts, &json, &len);
	if (err) {
		free(json);
		return err;
	}
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	      "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
	      "<meta name=\"generator\" content=\"stackprobe\">\n<title>stackprobe diff: ", o);
	ro_xml_str(o, opts->base_name ? opts->base_name : "BASE", 0);
	fputs(" → ", o);
	ro_xml_str(o, opts->new_name ? opts->new_name : "NEW", 0);
	fprintf(o, "</title>\n<style>%s</style></head><body>\n<h1>stackprobe diff: ", page_style);
	ro_xml_str(o, opts->base_name ? opts->base_name : "BASE", 0);
	fputs(" → ", o);
	ro_xml_str(o, opts->new_name ? opts->new_name : "NEW", 0);
	fprintf(o, "</h1>\n<p>%zu of %zu changes significant (base %" PRIu64 " samples, new %" PRIu64
		   " samples).</p>\n%s",
		d->significant, d->tested, d->base.samples, d->now.samples, page_body);
	fputs("<script type=\"application/json\" id=\"sp-data\">", o);
	for (size_t i = 0; i < len; i++) {
		char c = json[i];

		if (c == '<' || c == '>' || c == '&')
			fprintf(o, "\\u%04x", (unsigned char)c);
		else
			fputc(c, o);
	}
	fprintf(o, "</script>\n<script>%s</script>\n</body></html>\n", page_script);
	free(json);
	return 0;
}
