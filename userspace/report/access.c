/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report's public accessors (<stackprobe/report.h>: info,
 * foreach_sample, resolve, modules), through which the pprof, speedscope
 * and SVG writers read it (outputs.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/report.h>

#include "userspace/report/report_internal.h"

int sprobe_report__info(const struct sprobe_report *r, struct sprobe_report_info *info)
{
	struct sprobe_report_info i = { .sz = sizeof(i) };
	size_t n;

	if (!r || !info || info->sz < sizeof(size_t))
		return -EINVAL;
	i.has_header = r->has_header;
	if (r->has_header) {
		i.pid = r->header.pid;
		i.mode = r->header.mode;
		i.freq_hz = r->header.freq_hz;
		i.start_realtime_ns = r->header.start_realtime_ns;
		i.cmdline = r->header.cmdline;
		i.cmdline_len = r->header.cmdline_len;
	}
	i.wall_ns = sprobe_rep__wall_ns(r);
	i.samples = sprobe_report__samples(r);
	i.lost = sprobe_rep__lost_total(r);
	i.threads_dropped = r->cap_dropped;
	i.status = r->status;
	i.message = r->message ? r->message : "";
	i.source = r->source;
	/* Copy only what the caller's struct has room for (older callers). */
	n = info->sz < sizeof(i) ? info->sz : sizeof(i);
	memcpy((char *)info + sizeof(size_t), (char *)&i + sizeof(size_t), n - sizeof(size_t));
	return 0;
}

int sprobe_report__foreach_sample(struct sprobe_report *r, sprobe_report_sample_fn fn, void *ctx)
{
	if (!r || !fn)
		return -EINVAL;
	int eerr = sprobe_rep__elide_agent_frames(r);

	if (eerr)
		return eerr;
	for (size_t si = 0; si < r->samples.n; si++) {
		const struct sample *s = &r->samples.v[si];
		const struct thread *t = &r->threads.v[s->thread];
		/* The folded report's thread label, so every stack format
		 * names threads alike. */
		char pbuf[32];
		struct sprobe_report_sample out = {
			.tid = t->tid, .thread_name = sprobe_rep__thread_label(t),
			.pid = r->procs.n ? r->procs.v[t->proc].pid : 0,
			.process_name = r->procs.n ? sprobe_rep__proc_name(r, t->proc, pbuf, sizeof(pbuf)) : "",
			.multi_process = sprobe_rep__multi(r),
			.time_ns = s->time_ns, .window_ns = s->window_ns, .method = s->method,
			.truncated = s->truncated,
			.weight = s->weight,
		};
		size_t nframes;
		int rc;

		if (!sprobe_rep__thread_selected(r, s->thread))
			continue;
		/* inlined functions are frames of their own (inline.c) */
		out.pcs = sprobe_rep__expand(r, s->nframes ? r->pcs.v + s->pc_off : NULL, s->nframes,
					     &nframes);
		out.nframes = (uint32_t)nframes;
		rc = fn(&out, ctx);
		if (rc)
			return rc;
	}
	return 0;
}

int sprobe_report__resolve(struct sprobe_report *r, uint64_t pc, struct sprobe_report_frame *f)
{
	long fid;
	uint32_t si;

	if (!r || !f)
		return -EINVAL;
	fid = sprobe_rep__func_of(r, pc);
	if (fid < 0)
		return (int)fid;
	memset(f, 0, sizeof(*f));
	f->name = sprobe_rep__func_name(r, (uint32_t)fid);
	f->symbolized = ro_map__get(&r->sym_idx, pc, &si) && r->names.keys.v[r->syms.v[si].name].len;
	if (f->symbolized) {
		f->module_pos = r->syms.v[si].module;
	} else {
		long mp = sprobe_rep__module_of(r, pc);

		f->module_pos = mp >= 0 ? (uint32_t)mp : SPROBE_DF_NO_MODULE;
	}
	f->module_index = f->module_pos != SPROBE_DF_NO_MODULE && f->module_pos < r->modules.n
				  ? r->modules.v[f->module_pos].index
				  : SPROBE_DF_NO_MODULE;
	f->module = sprobe_rep__module_name(r, f->module_pos);
	f->address = key_pc(pc);
	return 0;
}

size_t sprobe_report__module_count(const struct sprobe_report *r)
{
	return r ? r->modules.n : 0;
}

int sprobe_report__module(const struct sprobe_report *r, size_t i, struct sprobe_report_module *m)
{
	const struct module *mod;

	if (!r || !m || i >= r->modules.n)
		return -EINVAL;
	mod = &r->modules.v[i];
	*m = (struct sprobe_report_module){
		.index = mod->index, .pid = r->procs.n ? r->procs.v[mod->proc].pid : 0,
		.path = mod->path, .build_id = mod->build_id,
		.load_bias = mod->load_bias, .ranges = mod->ranges, .nranges = mod->nranges,
	};
	return 0;
}

const char *sprobe_report__labels(const struct sprobe_report *r)
{
	return r->labels;
}
