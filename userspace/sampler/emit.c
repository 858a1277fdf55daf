/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The emit step of the sampler's rounds: records into the stream (header,
 * thread names, modules and symbols), each pc symbolized once. The stream
 * is a bounded queue: a push never blocks the probe.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/stream.h>
#include <stackprobe/symbolize.h>

#include "userspace/common/clock.h"
#include "userspace/common/fds.h"
#include "backends/backend.h"
#include "userspace/sampler/sampler_internal.h"
#include "userspace/symbols/srcline.h"

/* ---- set of pcs already symbolized ------------------------------------ */

static int pcs_add(struct pc_set *p, uint64_t pc)
{
	if (pc == 0)
		return 0;
	if ((p->used + 1) * 2 > p->cap) {
		/* Starts at one page: an idle program has a few hundred pcs
		 * (was 4096 keys, 32 KiB written by calloc at the first pc). */
		size_t ncap = p->cap ? p->cap * 2 : 4096 / sizeof(uint64_t);
		uint64_t *nk = calloc(ncap, sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		for (size_t i = 0; i < p->cap; i++) {
			uint64_t k = p->keys[i];
			if (!k)
				continue;
			size_t j = (k * 0x9e3779b97f4a7c15ull) >> 20 & (ncap - 1);
			while (nk[j])
				j = (j + 1) & (ncap - 1);
			nk[j] = k;
		}
		free(p->keys);
		p->keys = nk;
		p->cap = ncap;
	}
	size_t j = (pc * 0x9e3779b97f4a7c15ull) >> 20 & (p->cap - 1);
	while (p->keys[j]) {
		if (p->keys[j] == pc)
			return 0;
		j = (j + 1) & (p->cap - 1);
	}
	p->keys[j] = pc;
	p->used++;
	return 1;
}

/* ---- records ---------------------------------------------------------- */

void sprobe_sampler_emit__header(struct sprobe_sampler *s)
{
	char buf[4096];
	size_t len = 0;
	const char *cmd = s->opts.command_line;

	if (cmd) {
		len = strlen(cmd);
		if (len > sizeof(buf))
			len = sizeof(buf);
		memcpy(buf, cmd, len);
	} else {
		int h = sprobe_fd__open("/proc/self/cmdline", O_RDONLY, 0, SPROBE_FD_TRANSIENT);
		int fd = sprobe_fd__get(h);
		if (fd >= 0) {
			ssize_t r = read(fd, buf, sizeof(buf));
			len = r > 0 ? (size_t)r : 0;
			sprobe_fd__put(h);
		}
		sprobe_fd__close(h);
		while (len > 0 && buf[len - 1] == '\0')
			len--;
	}
	struct sprobe_df_record rec = { .type = SPROBE_DF_HEADER };
	rec.header.pid = (uint32_t)getpid();
	rec.header.mode = s->opts.mode == SPROBE_MODE_CPU ? SPROBE_DF_MODE_CPU : SPROBE_DF_MODE_WALL;
	rec.header.freq_hz = (uint32_t)(s->opts.freq_hz + 0.5);
	rec.header.flags = s->cpu_engine & SPROBE_DF_HEADER_CPU_ENGINE_MASK;
	if (s->opts.lines_by_reader)
		rec.header.flags |= SPROBE_DF_HEADER_LINES_BY_READER;
	if (s->opts.names_by_reader)
		rec.header.flags |= SPROBE_DF_HEADER_NAMES_BY_READER;
	rec.header.start_realtime_ns = sprobe_real_ns();
	rec.header.start_mono_ns = sprobe_mono_ns();
	rec.header.cmdline = buf;
	rec.header.cmdline_len = (uint32_t)len;
	sprobe_stream__push(s->stream, &rec);

	/* Who this part's process is: the reader of a recording of a whole
	 * process tree tells the parts apart and links them by these. */
	char comm[64], exe[4096];
	ssize_t n = 0, e;
	int h = sprobe_fd__open("/proc/self/comm", O_RDONLY, 0, SPROBE_FD_TRANSIENT);
	int fd = sprobe_fd__get(h);

	if (fd >= 0) {
		n = read(fd, comm, sizeof(comm) - 1);
		sprobe_fd__put(h);
	}
	sprobe_fd__close(h);
	if (n < 0)
		n = 0;
	while (n > 0 && (comm[n - 1] == '\n' || comm[n - 1] == '\0'))
		n--;
	e = readlink("/proc/self/exe", exe, sizeof(exe));
	if (e < 0 || e >= (ssize_t)sizeof(exe))
		e = 0;
	struct sprobe_df_record pr = { .type = SPROBE_DF_PROCESS };
	pr.process.pid = (uint32_t)getpid();
	pr.process.ppid = (uint32_t)getppid();
	pr.process.exec_index = s->opts.exec_index;
	pr.process.start_mono_ns = rec.header.start_mono_ns;
	pr.process.name = comm;
	pr.process.name_len = (uint32_t)n;
	pr.process.exe = exe;
	pr.process.exe_len = (uint32_t)e;
	sprobe_stream__push(s->stream, &pr);
}

void sprobe_sampler_emit__thread_name(struct sprobe_sampler *s, pid_t tid)
{
	char path[64], name[64];
	ssize_t n = 0;
	/* Under the capturer's task directory when it has one (a walk of two
	 * components, not five: a program starting thousands of threads at
	 * once makes this per thread). */
	int th = sprobe_backend__task_dir(s->capturer);

	snprintf(path, sizeof(path), "%d/comm", tid);
	int h = th >= 0 ? sprobe_fd__openat(th, path, O_RDONLY, SPROBE_FD_TRANSIENT) : -EBADF;

	if (h == -EBADF) {
		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
		h = sprobe_fd__open(path, O_RDONLY, 0, SPROBE_FD_TRANSIENT);
	}
	int fd = sprobe_fd__get(h);
	if (fd >= 0) {
		n = read(fd, name, sizeof(name) - 1);
		sprobe_fd__put(h);
	}
	sprobe_fd__close(h);
	if (n < 0)
		n = 0;
	while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0'))
		n--;
	struct sprobe_df_record rec = { .type = SPROBE_DF_THREAD };
	rec.thread.tid = (uint32_t)tid;
	rec.thread.name = name;
	rec.thread.name_len = (uint32_t)n;
	sprobe_stream__push(s->stream, &rec);
}

/* Index under which module m was (or now is) written to the file. */
static int module_index(struct sprobe_sampler *s, const struct sprobe_module *m)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (s->mods[i].start == m->start && s->mods[i].bias == m->bias &&
		    strcmp(s->mods[i].path, m->path) == 0)
			return (int)i;
	if (s->nmods == s->mods_cap) {
		size_t ncap = s->mods_cap ? s->mods_cap * 2 : 64;
		struct emitted_module *nm = realloc(s->mods, ncap * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		s->mods = nm;
		s->mods_cap = ncap;
	}
	char *path = strdup(m->path);
	if (!path)
		return -ENOMEM;
	struct emitted_module *e = &s->mods[s->nmods];
	e->start = m->start;
	e->bias = m->bias;
	e->path = path;

	struct sprobe_df_range ranges[SPROBE_MODULE_MAX_SEGS];
	uint32_t nr = 0;
	for (uint32_t i = 0; i < m->nsegs && nr < SPROBE_MODULE_MAX_SEGS; i++) {
		ranges[nr].start = m->segs[i].start;
		ranges[nr].end = m->segs[i].end;
		ranges[nr].file_offset = m->segs[i].file_offset;
		nr++;
	}
	struct sprobe_df_record rec = { .type = SPROBE_DF_MODULE };
	rec.module.index = (uint32_t)s->nmods;
	rec.module.load_bias = m->bias;
	rec.module.build_id = m->build_id;
	rec.module.build_id_len = m->build_id_len;
	rec.module.path = m->path;
	rec.module.path_len = (uint32_t)strlen(m->path);
	rec.module.ranges = ranges;
	rec.module.nranges = nr;
	sprobe_stream__push(s->stream, &rec);
	return (int)s->nmods++;
}

/* The SRCLINE record of f's pc (inline chain and lines from DWARF), when
 * its module has line information. */
static void emit_srcline(struct sprobe_stream *st, struct sprobe_modules *mods,
			 const struct sprobe_frame *f)
{
	struct sprobe_src_frame fr[SPROBE_DF_MAX_INLINE];
	uint32_t lines[SPROBE_DF_MAX_INLINE];
	char text[4096];
	struct sprobe_df_record rec;
	int n = sprobe_modules__inline_frames(mods, sprobe_frame_lookup_pc(f), fr,
					      SPROBE_DF_MAX_INLINE);

	if (!sprobe_srcline__pack(fr, n, f->pc, text, sizeof(text), lines, &rec))
		return;
	sprobe_stream__push(st, &rec);
}

/* Is the file at path one that stays as it is until the recording is
 * read (the system's, installed by the package manager)? Only its pcs are
 * left for the reader to name (names_by_reader): a program's own build
 * products, a configure test, a library `make install` replaces, a file
 * in a mount namespace record does not see, are gone or different by
 * then, so those are named here. */
static bool stable_file(const char *path)
{
	static const char *const dirs[] = { "/usr/", "/lib/", "/lib32/", "/lib64/", "/bin/",
					    "/sbin/", "/nix/store/", "/gnu/store/" };

	if (strstr(path, " (deleted)"))
		return false;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (strncmp(path, dirs[i], strlen(dirs[i])) == 0)
			return true;
	return false;
}

/* Is m the object this code is in (libstackprobe.so, preloaded by the
 * `record` that reads the recording, from its own build or install)? Its
 * pcs are on every thread's stack (the thread-start and wait wrappers);
 * that reader has the same file, so naming them here would only map the
 * library's symbol table into the program (~170 kB of RSS, docs/
 * PERFORMANCE.md "Memory, the agent alone and under `record`"). A rebuilt library shows as
 * " (deleted)" and is named here. */
static bool own_file(struct sprobe_modules *mods, const struct sprobe_module *m)
{
	return !strstr(m->path, " (deleted)") &&
	       sprobe_modules__find(mods, (uint64_t)(uintptr_t)&own_file) == m;
}

/* Push a SYMBOL record for each pc of the sample seen for the first time. */
void sprobe_sampler_emit__symbols(struct sprobe_sampler *s, const struct sprobe_thread_sample *ts)
{
	struct sprobe_modules *mods = sprobe_unwinder__modules(s->unwinder);

	for (uint32_t i = 0; i < ts->nframes; i++) {
		const struct sprobe_frame *f = &ts->frames[i];
		if (pcs_add(&s->pcs, f->pc) <= 0)
			continue;
		struct sprobe_symbol sym;
		struct sprobe_df_record rec = { .type = SPROBE_DF_SYMBOL };
		rec.symbol.pc = f->pc;
		rec.symbol.module = SPROBE_DF_NO_MODULE;
		if (s->opts.names_by_reader) {
			/* Named by the reader from the module's file (the
			 * option): the module and the offset from its bias. */
			const struct sprobe_module *m =
				sprobe_modules__find(mods, sprobe_frame_lookup_pc(f));
			int mi = m && m->path[0] == '/' && m->build_id_len &&
					 (stable_file(m->path) || own_file(mods, m))
					 ? module_index(s, m)
					 : -1;

			if (mi >= 0) {
				rec.symbol.module = (uint32_t)mi;
				rec.symbol.offset = f->pc - m->bias;
				sprobe_stream__push(s->stream, &rec);
				continue;
			}
		}
		if (sprobe_modules__symbolize(mods, sprobe_frame_lookup_pc(f), &sym) == 0) {
			/* a JIT frame (named by the perf map) has no module */
			int mi = sym.module ? module_index(s, sym.module) : -1;
			if (mi >= 0)
				rec.symbol.module = (uint32_t)mi;
			if (sym.name) {
				rec.symbol.name = sym.name;
				rec.symbol.name_len = (uint32_t)strlen(sym.name);
				rec.symbol.offset = f->pc - sym.sym_start;
			} else {
				rec.symbol.offset = f->pc - sym.module->bias;
			}
		}
		sprobe_stream__push(s->stream, &rec);
		if (!rec.symbol.name || !sym.module || s->opts.no_lines || s->opts.lines_by_reader ||
		    s->opts.names_by_reader)
			continue;
		if (s->opts.lines_after_ns && sprobe_mono_ns() - s->t_start_ns < s->opts.lines_after_ns) {
			/* Deferred (see the option): kept for later. */
			if (s->nlines_pending == s->caplines_pending) {
				size_t cap = s->caplines_pending ? s->caplines_pending * 2 : 256;
				struct sprobe_frame *v = realloc(s->lines_pending, cap * sizeof(*v));

				if (!v)
					continue;
				s->lines_pending = v;
				s->caplines_pending = cap;
			}
			s->lines_pending[s->nlines_pending++] = *f;
			continue;
		}
		emit_srcline(s->stream, mods, f);
	}
}

void sprobe_sampler_emit__pending_lines(struct sprobe_sampler *s)
{
	if (!s->nlines_pending || sprobe_mono_ns() - s->t_start_ns < s->opts.lines_after_ns)
		return;
	struct sprobe_modules *mods = sprobe_unwinder__modules(s->unwinder);

	for (size_t i = 0; i < s->nlines_pending; i++)
		emit_srcline(s->stream, mods, &s->lines_pending[i]);
	free(s->lines_pending);
	s->lines_pending = NULL;
	s->nlines_pending = s->caplines_pending = 0;
}
