/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The per-line view of one function (`stackprobe report --source FUNC`):
 * its source lines with the samples at each, self (the innermost frame is
 * that line) and total (the function's frame in the stack is at that
 * line), with the text of the line when the source file is readable here,
 * like `pprof -list` or `perf annotate --stdio` without the disassembly.
 * Lines come from the recording's srcline records (inline.c); an inlined
 * copy of the function counts at its own lines. Reads the report through
 * its public accessors only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/report.h>

struct line_ct {
	const char *file;	/* owned by the report */
	uint32_t line;
	uint64_t flat, cum;
	uint64_t mark;		/* last sample counted in cum, + 1 */
};

struct src {
	struct sprobe_report *r;
	const char *func;
	struct line_ct *v;
	size_t n, cap;
	uint64_t nsample, total, in_func, unknown;
	int err;
};

static struct line_ct *line_get(struct src *c, const char *file, uint32_t line)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].line == line && strcmp(c->v[i].file, file) == 0)
			return &c->v[i];
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct line_ct *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n] = (struct line_ct){ .file = file, .line = line };
	return &c->v[c->n++];
}

static int on_sample(const struct sprobe_report_sample *s, void *ctx)
{
	struct src *c = ctx;
	uint64_t w = s->weight ? s->weight : 1;
	bool in = false;

	c->nsample++;
	c->total += w;
	for (uint32_t k = 0; k < s->nframes; k++) {
		struct sprobe_report_frame f;
		const char *plain = NULL, *file = NULL;
		uint32_t line = 0;
		bool inl = false;

		if (sprobe_report__resolve(c->r, s->pcs[k], &f) != 0)
			continue;
		int lr = sprobe_report__frame_line(c->r, s->pcs[k], &plain, &file, &line, &inl);
		const char *name = inl && plain ? plain : f.name;

		if (strcmp(name, c->func) != 0)
			continue;
		if (!in)
			c->in_func += w;
		in = true;
		if (lr != 0 || !file || !*file || !line) {
			if (k == 0)
				c->unknown += w;
			continue;
		}
		struct line_ct *l = line_get(c, file, line);

		if (!l)
			return -ENOMEM;
		if (k == 0)
			l->flat += w;
		if (l->mark != c->nsample) { /* recursion: once per sample */
			l->mark = c->nsample;
			l->cum += w;
		}
	}
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	const struct line_ct *x = a, *y = b;
	int f = strcmp(x->file, y->file);

	if (f)
		return f;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* The text of lines lo..hi of path (NULL entries where it is unreadable). */
static char **read_lines(const char *path, uint32_t lo, uint32_t hi)
{
	char **v = calloc((size_t)(hi - lo + 1), sizeof(*v));
	FILE *f = v ? fopen(path, "re") : NULL;
	char buf[4096];
	uint32_t n = 0;

	if (!f)
		return v;
	while (fgets(buf, sizeof(buf), f) && ++n <= hi) {
		if (n < lo)
			continue;
		buf[strcspn(buf, "\n")] = '\0';
		v[n - lo] = strdup(buf);
	}
	fclose(f);
	return v;
}

int sprobe_report__write_source(struct sprobe_report *r, FILE *o, const char *function)
{
	struct src c = { .r = r, .func = function };
	int err;

	if (!r || !o || !function)
		return -EINVAL;
	err = sprobe_report__foreach_sample(r, on_sample, &c);
	if (err) {
		free(c.v);
		return err;
	}
	if (!c.in_func) {
		free(c.v);
		return -ENOENT;
	}
	fprintf(o, "Source of %s: %" PRIu64 " samples of %" PRIu64 " (%.2f%%) have it on the stack\n",
		function, c.in_func, c.total, c.total ? 100.0 * (double)c.in_func / (double)c.total : 0);
	if (!c.n) {
		fprintf(o, "  no source lines for it in the recording (no DWARF line information; "
			   "build with -g or install its debug package)\n");
		free(c.v);
		return 0;
	}
	if (c.n > 1)
		qsort(c.v, c.n, sizeof(*c.v), cmp_line);
	for (size_t i = 0; i < c.n;) {
		size_t j = i;
		uint32_t lo = c.v[i].line, hi = c.v[i].line;

		while (j < c.n && strcmp(c.v[j].file, c.v[i].file) == 0)
			hi = c.v[j++].line;
		/* The function's lines with samples, and the lines between. */
		if (hi - lo > 2000)
			hi = lo + 2000;
		char **text = read_lines(c.v[i].file, lo, hi);

		fprintf(o, "\n  %s\n  %8s %8s  %6s\n", c.v[i].file, "self", "total", "line");
		size_t k = i;

		for (uint32_t ln = lo; ln <= hi; ln++) {
			while (k < j && c.v[k].line < ln)
				k++;
			bool has = k < j && c.v[k].line == ln;
			const char *t = text && text[ln - lo] ? text[ln - lo] : "";

			if (has)
				fprintf(o, "  %8" PRIu64 " %8" PRIu64 "  %6u  %s\n", c.v[k].flat, c.v[k].cum, ln, t);
			else
				fprintf(o, "  %8s %8s  %6u  %s\n", ".", ".", ln, t);
		}
		for (uint32_t ln = lo; text && ln <= hi; ln++)
			free(text[ln - lo]);
		free(text);
		i = j;
	}
	if (c.unknown)
		fprintf(o, "\n  %" PRIu64 " self samples at pcs without a line\n", c.unknown);
	free(c.v);
	return 0;
}
