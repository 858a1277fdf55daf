/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sprobe_report__diff(): the comparison (diff.c) written as text, JSON or
 * folded stacks here, as pprof (diff_pprof.c) or HTML (diff_html.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/report.h>

#include "userspace/report/diff.h"
#include "userspace/report/diff_html.h"
#include "userspace/report/diff_pprof.h"
#include "userspace/report/report_internal.h"

/* ---- text ---------------------------------------------------------------- */

static void pct(FILE *o, double v)
{
	fprintf(o, "%6.2f%%", 100.0 * v);
}

/* Points, with no "-0.00" for a change that rounds to nothing. */
static double points(double v)
{
	return fabs(100.0 * v) < 0.005 ? 0.0 : 100.0 * v;
}

static void change(FILE *o, const struct sprobe_rep_change *c)
{
	if (isnan(c->lo))
		fprintf(o, "%+7.2f %-17s  ", points(c->delta), "(no interval)");
	else
		fprintf(o, "%+7.2f [%+6.2f, %+6.2f] %c", points(c->delta), points(c->lo),
			points(c->hi), c->significant ? '*' : ' ');
}

static void run_line(FILE *o, const char *what, const char *name, const struct sprobe_report *r,
		     const struct sprobe_rep_shares *s)
{
	fprintf(o, "%s %s: %" PRIu64 " samples", what, name, s->samples);
	if (s->weight != s->samples)
		fprintf(o, " (%" PRIu64 " weighted)", s->weight);
	if (r->has_header)
		fprintf(o, ", %s mode, %u Hz", r->header.mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall", r->header.freq_hz);
	if (s->batches)
		fprintf(o, ", %u batches of time\n", s->batches);
	else
		fputs(", too few for an interval\n", o);
}

static int write_text(const struct sprobe_rep_diff *d, struct sprobe_report *base,
		      struct sprobe_report *now, const struct sprobe_diff_opts *opts, FILE *o)
{
	size_t top = opts->top ? opts->top : 25, shown = 0;

	run_line(o, "base", opts->base_name ? opts->base_name : "BASE", base, &d->base);
	run_line(o, "new ", opts->new_name ? opts->new_name : "NEW", now, &d->now);
	fprintf(o, "\nShares of each run's own samples, in %% and points; [95 %% interval of the\n"
		   "change]; * significant at %g %% after Holm's correction over %zu tests\n"
		   "(self and total of every function).\n\n",
		100.0 * d->alpha, d->tested);
	fprintf(o, "%7s %7s %-27s %7s %7s %-27s %s\n", "self", "", "", "total", "", "", "");
	fprintf(o, "%7s %7s %-27s %7s %7s %-27s %s\n", "base", "new", "change", "base", "new",
		"change", "function");
	for (size_t i = 0; i < d->nrows && shown < top; i++, shown++) {
		const struct sprobe_rep_diff_row *row = &d->rows[i];

		pct(o, row->self.base);
		fputc(' ', o);
		pct(o, row->self.now);
		fputc(' ', o);
		change(o, &row->self);
		fputc(' ', o);
		pct(o, row->total.base);
		fputc(' ', o);
		pct(o, row->total.now);
		fputc(' ', o);
		change(o, &row->total);
		fprintf(o, " %s\n", row->name);
	}
	if (d->nrows > shown) {
		size_t sig = 0;

		for (size_t i = shown; i < d->nrows; i++)
			sig += d->rows[i].self.significant || d->rows[i].total.significant;
		fprintf(o, "... %zu more functions (%zu of them with a significant change; --top N "
			   "shows more)\n",
			d->nrows - shown, sig);
	}
	fprintf(o, "\n%zu of %zu changes significant.\n", d->significant, d->tested);
	return 0;
}

/* ---- JSON ---------------------------------------------------------------- */

static void jpair(FILE *o, double lo, double hi)
{
	if (isnan(lo))
		fputs("null", o);
	else
		fprintf(o, "[%.9g, %.9g]", lo, hi);
}

static void jchange(FILE *o, const struct sprobe_rep_change *c)
{
	fputs("\"base_share\": ", o);
	sprobe_rep__diff_jnum(o, c->base);
	fputs(", \"new_share\": ", o);
	sprobe_rep__diff_jnum(o, c->now);
	fputs(", \"delta\": ", o);
	sprobe_rep__diff_jnum(o, c->delta);
	fputs(", \"ci95\": ", o);
	jpair(o, c->lo, c->hi);
	fputs(", \"base_ci95\": ", o);
	jpair(o, c->base_lo, c->base_hi);
	fputs(", \"new_ci95\": ", o);
	jpair(o, c->now_lo, c->now_hi);
	fputs(", \"p\": ", o);
	sprobe_rep__diff_jnum(o, c->p);
	fprintf(o, ", \"significant\": %s", c->significant ? "true" : "false");
}

static void jrun(FILE *o, const char *name, const struct sprobe_report *r,
		 const struct sprobe_rep_shares *s)
{
	fputs("{\"source\": ", o);
	ro_json_str(o, name);
	fprintf(o, ", \"samples\": %" PRIu64 ", \"weight\": %" PRIu64 ", \"batches\": %u",
		s->samples, s->weight, s->batches);
	if (r->has_header)
		fprintf(o, ", \"mode\": \"%s\", \"freq_hz\": %u", r->header.mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall",
			r->header.freq_hz);
	fputc('}', o);
}

static int write_json(const struct sprobe_rep_diff *d, struct sprobe_report *base,
		      struct sprobe_report *now, const struct sprobe_diff_opts *opts, FILE *o)
{
	fputs("{\n  \"base\": ", o);
	jrun(o, opts->base_name ? opts->base_name : "", base, &d->base);
	fputs(",\n  \"new\": ", o);
	jrun(o, opts->new_name ? opts->new_name : "", now, &d->now);
	fprintf(o, ",\n  \"alpha\": %g, \"correction\": \"holm\", \"method\": \"batch means\", "
		   "\"tests\": %zu, \"significant_changes\": %zu,\n  \"functions\": [",
		d->alpha, d->tested, d->significant);
	for (size_t i = 0; i < d->nrows; i++) {
		const struct sprobe_rep_diff_row *row = &d->rows[i];

		fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", o);
		ro_json_str(o, row->name);
		fputs(", ", o);
		jchange(o, &row->self);
		fputs(", \"total\": {", o);
		jchange(o, &row->total);
		fputs("}}", o);
	}
	fputs("\n  ]\n}\n", o);
	return 0;
}

/* ---- folded: difffolded.pl's "stack base new" ------------------------------ */

static int write_folded(struct sprobe_rep_diff *d, struct sprobe_report *base,
			struct sprobe_report *now, FILE *o)
{
	int err = sprobe_rep__diff_fold(d, base, now);

	if (err)
		return err;
	/* The base scaled to the new run's weight (difffolded.pl -n): runs of
	 * different length compare by share. Fractional (flamegraph.pl reads
	 * them): a rare stack of a long base run is not rounded away. */
	double scale = d->base.weight ? (double)d->now.weight / (double)d->base.weight : 1.0;

	for (size_t i = 0; i < d->stacks.keys.n; i++)
		fprintf(o, "%s %.2f %" PRIu64 "\n", sprobe_rep__bytemap_key(&d->stacks, (uint32_t)i),
			(double)d->stack_counts.v[2 * i] * scale, d->stack_counts.v[2 * i + 1]);
	return 0;
}

int sprobe_report__diff(struct sprobe_report *base, struct sprobe_report *now, FILE *out,
			enum sprobe_report_format fmt, const struct sprobe_diff_opts *opts)
{
	struct sprobe_diff_opts o = { .sz = sizeof(o) };
	struct sprobe_rep_diff d;
	int err;

	if (!base || !now || !out || (opts && opts->sz < sizeof(size_t)))
		return -EINVAL;
	if (opts)
		memcpy(&o, opts, opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	if (fmt != SPROBE_REPORT_TEXT && fmt != SPROBE_REPORT_JSON && fmt != SPROBE_REPORT_FOLDED &&
	    fmt != SPROBE_REPORT_PPROF && fmt != SPROBE_REPORT_HTML)
		return -ENOTSUP;
	err = sprobe_rep__diff_new(base, now, o.alpha, &d);
	if (err)
		return err;
	switch (fmt) {
	case SPROBE_REPORT_TEXT:
		err = write_text(&d, base, now, &o, out);
		break;
	case SPROBE_REPORT_JSON:
		err = write_json(&d, base, now, &o, out);
		break;
	case SPROBE_REPORT_FOLDED:
		err = write_folded(&d, base, now, out);
		break;
	case SPROBE_REPORT_PPROF:
		err = sprobe_rep__diff_pprof(&d, base, now, out);
		break;
	default:
		err = sprobe_rep__diff_html(&d, base, now, &o, out);
		break;
	}
	sprobe_rep__diff_free(&d);
	if (!err && (fflush(out) != 0 || ferror(out)))
		err = -EIO;
	return err;
}
