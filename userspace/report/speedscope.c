/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `stackprobe report --format speedscope`: speedscope's file format
 * (https://www.speedscope.app/file-format-schema.json), which opens at
 * www.speedscope.app and in the `speedscope` npm package's viewer.
 *
 * One "sampled" profile per thread, named like the folded report's root
 * frame ("name-tid"), its samples in time order so speedscope's "Time
 * Order" view shows the thread's timeline. Each sample's stack lists frame
 * indices root first (speedscope's order). Weights: the sampling period in
 * nanoseconds when the frequency is known, else 1 with unit "none", times
 * the sample's weight (cpu mode: the timer periods one stack stands for).
 * Frames
 * are shared across profiles, one per distinct name (the names of the text
 * and folded reports), with the module path as "file".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe.h>

#include "userspace/report/outputs.h"

struct ss_sample {
	uint64_t time_ns;
	uint64_t seq;			/* file order, to keep the sort stable */
	size_t off;			/* into frames_of_samples */
	uint32_t n;
	uint32_t weight;		/* samples it stands for */
};

struct ss_profile {
	uint32_t tid;
	char *name;			/* "threadname-tid" */
	struct ss_sample *v;
	size_t n, cap;
	uint64_t total;			/* sum of the samples' weights */
};

struct ss {
	struct sprobe_report *r;
	int err;
	struct ro_strtab names;		/* frame name -> frame index */
	uint32_t *file;			/* frame index -> string id in files, +1; 0: none */
	size_t file_cap;
	uint32_t *line;			/* frame index -> source line; 0: none */
	size_t line_cap;
	struct ro_strtab files;
	struct ro_map frame_of_pc;
	struct ro_map prof_of_tid;
	struct ss_profile *profs;
	size_t nprofs, profs_cap;
	uint32_t *stackv;		/* frame indices, root first, all samples */
	size_t stackn, stack_cap;
	uint64_t seq;
};

static long ss_frame(struct ss *s, uint64_t pc)
{
	struct sprobe_report_frame f;
	uint32_t idx;
	long id;
	int err;

	if (ro_map__get(&s->frame_of_pc, pc, &idx))
		return idx;
	err = sprobe_report__resolve(s->r, pc, &f);
	if (err)
		return err;
	size_t before = s->names.n;

	id = ro_strtab__intern(&s->names, f.name, strlen(f.name));
	if (id < 0)
		return id;
	if (ro_grow((void **)&s->file, &s->file_cap, s->names.n, sizeof(uint32_t)) ||
	    ro_grow((void **)&s->line, &s->line_cap, s->names.n, sizeof(uint32_t)))
		return -ENOMEM;
	if ((size_t)id == before) {
		/* New frame: the source file and line of its first pc when the
		 * recording has them (srcline records), else its module. */
		const char *src = NULL;
		uint32_t line = 0;
		const char *file = sprobe_report__frame_line(s->r, pc, NULL, &src, &line, NULL) == 0 &&
						   src[0] ? src : f.module;
		long fid = file ? ro_strtab__intern(&s->files, file, strlen(file)) : -1;

		if (file && fid < 0)
			return -ENOMEM;
		s->file[id] = fid < 0 ? 0 : (uint32_t)fid + 1;
		s->line[id] = file == f.module ? 0 : line;
	}
	if (ro_map__put(&s->frame_of_pc, pc, (uint32_t)id))
		return -ENOMEM;
	return id;
}

static int ss_add(const struct sprobe_report_sample *smp, void *ctx)
{
	struct ss *s = ctx;
	struct ss_profile *p;
	uint32_t pi;

	if (!ro_map__get(&s->prof_of_tid, smp->tid, &pi)) {
		char label[64];
		size_t ln;

		if (ro_grow((void **)&s->profs, &s->profs_cap, s->nprofs + 1, sizeof(*s->profs)))
			return -ENOMEM;
		char proc[96] = "";

		snprintf(label, sizeof(label), "-%u", smp->tid);
		/* One profile per thread; with several processes the name
		 * says whose ("make-4242/make-4242"). */
		if (smp->multi_process)
			snprintf(proc, sizeof(proc), "%s-%u/", smp->process_name, smp->pid);
		ln = strlen(smp->thread_name);
		p = &s->profs[s->nprofs];
		*p = (struct ss_profile){ .tid = smp->tid,
					  .name = malloc(strlen(proc) + ln + strlen(label) + 1) };
		if (!p->name)
			return -ENOMEM;
		strcpy(p->name, proc);
		memcpy(p->name + strlen(proc), smp->thread_name, ln);
		strcpy(p->name + strlen(proc) + ln, label);
		pi = (uint32_t)s->nprofs++;
		if (ro_map__put(&s->prof_of_tid, smp->tid, pi))
			return -ENOMEM;
	}
	p = &s->profs[pi];
	if (ro_grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)) ||
	    ro_grow((void **)&s->stackv, &s->stack_cap, s->stackn + smp->nframes, sizeof(uint32_t)))
		return -ENOMEM;
	p->total += smp->weight ? smp->weight : 1;
	p->v[p->n++] = (struct ss_sample){ .time_ns = smp->time_ns, .seq = s->seq++,
					   .off = s->stackn, .n = smp->nframes,
					   .weight = smp->weight ? smp->weight : 1 };
	for (uint32_t i = 0; i < smp->nframes; i++) {
		/* pcs are leaf first; speedscope wants root first. */
		long id = ss_frame(s, smp->pcs[smp->nframes - 1 - i]);

		if (id < 0)
			return (int)id;
		s->stackv[s->stackn++] = (uint32_t)id;
	}
	return 0;
}

static int cmp_sample(const void *a, const void *b)
{
	const struct ss_sample *x = a, *y = b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void ss_write(struct ss *s, const struct sprobe_report_info *info, FILE *o)
{
	uint64_t period = info->freq_hz ? 1000000000ull / info->freq_hz : 0;
	uint64_t weight = period ? period : 1;
	size_t active = 0;

	fputs("{\n  \"$schema\": \"https://www.speedscope.app/file-format-schema.json\",\n", o);
	fprintf(o, "  \"exporter\": \"stackprobe %s\",\n  \"name\": ", sprobe_version());
	ro_json_str(o, info->source ? info->source : "stackprobe");
	for (size_t i = 1; i < s->nprofs; i++)
		if (s->profs[i].total > s->profs[active].total)
			active = i;
	fprintf(o, ",\n  \"activeProfileIndex\": %zu,\n  \"shared\": {\"frames\": [", active);
	for (size_t i = 0; i < s->names.n; i++) {
		fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", o);
		ro_json_str(o, ro_strtab__get(&s->names, (uint32_t)i));
		if (s->file[i]) {
			fputs(", \"file\": ", o);
			ro_json_str(o, ro_strtab__get(&s->files, s->file[i] - 1));
		}
		if (s->line[i])
			fprintf(o, ", \"line\": %u", s->line[i]);
		fputc('}', o);
	}
	fputs("\n  ]},\n  \"profiles\": [", o);
	for (size_t i = 0; i < s->nprofs; i++) {
		struct ss_profile *p = &s->profs[i];

		if (p->n > 1)
			qsort(p->v, p->n, sizeof(*p->v), cmp_sample);
		fputs(i ? ",\n    {\"type\": \"sampled\", \"name\": " :
			  "\n    {\"type\": \"sampled\", \"name\": ", o);
		ro_json_str(o, p->name);
		fprintf(o, ", \"unit\": \"%s\", \"startValue\": 0, \"endValue\": %" PRIu64 ",\n"
			   "     \"samples\": [",
			period ? "nanoseconds" : "none", weight * p->total);
		for (size_t k = 0; k < p->n; k++) {
			const struct ss_sample *sm = &p->v[k];

			fputs(k ? ",[" : "[", o);
			for (uint32_t j = 0; j < sm->n; j++)
				fprintf(o, j ? ",%u" : "%u", s->stackv[sm->off + j]);
			fputc(']', o);
		}
		fputs("],\n     \"weights\": [", o);
		for (size_t k = 0; k < p->n; k++)
			fprintf(o, k ? ",%" PRIu64 : "%" PRIu64, weight * p->v[k].weight);
		fputs("]}", o);
	}
	fputs("\n  ]\n}\n", o);
}

int sprobe_report__write_speedscope(struct sprobe_report *r, FILE *out)
{
	struct sprobe_report_info info = { .sz = sizeof(info) };
	struct ss s = { .r = r };
	int err;

	err = sprobe_report__info(r, &info);
	if (!err)
		err = sprobe_report__foreach_sample(r, ss_add, &s);
	if (!err)
		ss_write(&s, &info, out);
	ro_strtab__free(&s.names);
	free(s.line);
	ro_strtab__free(&s.files);
	free(s.file);
	ro_map__free(&s.frame_of_pc);
	ro_map__free(&s.prof_of_tid);
	for (size_t i = 0; i < s.nprofs; i++) {
		free(s.profs[i].name);
		free(s.profs[i].v);
	}
	free(s.profs);
	free(s.stackv);
	return err;
}
