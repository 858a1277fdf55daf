/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier's parts: one process image's samples, threads,
 * modules and the names of its pcs as a data-file part, the same records
 * an agent writes (docs/FORMAT.md), so the merge and the reports treat
 * both alike.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

#include "userspace/external/ext_state.h"

/* Frames of a sample to leave out: with the kernel's names hidden, its
 * frames are one "[kernel]", the outermost (the system call's entry). */
static uint32_t kernel_skip(struct sprobe_ext *x, const uint64_t *pcs, uint32_t n)
{
	uint32_t k = 0;

	while (k < n && sprobe_ext__kernel_pc(pcs[k]))
		k++;
	return k > 1 && !sprobe_ext__ksym(&x->ksyms, pcs[0]) ? k - 1 : 0;
}

/* The symbol record of a kernel pc: "[kernel] NAME", or "[kernel]".
 * ret: a return address (looked up at pc - 1). */
static int kernel_symbol(struct sprobe_ext *x, struct sprobe_datafile_writer *w, uint64_t pc,
			 bool ret)
{
	const char *fn = sprobe_ext__ksym(&x->ksyms, ret ? pc - 1 : pc);
	char name[300];
	struct sprobe_df_record rec = { .type = SPROBE_DF_SYMBOL };

	snprintf(name, sizeof(name), fn ? "[kernel] %s" : "[kernel]", fn);
	rec.symbol = (struct sprobe_df_symbol){ .pc = pc, .module = SPROBE_DF_NO_MODULE,
						.name = name, .name_len = (uint32_t)strlen(name) };
	return sprobe_datafile_writer__write(w, &rec);
}

int sprobe_ext__write_part(struct sprobe_ext *x, struct ximage *im)
{
	char path[4096];
	struct sprobe_df_record rec;
	struct timespec rt, mt;
	int fd, err = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%u.%u.part", x->dir, im->pid, im->exec_index) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	/* An agent may have written this name (a child that could be
	 * entered): that part is the better one. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	struct sprobe_datafile_writer *w = sprobe_datafile_writer__new(fd, NULL);

	if (!w) {
		err = -errno;
		close(fd);
		return err;
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	int64_t off = ((int64_t)rt.tv_sec - mt.tv_sec) * 1000000000ll + (rt.tv_nsec - mt.tv_nsec);
	uint64_t start = im->start_ns ? im->start_ns : (im->n ? im->s[0].time_ns : 0);

	memset(&rec, 0, sizeof(rec));
	rec.type = SPROBE_DF_HEADER;
	rec.header = (struct sprobe_df_header){ .pid = im->pid, .mode = SPROBE_DF_MODE_CPU,
						.freq_hz = (uint32_t)(x->freq + 0.5),
						.start_realtime_ns = (uint64_t)((int64_t)start + off),
						.start_mono_ns = start, .cmdline = im->comm,
						.cmdline_len = (uint32_t)strlen(im->comm) };
	err = sprobe_datafile_writer__write(w, &rec);
	static const char note[] = "sampled through the kernel (perf event, cpu time)";
	rec.type = SPROBE_DF_PROCESS;
	rec.process = (struct sprobe_df_process){
		.pid = im->pid, .ppid = im->ppid, .exec_index = im->exec_index, .start_mono_ns = start,
		.name = im->comm, .name_len = (uint32_t)strlen(im->comm), .exe = im->exe,
		.exe_len = (uint32_t)strlen(im->exe), .note = note, .note_len = sizeof(note) - 1,
	};
	if (!err)
		err = sprobe_datafile_writer__write(w, &rec);
	for (size_t i = 0; i < x->nthr && !err; i++) {
		if (x->thr[i].pid != im->pid)
			continue;
		rec.type = SPROBE_DF_THREAD;
		rec.thread = (struct sprobe_df_thread){ .tid = x->thr[i].tid, .name = x->thr[i].comm,
							.name_len = (uint32_t)strlen(x->thr[i].comm) };
		err = sprobe_datafile_writer__write(w, &rec);
	}
	size_t nm = im->mods ? sprobe_modules__count(im->mods) : 0;

	for (size_t i = 0; i < nm && !err; i++) {
		const struct sprobe_module *m = sprobe_modules__get(im->mods, i);
		struct sprobe_df_range rg[SPROBE_MODULE_MAX_SEGS];
		uint32_t nr = 0;

		for (uint32_t k = 0; k < m->nsegs; k++)
			if (m->segs[k].prot & SPROBE_SEG_X)
				rg[nr++] = (struct sprobe_df_range){ m->segs[k].start, m->segs[k].end,
								     m->segs[k].file_offset };
		rec.type = SPROBE_DF_MODULE;
		rec.module = (struct sprobe_df_module){
			.index = (uint32_t)i, .load_bias = m->bias, .build_id = m->build_id,
			.build_id_len = m->build_id_len, .path = m->path,
			.path_len = (uint32_t)strlen(m->path), .ranges = rg, .nranges = nr,
		};
		err = sprobe_datafile_writer__write(w, &rec);
	}
	for (size_t i = 0; i < im->n && !err; i++) {
		rec.type = SPROBE_DF_SAMPLE;
		uint32_t skip = kernel_skip(x, im->pcs + im->s[i].pc0, im->s[i].nframes);

		rec.sample = (struct sprobe_df_sample){ .time_ns = im->s[i].time_ns, .tid = im->s[i].tid,
							.method = SPROBE_METHOD_PERF_EVENT,
							.pcs = im->pcs + im->s[i].pc0 + skip,
							.nframes = im->s[i].nframes - skip, .weight = 1 };
		err = sprobe_datafile_writer__write(w, &rec);
	}
	/* Symbols of every distinct pc (return addresses looked up at pc - 1,
	 * so a call at the end of a function is not its neighbour's); an open
	 * addressing set keeps each pc once. */
	size_t setcap = 1024;

	while (setcap < im->n * 4 && setcap < (1u << 24))
		setcap *= 2;
	uint64_t *set = calloc(setcap, sizeof(*set));

	for (size_t i = 0; i < im->n && !err && set; i++) {
		const uint64_t *pcs = im->pcs + im->s[i].pc0;
		uint32_t skip = kernel_skip(x, pcs, im->s[i].nframes);

		for (uint32_t k = skip; k < im->s[i].nframes && !err; k++) {
			uint64_t pc = pcs[k];
			size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (setcap - 1);
			bool seen = false;

			if (!pc)
				continue;
			for (size_t probe = 0; probe < setcap; probe++, h = (h + 1) & (setcap - 1)) {
				if (set[h] == pc) {
					seen = true;
					break;
				}
				if (!set[h]) {
					set[h] = pc;
					break;
				}
			}
			if (seen)
				continue;
			struct sprobe_symbol sym;

			if (sprobe_ext__kernel_pc(pc)) {
				err = kernel_symbol(x, w, pc, k > skip);
				continue;
			}
			if (!im->mods ||
			    sprobe_modules__symbolize(im->mods, k ? pc - 1 : pc, &sym) != 0 || !sym.name)
				continue;
			rec.type = SPROBE_DF_SYMBOL;
			rec.symbol = (struct sprobe_df_symbol){
				.pc = pc, .module = SPROBE_DF_NO_MODULE, .offset = pc - sym.sym_start,
				.name = sym.name, .name_len = (uint32_t)strlen(sym.name),
			};
			for (size_t mi = 0; mi < nm; mi++)
				if (sprobe_modules__get(im->mods, mi) == sym.module)
					rec.symbol.module = (uint32_t)mi;
			err = sprobe_datafile_writer__write(w, &rec);
		}
	}
	free(set);
	struct sprobe_df_trailer tr = { .end_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull +
							   (uint64_t)rt.tv_nsec,
					.end_mono_ns = im->n ? im->s[im->n - 1].time_ns : start };
	if (!err)
		err = sprobe_datafile_writer__finish(w, &tr);
	sprobe_datafile_writer__free(w);
	if (close(fd) != 0 && !err)
		err = -errno;
	return err ? err : 1;
}
