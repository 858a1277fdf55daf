/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `stackprobe diff --format pprof`: one gzipped profile.proto holding the
 * new run's stacks with positive values and the base run's with negative
 * ones, labelled pprof::base=true: the profile `go tool pprof -diff_base
 * BASE NEW` builds in memory, so `go tool pprof -top diff.pb.gz` shows each
 * function's change. Runs of different length compare by share: each base
 * count is multiplied by the new run's weight and each new count by the
 * base's (integers: no rare stack rounded away), as the profile's comment
 * says. Frames are functions by name (no addresses: the two runs' differ).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/report/diff.h"
#include "userspace/report/diff_pprof.h"
#include "userspace/report/outputs.h"
#include "userspace/report/protobuf.h"

struct dp {
	struct ro_strtab strs;		/* string_table */
	struct ro_strtab funcs;		/* function names -> function id - 1 */
	u32vec fname;			/* function id - 1 -> string id */
	u64vec locs;			/* scratch: a stack's location ids */
	bool oom;
};

static uint64_t str_id(struct dp *p, const char *s)
{
	long id = ro_strtab__intern(&p->strs, s, strlen(s));

	if (id < 0) {
		p->oom = true;
		return 0;
	}
	return (uint64_t)id;
}

/* Function (and location: the same id) of a frame name, from 1. */
static uint64_t func_id(struct dp *p, const char *name)
{
	size_t before = p->funcs.n;
	long id = ro_strtab__intern(&p->funcs, name, strlen(name));

	if (id < 0) {
		p->oom = true;
		return 1;
	}
	if (p->funcs.n != before && VEC_PUSH(p->fname, (uint32_t)str_id(p, name)))
		p->oom = true;
	return (uint64_t)id + 1;
}

/* The stack's location ids, leaf first, into p->locs. */
static void stack_locs(struct dp *p, const char *stack)
{
	char *s = strdup(stack), *save = NULL;

	p->locs.n = 0;
	if (!s) {
		p->oom = true;
		return;
	}
	for (char *f = strtok_r(s, ";", &save); f; f = strtok_r(NULL, ";", &save))
		if (VEC_PUSH(p->locs, func_id(p, f)))
			p->oom = true;
	for (size_t i = 0; i < p->locs.n / 2; i++) {
		uint64_t t = p->locs.v[i];

		p->locs.v[i] = p->locs.v[p->locs.n - 1 - i];
		p->locs.v[p->locs.n - 1 - i] = t;
	}
	free(s);
}

static void sample(struct dp *p, struct ro_buf *b, struct ro_buf *tmp, int64_t value, bool base)
{
	struct ro_buf m = { 0 }, lab = { 0 };
	uint64_t v = (uint64_t)value;

	sprobe_rep__pb_packed(&m, tmp, 1, p->locs.v, p->locs.n);
	sprobe_rep__pb_packed(&m, tmp, 2, &v, 1);
	if (base) {
		sprobe_rep__pb_uint(&lab, 1, str_id(p, "pprof::base"));
		sprobe_rep__pb_uint(&lab, 2, str_id(p, "true"));
		sprobe_rep__pb_msg(&m, 3, &lab);
	}
	sprobe_rep__pb_msg(b, 2, &m);
	p->oom |= m.oom || lab.oom;
	ro_buf__free(&m);
	ro_buf__free(&lab);
}

int sprobe_rep__diff_pprof(struct sprobe_rep_diff *d, struct sprobe_report *base,
			   struct sprobe_report *now, FILE *o)
{
	struct dp p = { 0 };
	struct ro_buf b = { 0 }, tmp = { 0 }, m = { 0 };
	/* Cross-multiplied: both sides in units of 1 / (base weight x new
	 * weight) of a share; 1 when a side is empty. */
	int64_t mb = d->now.weight ? (int64_t)d->now.weight : 1;
	int64_t mn = d->base.weight ? (int64_t)d->base.weight : 1;
	char note[160];
	int err = sprobe_rep__diff_fold(d, base, now);

	if (err)
		return err;
	str_id(&p, "");		/* string_table[0] must be "" */
	/* sample_type: samples/count */
	sprobe_rep__pb_uint(&m, 1, str_id(&p, "samples"));
	sprobe_rep__pb_uint(&m, 2, str_id(&p, "count"));
	sprobe_rep__pb_msg(&b, 1, &m);
	for (size_t i = 0; i < d->stacks.keys.n; i++) {
		uint64_t cb = d->stack_counts.v[2 * i], cn = d->stack_counts.v[2 * i + 1];
		int64_t vb = -(int64_t)cb * mb;

		stack_locs(&p, sprobe_rep__bytemap_key(&d->stacks, (uint32_t)i));
		if (vb)
			sample(&p, &b, &tmp, vb, true);
		if (cn)
			sample(&p, &b, &tmp, (int64_t)cn * mn, false);
	}
	for (size_t i = 0; i < p.fname.n; i++) {
		struct ro_buf line = { 0 };

		m.n = 0;	/* location i + 1: one line, function i + 1 */
		sprobe_rep__pb_uint(&m, 1, i + 1);
		sprobe_rep__pb_uint(&line, 1, i + 1);
		sprobe_rep__pb_msg(&m, 4, &line);
		sprobe_rep__pb_msg(&b, 4, &m);
		m.n = 0;
		sprobe_rep__pb_uint(&m, 1, i + 1);
		sprobe_rep__pb_uint(&m, 2, p.fname.v[i]);
		sprobe_rep__pb_uint(&m, 3, p.fname.v[i]);
		sprobe_rep__pb_msg(&b, 5, &m);
		p.oom |= line.oom;
		ro_buf__free(&line);
	}
	snprintf(note, sizeof(note),
		 "stackprobe diff: base negated (pprof::base); base counts x %" PRId64
		 " (the new run's samples), new counts x %" PRId64 " (the base's): compare by share",
		 mb, mn);
	uint64_t comment = str_id(&p, note);

	for (size_t i = 0; i < p.strs.n; i++)
		sprobe_rep__pb_bytes(&b, 6, ro_strtab__get(&p.strs, (uint32_t)i),
				     ro_strtab__len(&p.strs, (uint32_t)i));
	sprobe_rep__pb_uint(&b, 13, comment);
	if (p.oom || b.oom || tmp.oom || m.oom)
		err = -ENOMEM;
	if (!err)
		err = sprobe_rep__gzip_write(o, b.p, b.n);
	ro_buf__free(&b);
	ro_buf__free(&tmp);
	ro_buf__free(&m);
	ro_strtab__free(&p.strs);
	ro_strtab__free(&p.funcs);
	free(p.fname.v);
	free(p.locs.v);
	return err;
}
