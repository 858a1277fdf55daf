/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The text report (SPROBE_REPORT_TEXT): summary, windows, drops, symbols
 * hints and the hottest functions, for a terminal.
 */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#ifdef __linux__
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>
#endif
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stackprobe/pause.h>
#include <stackprobe/report.h>
#include <stackprobe/trace.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/report_internal.h"
#include "userspace/report/shares.h"

/* ---- text --------------------------------------------------------------- */

static double pcnt(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static double us(uint64_t ns)
{
	return (double)ns / 1000.0;
}

/* A duration for prose lines: "850 ns", "12.3 us", "4.56 ms", "1.234 s".
 * buf must hold 32 bytes; returns buf. */
static const char *dur(char *buf, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, 32, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(buf, 32, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, 32, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(buf, 32, "%.3f s", (double)ns / 1e9);
	return buf;
}

static void print_cmdline(FILE *o, const struct sprobe_report *r)
{
	for (uint32_t i = 0; i < r->header.cmdline_len; i++) {
		unsigned char c = (unsigned char)r->header.cmdline[i];

		if (c == '\0')
			fputc(i + 1 < r->header.cmdline_len ? ' ' : '\n', o);
		else
			fputc(c < 0x20 || c == 0x7f ? '?' : c, o);
	}
	if (!r->header.cmdline_len || r->header.cmdline[r->header.cmdline_len - 1] != '\0')
		fputc('\n', o);
}

static const char *thread_label(const struct thread *t)
{
	return t->name && *t->name ? t->name : "?";
}

static void text_drops(FILE *o, const struct sprobe_report *r)
{
	uint64_t lt = sprobe_rep__lost_total(r);
	bool any_thread = false;

	fprintf(o, "\nDrops\n");
	fprintf(o, "  records lost in the stream (queue full): %" PRIu64, lt);
	if (lt) {
		const char *sep = " (";

		for (int i = 1; i < SPROBE_DF__TYPE_COUNT; i++)
			if (r->lost[i]) {
				fprintf(o, "%s%s %" PRIu64, sep, sprobe_df_type__name(i), r->lost[i]);
				sep = ", ";
			}
		fputc(')', o);
	}
	fputc('\n', o);
	fprintf(o, "  threads not captured: %" PRIu64 " of %" PRIu64 " thread-captures",
		r->cap_dropped, r->cap_total);
	if (r->cap_dropped) {
		const char *sep = " (";

		for (int i = 1; i < SPROBE_DROP__COUNT; i++)
			if (r->cap_dropped_reason[i]) {
				fprintf(o, "%s%s %" PRIu64, sep, sprobe_rep__drop_names[i], r->cap_dropped_reason[i]);
				sep = ", ";
			}
		fputc(')', o);
	}
	fputc('\n', o);
	for (size_t i = 0; i < r->threads.n; i++) {
		const struct thread *t = &r->threads.v[i];
		uint64_t d = 0;

		if (!sprobe_rep__selected(r, t->tid))
			continue;
		for (int k = 1; k < SPROBE_DROP__COUNT; k++)
			d += t->dropped[k];
		if (!d)
			continue;
		if (!any_thread)
			fprintf(o, "  dropped threads:\n  %8s  %-16s %8s  reasons\n", "tid", "name", "drops");
		any_thread = true;
		fprintf(o, "  %8u  %-16s %8" PRIu64 " ", t->tid, thread_label(t), d);
		for (int k = 1; k < SPROBE_DROP__COUNT; k++)
			if (t->dropped[k])
				fprintf(o, " %s=%" PRIu64, sprobe_rep__drop_names[k], t->dropped[k]);
		/* A thread that blocks the signal but was sampled anyway, by
		 * its perf event (docs/AGENT.md): its CPU is not missing. */
		if (t->dropped[SPROBE_DROP_BLOCKED] && t->methods[SPROBE_METHOD_PERF_EVENT])
			fprintf(o, " (sampled without a signal: %" PRIu64 " perf-event samples)",
				t->methods[SPROBE_METHOD_PERF_EVENT]);
		fputc('\n', o);
	}
}

/* Threads by samples, most first; ties by tid. */
static int cmp_thread(const void *a, const void *b, void *arg)
{
	const struct sprobe_report *r = arg;
	const struct thread *x = &r->threads.v[*(const uint32_t *)a];
	const struct thread *y = &r->threads.v[*(const uint32_t *)b];

	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/*
 * Sampled modules none of whose frames has a name. Names come from the
 * symbol records the agent wrote, so such a module had no symbols for any
 * of them when it was recorded: no symbol table, or one that covers none
 * of the code the samples hit. Say so, with the package that fixes it,
 * rather than leave the reader guessing at "libc.so.6+0x891f4". A module
 * with some names gets no line: frames without one happen with full
 * symbols too (PLT stubs), and the file does not say which symbol table
 * named the others (libc's .dynsym names read but not start_thread).
 */
#ifdef __linux__
/* Is the file at path (here, where the report runs) an ELF file whose GNU
 * build-id is hex? Its program headers' notes, no libelf. */
static bool file_has_build_id(const char *path, const char *hex)
{
	Elf64_Ehdr eh;
	bool yes = false;
	int fd = path && hex ? open(path, O_RDONLY | O_CLOEXEC) : -1;

	if (fd < 0)
		return false;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 256) {
		for (unsigned i = 0; i < eh.e_phnum && !yes; i++) {
			Elf64_Phdr ph;
			uint8_t buf[4096];

			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != (ssize_t)sizeof(ph) ||
			    ph.p_type != PT_NOTE || ph.p_filesz > sizeof(buf) ||
			    pread(fd, buf, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz)
				continue;
			size_t align = ph.p_align == 8 ? 8 : 4;

			for (size_t off = 0; off + 12 <= ph.p_filesz;) {
				uint32_t namesz, descsz, type;

				memcpy(&namesz, buf + off, 4);
				memcpy(&descsz, buf + off + 4, 4);
				memcpy(&type, buf + off + 8, 4);
				size_t name_at = off + 12, desc_at = name_at + ((namesz + align - 1) & ~(align - 1));

				if (desc_at > ph.p_filesz || descsz > ph.p_filesz - desc_at)
					break;
				if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(buf + name_at, "GNU", 4)) {
					char got[2 * 64 + 1] = "";

					for (uint32_t k = 0; k < descsz && k < 64; k++)
						snprintf(got + 2 * k, 3, "%02x", buf[desc_at + k]);
					yes = strcmp(got, hex) == 0;
					break;
				}
				off = desc_at + ((descsz + align - 1) & ~(align - 1));
			}
		}
	}
	close(fd);
	return yes;
}
#endif

static void text_symbols(FILE *o, const struct sprobe_report *r)
{
	bool first = true;

	for (size_t i = 0; i < r->modules.n; i++) {
		const struct module *m = &r->modules.v[i];
		const char *b = sprobe_rep__base_name(m->path);
		bool libc = strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-", 5) == 0;

		bool dup = false;

		if (!m->frames || m->named)
			continue;
		/* Several processes map the same file: one line for it. */
		for (size_t j = 0; j < i && !dup; j++)
			dup = r->modules.v[j].frames && !r->modules.v[j].named &&
			      strcmp(r->modules.v[j].path, m->path) == 0;
		if (dup)
			continue;
		/* A writer that left names to the reader, whose pass found no
		 * file with the module's build-id here, is not a missing
		 * symbol table (a file that is here, stripped, is). */
		bool left = r->header.flags & SPROBE_DF_HEADER_NAMES_BY_READER;
#ifdef __linux__
		if (left && file_has_build_id(m->path, m->build_id))
			left = false;
#endif

		fprintf(o, "  %s  %s: no symbols (%s)\n", first ? "symbols:" : "        ", b,
			left ? "its names were left to the reader, and no file with its build-id "
			       "is here: read the data where it was recorded, before an upgrade"
			: libc ? "install libc6-dbg for names"
			       : "no symbol table; install its debug package (-dbgsym) or build with -g");
		first = false;
	}
}

/* One line per process image: who, how many samples, how it ended, and
 * whether its part of the file is whole (a process killed by a signal
 * writes no trailer: that is how it ended, not damage). */
static void text_processes(FILE *o, const struct sprobe_report *r)
{
	uint64_t total = 0;
	size_t unsampled = 0, shown = 0;

	for (size_t i = 0; i < r->procs.n; i++) {
		total += r->procs.v[i].samples;
		unsampled += !!(r->procs.v[i].flags & SPROBE_DF_PROCESS_UNSAMPLED);
	}
	fprintf(o, "  processes: %zu (%zu not sampled)%s\n", r->procs.n, unsampled,
		r->procs_skipped ? "" : "");
	if (r->procs_skipped)
		fprintf(o, "             %" PRIu64 " more not loaded (over %u)\n", r->procs_skipped,
			MAX_PROCS);
	fprintf(o, "\nProcesses (by start; pid/exec)\n");
	fprintf(o, "  %8s %4s %8s  %-16s %8s %7s  %-18s %s\n", "pid", "exec", "ppid", "name", "samples",
		"share", "end", "data");
	for (size_t i = 0; i < r->procs.n; i++) {
		const struct process *p = &r->procs.v[i];
		char end[48], nb[32];
		const char *data;

		if (r->filter_pid && p->pid != r->filter_pid)
			continue;
		/* Keep the table readable for a big build: every process
		 * with samples, and up to 40 without. */
		if (!p->samples && !(p->flags & SPROBE_DF_PROCESS_UNSAMPLED) && shown >= 40)
			continue;
		shown += !p->samples;
		sprobe_rep__proc_end(p, end, sizeof(end));
		data = sprobe_rep__proc_data(p);
		fprintf(o, "  %8u %4u %8u  %-16s %8" PRIu64 " %6.2f%%  %-18s %s\n", p->pid, p->exec_index,
			p->ppid, sprobe_rep__proc_name(r, (uint32_t)i, nb, sizeof(nb)), p->samples,
			pcnt(p->samples, total), end, data);
		if (p->part_status == SPROBE_DF_CORRUPT && p->exit_note && *p->exit_note)
			fprintf(o, "  %8s %s\n", "", p->exit_note);
	}
	if (shown >= 40)
		fprintf(o, "  (processes without samples beyond 40 not listed)\n");
}

/*
 * Wall mode: the rate the captures achieved against the one asked, and the
 * thread-captures dropped by reason. A round that cannot be finished in
 * its period delays the next ones (the probe skips the ticks it missed),
 * so a rate below the asked one is said here, never left to be guessed
 * from fewer samples. One process only: a tree's captures are per process.
 */
static void text_rate(FILE *o, const struct sprobe_report *r, bool merged)
{
	double span = r->cap_last_ns > r->cap_first_ns ? (double)(r->cap_last_ns - r->cap_first_ns) / 1e9 : 0;

	if (r->has_header && r->header.mode != SPROBE_DF_MODE_CPU && r->header.freq_hz &&
	    r->captures >= 2 && span > 0 && !(merged && r->procs.n > 1)) {
		double got = (double)(r->captures - 1) / span, asked = r->header.freq_hz;
		double short_by = asked * span - (double)(r->captures - 1);

		fprintf(o, "  rate:     %.1f captures/s of %.0f asked (%.1f %%)", got, asked,
			100.0 * got / asked);
		if (got < 0.95 * asked)
			fprintf(o, ": %.0f rounds not taken, the probe could not finish a round "
				   "in its period", short_by);
		fputc('\n', o);
	}
	if (r->cap_dropped) {
		const char *sep = "";

		fprintf(o, "  dropped:  ");
		for (int k = 0; k < SPROBE_DROP__COUNT; k++) {
			if (!r->cap_dropped_reason[k])
				continue;
			fprintf(o, "%s%s %" PRIu64, sep, sprobe_rep__drop_names[k], r->cap_dropped_reason[k]);
			sep = ", ";
		}
		fprintf(o, " (thread-captures not taken, by reason: docs/capture.md)\n");
	}
}

/* The half-width of a share's 95 % interval in points, or "-". */
static void half_width(char *buf, size_t len, const struct sprobe_rep_shares *sh, double se)
{
	if (isnan(se) || isnan(sh->tq))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.2f", 100.0 * sh->tq * se);
}

int sprobe_rep__write_text(struct sprobe_report *r, FILE *o)
{
	uint64_t wall = sprobe_rep__wall_ns(r);
	uint64_t nsel = r->nsel;
	size_t nf;
	uint32_t *ids;

	fprintf(o, "stackprobe report%s%s\n", r->source ? ": " : "", r->source ? r->source : "");
	if (r->has_header) {
		time_t secs = (time_t)(r->header.start_realtime_ns / 1000000000u);
		struct tm tm;
		char when[64] = "?";

		if (gmtime_r(&secs, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
		fprintf(o, "  command:  ");
		print_cmdline(o, r);
		fprintf(o, "  pid %u, %s mode, %u Hz, started %s, wall time %.3f s\n", r->header.pid,
			r->header.mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall", r->header.freq_hz,
			when, (double)wall / 1e9);
	}
	/* A recording `record` merged (several processes, or one with how
	 * it ended): the processes table says more than "trailer present". */
	bool merged = sprobe_rep__multi(r);

	for (size_t i = 0; i < r->procs.n && !merged; i++)
		merged = r->procs.v[i].has_exit || (r->procs.v[i].flags & SPROBE_DF_PROCESS_UNSAMPLED);
	if (r->status == SPROBE_DF_COMPLETE)
		fprintf(o, "  file:     complete (%" PRIu64 " records%s)\n", r->records,
			merged ? "" : ", trailer present");
	else
		fprintf(o, "  file:     %s: %s\n",
			r->status == SPROBE_DF_CUT_SHORT ? "CUT SHORT" : "ERROR", r->message);
	if (r->filter_tid)
		fprintf(o, "  filter:   tid %u only\n", r->filter_tid);
	if (r->filter_pid)
		fprintf(o, "  filter:   pid %u only\n", r->filter_pid);
	if (merged)
		text_processes(o, r);
	fprintf(o, "  samples:  %" PRIu64 " in %" PRIu64 " captures; %" PRIu64
		   " records lost in the stream; %" PRIu64 " thread-captures dropped\n",
		nsel, r->captures, sprobe_rep__lost_total(r), r->cap_dropped);
	text_rate(o, r, merged);
	if (r->nsel_stacks != nsel)
		fprintf(o, "  weights:  the %" PRIu64 " samples come from %" PRIu64 " captured stacks,\n"
			   "            each counted for the %s it stands for\n",
			nsel, r->nsel_stacks,
			r->has_header && r->header.mode == SPROBE_DF_MODE_CPU
				? "CPU timer periods"
				: "captures (a blocked thread carried forward unchecked)");
	sprobe_rep__write_cpu_coverage(r, o);

	text_symbols(o, r);

	struct sprobe_rep_shares sh;
	int serr = sprobe_rep__shares(r, NULL, 0, &sh);

	if (serr)
		return serr;
	if (sh.batches)
		fprintf(o, "  error:    \u00b1 is the half-width of a share's 95 %% interval, from %u "
			   "batches of time\n            (samples in a row are not independent: "
			   "docs/OUTPUTS.md)\n", sh.batches);
	else if (nsel)
		fprintf(o, "  error:    too few samples (%" PRIu64 ") for intervals (\u00b1 shows -)\n",
			sh.samples);
	for (int pass = 0; pass < 2; pass++) {
		ids = sprobe_rep__sorted_funcs(r, pass == 1, &nf);
		if (!ids) {
			sprobe_rep__shares_free(&sh);
			return -ENOMEM;
		}
		fprintf(o, "\nTop functions by %s samples\n", pass ? "total" : "self");
		/* "±" is two bytes: the header is spelt out to stay aligned */
		fputs("      self   self%      \u00b1    total  total%      \u00b1  function\n", o);
		for (size_t i = 0; i < nf && i < r->top; i++) {
			const struct func *f = &r->funcs.v[ids[i]];
			char es[16], et[16];

			if (pass == 0 && !f->self)
				break;
			half_width(es, sizeof(es), &sh, ids[i] < sh.nfuncs ? sh.f[ids[i]].self_se : NAN);
			half_width(et, sizeof(et), &sh, ids[i] < sh.nfuncs ? sh.f[ids[i]].total_se : NAN);
			fprintf(o, "  %8" PRIu64 " %6.2f%% %6s %8" PRIu64 " %6.2f%% %6s  %s\n", f->self,
				pcnt(f->self, nsel), es, f->total, pcnt(f->total, nsel), et,
				sprobe_rep__func_name(r, ids[i]));
		}
		if (!nf)
			fprintf(o, "  (no samples)\n");
		free(ids);
	}
	sprobe_rep__shares_free(&sh);

	if (sprobe_rep__write_top_lines(r, o))
		return -ENOMEM;
	bool multi = sprobe_rep__multi(r);

	fprintf(o, "\nThreads (by samples)\n");
	if (multi)
		fprintf(o, "  %8s  %-16s ", "pid", "process");
	fprintf(o, "  %8s  %-16s %8s %7s %9s %9s %9s %7s %10s %s\n", "tid", "name", "samples",
		"share", "win-p50", "win-p99", "win-max", "pause%", "stack-max", "methods");
	uint32_t *order = malloc((r->threads.n ? r->threads.n : 1) * sizeof(uint32_t));

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < r->threads.n; i++)
		order[i] = (uint32_t)i;
	if (r->threads.n > 1)
		sprobe_qsort_r(order, r->threads.n, sizeof(uint32_t), cmp_thread, r);
	for (size_t oi = 0; oi < r->threads.n; oi++) {
		const struct thread *t = &r->threads.v[order[oi]];

		if (!sprobe_rep__thread_selected(r, order[oi]))
			continue;
		if (multi) {
			char nb[32];

			fprintf(o, "  %8u  %-16s ", r->procs.v[t->proc].pid,
				sprobe_rep__proc_name(r, t->proc, nb, sizeof(nb)));
		}
		if (!t->win.n) {
			/* Seen only in drop lists or kernel windows, or no
			 * window timestamps: say so instead of printing 0s. */
			fprintf(o, "  %8u  %-16s %8" PRIu64 " %6.2f%% %9s %9s %9s %7s %10" PRIu64 " ",
				t->tid, thread_label(t), t->samples, pcnt(t->samples, nsel), "-", "-",
				"-", "-", t->stack_max);
		} else {
			fprintf(o, "  %8u  %-16s %8" PRIu64 " %6.2f%% %7.1fus %7.1fus %7.1fus %6.3f%% "
				   "%10" PRIu64 " ",
				t->tid, thread_label(t), t->samples, pcnt(t->samples, nsel),
				us(sprobe_rep__pct(&t->win, 50)), us(sprobe_rep__pct(&t->win, 99)), us(sprobe_rep__pct(&t->win, 100)),
				pcnt(sprobe_rep__sum(&t->win), wall), t->stack_max);
		}
		for (int m = 0; m < NMETHODS; m++)
			if (t->methods[m])
				fprintf(o, " %s=%" PRIu64, sprobe_rep__method_names[m], t->methods[m]);
		if (t->truncated)
			fprintf(o, " truncated=%" PRIu64, t->truncated);
		fputc('\n', o);
	}
	free(order);

	fprintf(o, "\nPause (capture window: handler entry -> exit, per sampled thread)\n");
	if (r->all_win.n) {
		uint64_t total = sprobe_rep__sum(&r->all_win);

		char b1[32], b2[32], b3[32];

		fprintf(o, "  overall: %zu windows, median %s, p99 %s, max %s\n", r->all_win.n,
			dur(b1, sprobe_rep__pct(&r->all_win, 50)), dur(b2, sprobe_rep__pct(&r->all_win, 99)),
			dur(b3, sprobe_rep__pct(&r->all_win, 100)));
		fprintf(o, "  total pause %.3f ms = %.4f%% of %.3f s wall time\n", (double)total / 1e6,
			pcnt(total, wall), (double)wall / 1e9);
		if (r->captures && !r->filter_tid)
			fprintf(o, "  capture, probe side (all threads of one capture): median %s, "
				   "p99 %s, max %s\n",
				dur(b1, sprobe_rep__pct(&r->capture_ns, 50)), dur(b2, sprobe_rep__pct(&r->capture_ns, 99)),
				dur(b3, sprobe_rep__pct(&r->capture_ns, 100)));
	} else {
		fprintf(o, "  (no windows recorded)\n");
	}
	{
		uint64_t m[NMETHODS] = { 0 };

		for (size_t i = 0; i < r->threads.n; i++)
			if (sprobe_rep__thread_selected(r, (uint32_t)i))
				for (int k = 0; k < NMETHODS; k++)
					m[k] += r->threads.v[i].methods[k];
		fprintf(o, "  capture methods:");
		for (int k = 0; k < NMETHODS; k++)
			if (m[k])
				fprintf(o, " %s %" PRIu64 " (%.1f%%)", sprobe_rep__method_names[k], m[k], pcnt(m[k], nsel));
		if (!nsel)
			fprintf(o, " (none)");
		fputc('\n', o);
		if (m[SPROBE_METHOD_ZERO_PAUSE])
			fprintf(o, "  zero-pause: %" PRIu64 " samples read while blocked, without a "
				   "signal: counted above as 0 ns windows\n",
				m[SPROBE_METHOD_ZERO_PAUSE]);
		if (m[SPROBE_METHOD_PERF_EVENT])
			fprintf(o, "  perf-event: %" PRIu64 " samples taken by the kernel (external "
				   "tier): no handler window; each paused its thread for the kernel's "
				   "sample path, which a recording does not time (measured next to the "
				   "signal path: docs/PERFORMANCE.md \"External tier\")\n",
				m[SPROBE_METHOD_PERF_EVENT]);
	}
	if (r->kwindows) {
		/* Every window seen from both sides: the kernel's (eBPF) and
		 * the handler's own, matched and compared. */
		struct sprobe_pause_merge *m = sprobe_rep__pause_check(r);
		fputc('\n', o);
		if (m)
			sprobe_pause_merge__print(m, o);
		else
			fprintf(o, "Pause check: cannot match %" PRIu64 " kernel windows (%s)\n",
				r->kwindows, strerror(errno));
		sprobe_pause_merge__free(m);
		struct sprobe_pause_zp_check zc;
		if (r->zpv.n && sprobe_rep__zp_check(r, &zc) == 0)
			sprobe_pause_zp__print(&zc, o);
	}
	text_drops(o, r);
	return 0;
}
