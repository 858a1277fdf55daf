/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `stackprobe report --format pprof`: a gzip-compressed profile.proto
 * (github.com/google/pprof, proto/profile.proto), the format `go tool
 * pprof`, Pyroscope, Parca and Grafana read.
 *
 * Why a hand-written encoder instead of protobuf-c: profile.proto uses four
 * wire constructs only (varint, length-delimited bytes, nested messages,
 * packed repeated varints), no groups, no fixed-width fields, no maps, no
 * negative numbers; the encoder below is those four functions. The output is
 * checked by an independent decoder (npm pprof-format) in
 * tests/test_outputs.c.
 *
 * What goes in:
 *   sample types   samples/count, wall/nanoseconds (cpu/nanoseconds in cpu
 *                  mode; = count x period, only when the frequency is known),
 *                  pause/nanoseconds (sum of the capture windows the thread
 *                  spent stopped in that stack; only when windows exist)
 *   samples        one per distinct (thread, pcs), leaf first, with the
 *                  labels thread_id (number) and thread_name (string),
 *                  pid (number) and comm (string: the process's name),
 *                  and the caller's (sprobe_report_opts.labels: the
 *                  agent's continuous mode puts service_name, hostname)
 *   locations      one per distinct pc: address = pc, its mapping, one Line
 *                  per function: the functions inlined at pc (innermost
 *                  first) then pc's own, each with its source line when
 *                  the recording has srcline records (go tool pprof -lines)
 *   functions      one per distinct name; the names are the text/folded
 *                  report's names (symbol, module+0xOFF or 0xPC), plain
 *                  names for inlined functions ("f", not "f (inlined)":
 *                  pprof marks them itself); filename when known
 *   mappings       one per executable range of each module: start, limit,
 *                  file offset (as recorded), path, GNU build-id (hex);
 *                  has_functions when every location in it was symbolized
 *   comments       stackprobe version, command line, file status, drops
 *   time_nanos, duration_nanos, period_type, period (1e9 / frequency)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe.h>

#include "userspace/report/outputs.h"
#include "userspace/report/protobuf.h"

/* ---- building the profile ----------------------------------------------- */

struct pp_mapping {
	uint64_t start, limit, file_offset;
	size_t module;			/* position (sprobe_report__module()) */
	uint32_t path, build_id;	/* string ids */
	bool all_symbolized;
	bool used;
};

/* One Line of a Location: a function and a line in it (0: unknown). */
struct pp_line {
	uint32_t function;		/* 1-based */
	uint32_t line;
};

struct pp_location {
	uint64_t pc;
	uint32_t mapping;		/* 1-based, 0: none */
	/* innermost inlined function first, the pc's own function last
	 * (profile.proto's order); 1 Line when nothing was inlined */
	uint32_t nlines;
	struct pp_line lines[SPROBE_DF_MAX_INLINE];
};

struct pp_sample {
	uint32_t tid, pid;
	uint32_t thread_name, comm;	/* string ids */
	uint32_t key;			/* id in keys: (tid, pcs) */
	uint64_t count, pause_ns;
};

struct pp {
	struct sprobe_report *r;
	int err;
	struct ro_strtab strs;		/* the profile's string table */
	struct ro_strtab fnames;	/* name -> function index */
	uint32_t *fname_str;		/* function index -> string id */
	uint32_t *ffile_str;		/* function index -> source file string id (0: "") */
	size_t ffile_cap;
	size_t nfuncs, funcs_cap;
	struct pp_mapping *maps;
	size_t nmaps;
	struct ro_map loc_of_pc;	/* pc -> location index */
	struct pp_location *locs;
	size_t nlocs, locs_cap;
	struct ro_strtab keys;		/* tid + pcs bytes -> sample index */
	struct pp_sample *samples;
	size_t nsamples, samples_cap;
	uint64_t scratch[1 + SPROBE_MAX_FRAMES];
	/* inlined frames (synthetic pcs) met before their pc, innermost first */
	uint64_t pending[SPROBE_DF_MAX_INLINE];
	uint32_t npending;
	bool any_window;
};

static uint32_t pp_str(struct pp *p, const char *s)
{
	long id = ro_strtab__intern(&p->strs, s ? s : "", s ? strlen(s) : 0);

	if (id < 0) {
		p->err = -ENOMEM;
		return 0;
	}
	return (uint32_t)id;
}

static int pp_mappings(struct pp *p)
{
	size_t nmods = sprobe_report__module_count(p->r), total = 0, k = 0;
	struct sprobe_report_module m;

	for (size_t i = 0; i < nmods; i++)
		if (!sprobe_report__module(p->r, i, &m))
			total += m.nranges;
	p->maps = calloc(total ? total : 1, sizeof(*p->maps));
	if (!p->maps)
		return -ENOMEM;
	for (size_t i = 0; i < nmods; i++) {
		if (sprobe_report__module(p->r, i, &m))
			continue;
		for (uint32_t j = 0; j < m.nranges; j++, k++)
			p->maps[k] = (struct pp_mapping){
				.start = m.ranges[j].start, .limit = m.ranges[j].end, .module = i,
				.file_offset = m.ranges[j].file_offset,
				.path = pp_str(p, m.path), .build_id = pp_str(p, m.build_id),
				.all_symbolized = true,
			};
	}
	p->nmaps = k;
	return p->err;
}

/* Function index (1-based) of name, with its source file (NULL or "": not
 * known), created on first sight; 0 on error (p->err set). */
static uint32_t pp_function(struct pp *p, const char *name, const char *file)
{
	long fi = ro_strtab__intern(&p->fnames, name, strlen(name));

	if (fi < 0)
		goto oom;
	if ((size_t)fi == p->nfuncs) {
		if (ro_grow((void **)&p->fname_str, &p->funcs_cap, p->nfuncs + 1, sizeof(uint32_t)) ||
		    ro_grow((void **)&p->ffile_str, &p->ffile_cap, p->nfuncs + 1, sizeof(uint32_t)))
			goto oom;
		p->fname_str[p->nfuncs] = pp_str(p, name);
		p->ffile_str[p->nfuncs] = 0;
		p->nfuncs++;
	}
	if (file && *file && !p->ffile_str[fi])
		p->ffile_str[fi] = pp_str(p, file);
	return (uint32_t)fi + 1;
oom:
	p->err = -ENOMEM;
	return 0;
}

/* Location id (1-based) of PC, created with its functions on first sight:
 * the inlined frames in p->pending (innermost first) and pc's own. */
static uint32_t pp_location(struct pp *p, uint64_t pc)
{
	struct sprobe_report_frame f;
	struct pp_location loc = { 0 };
	const char *fn, *file;
	uint32_t idx, line;
	bool inl;
	int err;

	if (ro_map__get(&p->loc_of_pc, pc, &idx))
		return idx + 1;
	for (uint32_t k = 0; k < p->npending && loc.nlines + 1 < SPROBE_DF_MAX_INLINE; k++) {
		if (sprobe_report__frame_line(p->r, p->pending[k], &fn, &file, &line, &inl) != 0 || !fn)
			continue;
		loc.lines[loc.nlines++] = (struct pp_line){ pp_function(p, fn, file), line };
	}
	err = sprobe_report__resolve(p->r, pc, &f);
	if (err) {
		p->err = err;
		return 0;
	}
	/* The address, not the key (several processes: see report.h), in
	 * a mapping of the frame's own module (its process's). */
	loc.pc = f.address;
	file = NULL;
	line = 0;
	sprobe_report__frame_line(p->r, pc, NULL, &file, &line, NULL);
	loc.lines[loc.nlines++] = (struct pp_line){ pp_function(p, f.name, file), line };
	for (size_t i = 0; i < p->nmaps; i++)
		if ((f.module_pos == SPROBE_DF_NO_MODULE || p->maps[i].module == f.module_pos) &&
		    f.address >= p->maps[i].start && f.address < p->maps[i].limit) {
			loc.mapping = (uint32_t)i + 1;
			p->maps[i].used = true;
			if (!f.symbolized)
				p->maps[i].all_symbolized = false;
			break;
		}
	if (p->err)
		return 0;
	if (ro_grow((void **)&p->locs, &p->locs_cap, p->nlocs + 1, sizeof(*p->locs)) ||
	    ro_map__put(&p->loc_of_pc, pc, (uint32_t)p->nlocs))
		goto oom;
	p->locs[p->nlocs++] = loc;
	return (uint32_t)p->nlocs;
oom:
	p->err = -ENOMEM;
	return 0;
}

/* Synthetic pcs (bit 63) are inlined frames: part of the next real pc's
 * Location, not Locations of their own (sprobe_report_sample). */
static bool is_inlined_frame(uint64_t pc)
{
	return (pc >> 63) != 0;
}

static int pp_add_sample(const struct sprobe_report_sample *s, void *ctx)
{
	struct pp *p = ctx;
	uint32_t n = 0;
	long id;

	p->scratch[0] = s->tid;
	for (uint32_t i = 0; i < s->nframes && n < SPROBE_MAX_FRAMES; i++)
		if (!is_inlined_frame(s->pcs[i]))
			p->scratch[1 + n++] = s->pcs[i];
	id = ro_strtab__intern(&p->keys, p->scratch, (1 + n) * sizeof(uint64_t));
	if (id < 0)
		return -ENOMEM;
	if ((size_t)id == p->nsamples) {
		if (ro_grow((void **)&p->samples, &p->samples_cap, p->nsamples + 1, sizeof(*p->samples)))
			return -ENOMEM;
		p->samples[p->nsamples++] = (struct pp_sample){
			.tid = s->tid, .thread_name = pp_str(p, s->thread_name), .key = (uint32_t)id,
			.pid = s->pid, .comm = pp_str(p, s->process_name ? s->process_name : ""),
		};
		/* Locations in leaf-first order, created now so the ids are
		 * stable before encoding. */
		p->npending = 0;
		for (uint32_t i = 0; i < s->nframes; i++) {
			if (is_inlined_frame(s->pcs[i])) {
				if (p->npending < SPROBE_DF_MAX_INLINE)
					p->pending[p->npending++] = s->pcs[i];
				continue;
			}
			pp_location(p, s->pcs[i]);
			p->npending = 0;
		}
	}
	p->samples[id].count += s->weight ? s->weight : 1;
	p->samples[id].pause_ns += s->window_ns;
	if (s->window_ns)
		p->any_window = true;
	return p->err;
}

static void value_type(struct ro_buf *b, struct ro_buf *tmp, uint32_t field, uint32_t type,
		       uint32_t unit)
{
	tmp->n = 0;
	sprobe_rep__pb_uint(tmp, 1, type);
	sprobe_rep__pb_uint(tmp, 2, unit);
	sprobe_rep__pb_msg(b, field, tmp);
}

static void comment(struct pp *p, uint64_t *ids, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void comment(struct pp *p, uint64_t *ids, size_t *n, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	ids[(*n)++] = pp_str(p, line);
}

/* Encode everything into B (uncompressed profile.proto). */
static int pp_encode(struct pp *p, const struct sprobe_report_info *info, struct ro_buf *b)
{
	struct ro_buf msg = { 0 }, tmp = { 0 }, lab = { 0 };
	uint64_t period = info->freq_hz ? 1000000000ull / info->freq_hz : 0;
	uint32_t s_samples = pp_str(p, "samples"), s_count = pp_str(p, "count");
	uint32_t s_ns = pp_str(p, "nanoseconds");
	uint32_t s_time = pp_str(p, info->mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall");
	uint32_t s_pause = pp_str(p, "pause");
	uint32_t s_tid = pp_str(p, "thread_id"), s_tname = pp_str(p, "thread_name");
	uint32_t s_pid = pp_str(p, "pid"), s_comm = pp_str(p, "comm");
	uint64_t values[3], comments[8];
	size_t nvalues = 0, ncomments = 0;
	char cmd[768];
	size_t cl = 0;
	/* The caller's labels (sprobe_report_opts.labels), on every sample. */
	uint32_t ext_key[16], ext_val[16];
	size_t next = 0;
	if (sprobe_report__labels(p->r)) {
		char *copy = strdup(sprobe_report__labels(p->r)), *save = NULL;
		if (!copy)
			return -ENOMEM;
		for (char *l = strtok_r(copy, "\n", &save); l && next < 16;
		     l = strtok_r(NULL, "\n", &save)) {
			char *eq = strchr(l, '=');
			if (!eq || eq == l)
				continue;
			*eq = '\0';
			ext_key[next] = pp_str(p, l);
			ext_val[next++] = pp_str(p, eq + 1);
		}
		free(copy);
	}

	/* sample_type = 1 */
	value_type(b, &tmp, 1, s_samples, s_count);
	if (period)
		value_type(b, &tmp, 1, s_time, s_ns);
	if (p->any_window)
		value_type(b, &tmp, 1, s_pause, s_ns);

	/* sample = 2 */
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pp_sample *s = &p->samples[i];
		const uint64_t *key = (const uint64_t *)(const void *)ro_strtab__get(&p->keys, s->key);
		size_t n = ro_strtab__len(&p->keys, s->key) / sizeof(uint64_t) - 1;
		uint64_t ids[SPROBE_MAX_FRAMES];
		uint32_t idx;

		for (size_t k = 0; k < n; k++) {
			uint64_t pc;

			memcpy(&pc, key + 1 + k, sizeof(pc));
			ids[k] = ro_map__get(&p->loc_of_pc, pc, &idx) ? idx + 1 : 0;
		}
		nvalues = 0;
		values[nvalues++] = s->count;
		if (period)
			values[nvalues++] = s->count * period;
		if (p->any_window)
			values[nvalues++] = s->pause_ns;
		msg.n = 0;
		sprobe_rep__pb_packed(&msg, &tmp, 1, ids, n);
		sprobe_rep__pb_packed(&msg, &tmp, 2, values, nvalues);
		lab.n = 0;
		sprobe_rep__pb_uint(&lab, 1, s_tid);
		sprobe_rep__pb_uint(&lab, 3, s->tid);
		sprobe_rep__pb_msg(&msg, 3, &lab);
		lab.n = 0;
		sprobe_rep__pb_uint(&lab, 1, s_tname);
		sprobe_rep__pb_uint(&lab, 2, s->thread_name);
		sprobe_rep__pb_msg(&msg, 3, &lab);
		/* The process (Parca's and Pyroscope's label names). */
		if (s->pid) {
			lab.n = 0;
			sprobe_rep__pb_uint(&lab, 1, s_pid);
			sprobe_rep__pb_uint(&lab, 3, s->pid);
			sprobe_rep__pb_msg(&msg, 3, &lab);
			lab.n = 0;
			sprobe_rep__pb_uint(&lab, 1, s_comm);
			sprobe_rep__pb_uint(&lab, 2, s->comm);
			sprobe_rep__pb_msg(&msg, 3, &lab);
		}
		for (size_t k = 0; k < next; k++) {
			lab.n = 0;
			sprobe_rep__pb_uint(&lab, 1, ext_key[k]);
			sprobe_rep__pb_uint(&lab, 2, ext_val[k]);
			sprobe_rep__pb_msg(&msg, 3, &lab);
		}
		sprobe_rep__pb_msg(b, 2, &msg);
	}

	/* mapping = 3 */
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct pp_mapping *m = &p->maps[i];

		msg.n = 0;
		sprobe_rep__pb_uint(&msg, 1, i + 1);
		sprobe_rep__pb_uint(&msg, 2, m->start);
		sprobe_rep__pb_uint(&msg, 3, m->limit);
		sprobe_rep__pb_uint(&msg, 4, m->file_offset);
		sprobe_rep__pb_uint(&msg, 5, m->path);
		sprobe_rep__pb_uint(&msg, 6, m->build_id);
		sprobe_rep__pb_uint(&msg, 7, m->used && m->all_symbolized);
		sprobe_rep__pb_msg(b, 3, &msg);
	}

	/* location = 4, with one Line per function (inlined ones first) */
	for (size_t i = 0; i < p->nlocs; i++) {
		const struct pp_location *l = &p->locs[i];

		msg.n = 0;
		sprobe_rep__pb_uint(&msg, 1, i + 1);
		sprobe_rep__pb_uint(&msg, 2, l->mapping);
		sprobe_rep__pb_uint(&msg, 3, l->pc);
		for (uint32_t k = 0; k < l->nlines; k++) {
			tmp.n = 0;
			sprobe_rep__pb_uint(&tmp, 1, l->lines[k].function);
			sprobe_rep__pb_uint(&tmp, 2, l->lines[k].line);
			sprobe_rep__pb_msg(&msg, 4, &tmp);
		}
		sprobe_rep__pb_msg(b, 4, &msg);
	}

	/* function = 5: name and system_name */
	for (size_t i = 0; i < p->nfuncs; i++) {
		msg.n = 0;
		sprobe_rep__pb_uint(&msg, 1, i + 1);
		sprobe_rep__pb_uint(&msg, 2, p->fname_str[i]);
		sprobe_rep__pb_uint(&msg, 3, p->fname_str[i]);
		sprobe_rep__pb_uint(&msg, 4, p->ffile_str[i]);
		sprobe_rep__pb_msg(b, 5, &msg);
	}

	/* comment = 13 (strings, interned before the table is written) */
	comment(p, comments, &ncomments, "stackprobe %s", sprobe_version());
	for (uint32_t i = 0; i < info->cmdline_len && cl + 1 < sizeof(cmd); i++) {
		char c = info->cmdline[i];

		cmd[cl++] = c == '\0' ? ' ' : c;
	}
	cmd[cl] = '\0';
	if (info->has_header)
		comment(p, comments, &ncomments, "command: %s (pid %u, %s mode, %u Hz)", cmd,
			info->pid, info->mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall", info->freq_hz);
	if (info->status == SPROBE_DF_COMPLETE)
		comment(p, comments, &ncomments, "file: complete");
	else
		comment(p, comments, &ncomments, "file: %s: %s",
			info->status == SPROBE_DF_CUT_SHORT ? "CUT SHORT" : "ERROR", info->message);
	comment(p, comments, &ncomments,
		"drops: %llu records lost in the stream, %llu thread-captures dropped",
		(unsigned long long)info->lost, (unsigned long long)info->threads_dropped);

	/* string_table = 6: id 0 is "" (interned first in write_pprof) */
	for (size_t i = 0; i < p->strs.n; i++)
		sprobe_rep__pb_bytes(b, 6, ro_strtab__get(&p->strs, (uint32_t)i),
			 ro_strtab__len(&p->strs, (uint32_t)i));

	sprobe_rep__pb_uint(b, 9, info->start_realtime_ns);
	sprobe_rep__pb_uint(b, 10, info->wall_ns);
	if (period) {
		value_type(b, &tmp, 11, s_time, s_ns);
		sprobe_rep__pb_uint(b, 12, period);
	} else {
		value_type(b, &tmp, 11, s_samples, s_count);
		sprobe_rep__pb_uint(b, 12, 1);
	}
	sprobe_rep__pb_packed(b, &tmp, 13, comments, ncomments);
	/* default_sample_type = 14: the time type when there is one. */
	sprobe_rep__pb_uint(b, 14, period ? s_time : s_samples);

	if (msg.oom || tmp.oom || lab.oom)
		b->oom = true;
	ro_buf__free(&msg);
	ro_buf__free(&tmp);
	ro_buf__free(&lab);
	return b->oom ? -ENOMEM : p->err;
}

int sprobe_report__write_pprof(struct sprobe_report *r, FILE *out)
{
	struct sprobe_report_info info = { .sz = sizeof(info) };
	struct pp p = { .r = r };
	struct ro_buf b = { 0 };
	int err;

	err = sprobe_report__info(r, &info);
	if (err)
		return err;
	pp_str(&p, "");		/* string_table[0] must be "" */
	err = pp_mappings(&p);
	if (!err)
		err = sprobe_report__foreach_sample(r, pp_add_sample, &p);
	if (!err)
		err = p.err;
	if (!err)
		err = pp_encode(&p, &info, &b);
	if (!err)
		err = sprobe_rep__gzip_write(out, b.p, b.n);
	ro_buf__free(&b);
	ro_strtab__free(&p.strs);
	ro_strtab__free(&p.fnames);
	free(p.fname_str);
	free(p.maps);
	ro_map__free(&p.loc_of_pc);
	free(p.locs);
	free(p.ffile_str);
	ro_strtab__free(&p.keys);
	free(p.samples);
	return err;
}
