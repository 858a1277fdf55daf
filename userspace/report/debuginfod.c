/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Names from debuginfod at report time (sprobe_report__debuginfod(),
 * report.h).
 *
 * Why here and not in the agent: the agent names pcs at flush from inside
 * the profiled program; a debuginfod lookup there is an HTTP request (and
 * up to DEBUGINFOD_TIMEOUT seconds of waiting) made by someone else's
 * process, with its credentials and network, at a moment it did not
 * choose. The data file already holds what a lookup needs, each module's
 * build-id, path, load bias and segments, so the report, run by the user
 * who asked for names, does it instead, and can do it on another machine
 * or long after the recording.
 *
 * For each process, the symbol records of modules with a build-id whose
 * name is empty (no symbol, no FDE) or an FDE name ("gzip+0x42f0") are
 * looked up again in an offline inventory of that process's modules made
 * with opts.debuginfod. A result that comes from a symbol table (any
 * source but "eh-frame") replaces the recorded name; anything else leaves
 * the record as it was. An FDE name is looked up at the FDE's start (the
 * pc minus the recorded offset): the agent looked return addresses up at
 * pc - 1, and the function's start is in the same function in both cases.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/symbolize.h>

#include "userspace/report/report_internal.h"
#include "userspace/symbols/debuginfod.h"

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* An offline inventory of process proc's modules, or NULL. */
static struct sprobe_modules *inventory(const struct sprobe_report *r, uint32_t proc)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .empty = true, .no_perf_map = true,
					 .debuginfod = true };
	struct sprobe_modules *m = sprobe_modules__new(&o);

	for (size_t i = 0; m && i < r->modules.n; i++) {
		const struct module *mod = &r->modules.v[i];
		struct sprobe_module d = { 0 };
		size_t hl = mod->build_id ? strlen(mod->build_id) : 0;

		if (mod->proc != proc || !hl || hl % 2 || hl / 2 > SPROBE_BUILD_ID_MAX)
			continue;
		d.path = mod->path;
		d.bias = mod->load_bias;
		for (uint32_t k = 0; k < mod->nranges && k < SPROBE_MODULE_MAX_SEGS; k++) {
			d.segs[k].start = mod->ranges[k].start;
			d.segs[k].end = mod->ranges[k].end;
			d.segs[k].prot = SPROBE_SEG_R | SPROBE_SEG_X;
			d.segs[k].file_offset = mod->ranges[k].file_offset;
			d.nsegs = k + 1;
		}
		d.build_id_len = (uint32_t)(hl / 2);
		for (size_t k = 0; k < hl / 2; k++)
			d.build_id[k] = (uint8_t)(hexval(mod->build_id[2 * k]) << 4 |
						  hexval(mod->build_id[2 * k + 1]));
		(void)sprobe_modules__add(m, &d); /* a bad or overlapping one: skipped */
	}
	return m;
}

int sprobe_report__debuginfod(struct sprobe_report *r)
{
	struct sprobe_modules **inv;
	int renamed = 0;
	int err = 0;
	const char *urls = getenv("DEBUGINFOD_URLS");

	if (!r)
		return -EINVAL;
	if (r->debuginfod_done || !urls || !urls[strspn(urls, " ")])
		return 0;
	inv = calloc(r->procs.n ? r->procs.n : 1, sizeof(*inv));
	if (!inv)
		return -ENOMEM;
	r->debuginfod_done = true;
	for (size_t si = 0; si < r->syms.n && !err; si++) {
		struct symbol *s = &r->syms.v[si];
		uint32_t proc = key_proc(s->key);
		uint64_t pc = key_pc(s->key);
		struct sprobe_symbol out;
		bool added;

		if (s->module == SPROBE_DF_NO_MODULE || s->module >= r->modules.n ||
		    !r->modules.v[s->module].build_id || proc >= r->procs.n)
			continue;
		bool cfi = sprobe_rep__cfi_name(r, s->module, s->name);

		if (r->names.keys.v[s->name].len && !cfi)
			continue;
		if (sprobe__debuginfod_down())
			break;
		if (!inv[proc] && !(inv[proc] = inventory(r, proc)))
			continue;
		uint64_t at = cfi ? pc - s->offset : pc;

		if (sprobe_modules__symbolize(inv[proc], at, &out) != 0 || !out.name ||
		    !out.source || strcmp(out.source, "eh-frame") == 0)
			continue;
		long id = sprobe_rep__bytemap_intern(&r->names, out.name, strlen(out.name), &added);

		if (id < 0) {
			err = (int)id;
			break;
		}
		s->name = (uint32_t)id;
		s->offset = pc - out.sym_start;
		renamed++;
	}
	for (size_t i = 0; i < r->procs.n; i++)
		sprobe_modules__free(inv[i]);
	free(inv);
	int down = sprobe__debuginfod_down();

	if (down) {
		fprintf(stderr,
			"stackprobe report: debuginfod: cannot reach %s (%s); frames keep their recorded names "
			"(unset DEBUGINFOD_URLS to skip the lookup)\n",
			urls, strerror(-down));
	}
	if (renamed) {
		/* names changed under functions already made: start over */
		ro_map__free(&r->pc_func);
		r->aggregated = false;
	}
	return err ? err : renamed;
}
