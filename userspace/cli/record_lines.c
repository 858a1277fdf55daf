/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Names and source lines added by `stackprobe record` after the merge
 * (contract in cli.h, cli_record_lines()).
 *
 * Why here and not in the agent: the source view of a pc (its inline chain
 * and lines, record type 12) comes from DWARF, and libdw decompresses and
 * keeps the debug sections of every module it reads: for Debian's libc
 * debug file ~11 MiB of the profiled program's memory and ~45 ms of its
 * CPU (docs/PERFORMANCE.md "What the agent costs"). Under `record` the
 * agent writes no srcline records (STACKPROBE_LINES=record) and this pass
 * writes them from the files the module records name, checked by build-id,
 * and, with STACKPROBE_NAMES=record, names the pcs of those files too (the
 * agent then reads no symbol table either: ~0.9 MiB of the program's
 * memory for libc's and its own),
 * once per distinct module for the whole process tree (a build's hundred
 * processes share libc's DWARF here, where each of their agents would have
 * read it again).
 *
 * The file is rewritten record by record into a temporary file beside it,
 * each srcline record right after the symbol record of its pc (as the
 * agent writes them), each part's trailer counting the records added to
 * that part; then renamed over it. Nothing changes in the output unless
 * the whole pass succeeded.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/symbolize.h>

#include "userspace/cli/cli.h"
#include "userspace/symbols/dwarf_cache.h"
#include "userspace/symbols/perfmap.h"
#include "userspace/symbols/srcline.h"

/* One distinct module file of the tree (path + build-id), with an offline
 * inventory holding it at the load bias of the first part that named it. */
struct mod_file {
	char *path;
	uint8_t build_id[SPROBE_BUILD_ID_MAX];
	uint32_t build_id_len;
	uint64_t bias;
	struct sprobe_modules *inv; /* NULL: could not be added */
};

/* A part's module index -> its file and its own load bias. */
struct part_mod {
	int file;	/* index in files, -1: none */
	uint64_t bias;
};

struct lines_state {
	struct mod_file *files;
	size_t nfiles, capfiles;
	struct part_mod *mods;
	size_t nmods, capmods;
	/* pc -> role at first sight in the part's samples (bit 0: it was
	 * pcs[0], the interrupted pc; else a return address). Open
	 * addressing, key 0 empty. */
	uint64_t *pcs;
	uint8_t *leaf;
	size_t npcs, cappcs;
	/* The part's process and, once a pc in no module was left unnamed,
	 * its JIT's perf map (perfmap.h). */
	uint32_t pid;
	int64_t start_s;
	struct sprobe_perfmap_file *jit;
	bool lines;		/* the part's header asks for srcline records */
	const struct cli_lines_opts *o;
	/* Each part's end (CLOCK_REALTIME s: its trailer, else its last
	 * sample), in file order, for the JIT maps' freshness; nparts seen. */
	int64_t *ends;
	size_t nends, part;
};

static int pc_slot(const struct lines_state *s, uint64_t pc)
{
	size_t j = (pc * 0x9e3779b97f4a7c15ull) >> 20 & (s->cappcs - 1);

	while (s->pcs[j] && s->pcs[j] != pc)
		j = (j + 1) & (s->cappcs - 1);
	return (int)j;
}

static int pc_note(struct lines_state *s, uint64_t pc, bool leaf)
{
	if (!pc)
		return 0;
	if ((s->npcs + 1) * 2 > s->cappcs) {
		size_t ncap = s->cappcs ? s->cappcs * 2 : 4096;
		struct lines_state n = { .cappcs = ncap };

		n.pcs = calloc(ncap, sizeof(*n.pcs));
		n.leaf = calloc(ncap, 1);
		if (!n.pcs || !n.leaf) {
			free(n.pcs);
			free(n.leaf);
			return -ENOMEM;
		}
		for (size_t i = 0; i < s->cappcs; i++) {
			if (!s->pcs[i])
				continue;
			int j = pc_slot(&n, s->pcs[i]);

			n.pcs[j] = s->pcs[i];
			n.leaf[j] = s->leaf[i];
		}
		free(s->pcs);
		free(s->leaf);
		s->pcs = n.pcs;
		s->leaf = n.leaf;
		s->cappcs = ncap;
	}
	int j = pc_slot(s, pc);

	if (!s->pcs[j]) {
		s->pcs[j] = pc;
		s->leaf[j] = leaf;
		s->npcs++;
	}
	return 0;
}

/* The pc to look up: the interrupted pc itself, a return address minus 1
 * (the call, as the agent's sprobe_frame_lookup_pc()). */
static uint64_t lookup_pc(const struct lines_state *s, uint64_t pc)
{
	if (s->cappcs) {
		int j = pc_slot(s, pc);

		if (s->pcs[j] == pc && s->leaf[j])
			return pc;
	}
	return pc ? pc - 1 : 0;
}

static void part_reset(struct lines_state *s, const struct sprobe_df_header *h)
{
	sprobe_perfmap_file__free(s->jit);
	s->jit = NULL;
	s->pid = h->pid;
	s->lines = h->flags & SPROBE_DF_HEADER_LINES_BY_READER;
	/* a second of slack: the file system's time and CLOCK_REALTIME */
	s->start_s = (int64_t)(h->start_realtime_ns / 1000000000u) - 1;
	s->nmods = 0;
	if (s->cappcs) {
		memset(s->pcs, 0, s->cappcs * sizeof(*s->pcs));
		s->npcs = 0;
	}
}

/* The file of module record m (added to files if new); -1 if it has no
 * usable file (no path, a pseudo path such as [vdso], no build-id). */
static int file_of(struct lines_state *s, const struct sprobe_df_module *m)
{
	if (!m->path_len || m->path[0] != '/' || !m->build_id_len ||
	    m->build_id_len > SPROBE_BUILD_ID_MAX || !m->nranges)
		return -1;
	for (size_t i = 0; i < s->nfiles; i++) {
		struct mod_file *f = &s->files[i];

		if (f->build_id_len == m->build_id_len &&
		    memcmp(f->build_id, m->build_id, m->build_id_len) == 0 &&
		    strlen(f->path) == m->path_len && memcmp(f->path, m->path, m->path_len) == 0)
			return (int)i;
	}
	if (s->nfiles == s->capfiles) {
		size_t ncap = s->capfiles ? s->capfiles * 2 : 32;
		struct mod_file *v = realloc(s->files, ncap * sizeof(*v));

		if (!v)
			return -1;
		s->files = v;
		s->capfiles = ncap;
	}
	struct mod_file *f = &s->files[s->nfiles];
	struct sprobe_module d = { 0 };

	memset(f, 0, sizeof(*f));
	f->path = strndup(m->path, m->path_len);
	if (!f->path)
		return -1;
	memcpy(f->build_id, m->build_id, m->build_id_len);
	f->build_id_len = m->build_id_len;
	f->bias = m->load_bias;
	/* Another mount namespace's file (record -p of a container's
	 * process): through its root; the build-id says it is that file. */
	char rooted[PATH_MAX];

	/* Not there (the process has exited, its mounts are gone): the path
	 * as it is here; the build-id decides whether it is that file. */
	if (s->o->root && (size_t)snprintf(rooted, sizeof(rooted), "%s%s", s->o->root, f->path) < sizeof(rooted) &&
	    access(rooted, R_OK) == 0)
		d.path = rooted;
	else
		d.path = f->path;
	d.bias = m->load_bias;
	for (uint32_t k = 0; k < m->nranges && k < SPROBE_MODULE_MAX_SEGS; k++) {
		d.segs[k].start = m->ranges[k].start;
		d.segs[k].end = m->ranges[k].end;
		d.segs[k].prot = SPROBE_SEG_R | SPROBE_SEG_X;
		d.segs[k].file_offset = m->ranges[k].file_offset;
		d.nsegs = k + 1;
	}
	d.build_id_len = m->build_id_len;
	memcpy(d.build_id, m->build_id, m->build_id_len);
	/* One module per inventory: modules of different processes may
	 * overlap in address, and each keeps its own DWARF once. */
	struct sprobe_modules_opts o = { .sz = sizeof(o), .empty = true, .no_perf_map = true };

	f->inv = sprobe_modules__new(&o);
	if (f->inv && sprobe_modules__add(f->inv, &d) != 0) {
		sprobe_modules__free(f->inv);
		f->inv = NULL;
	}
	return (int)s->nfiles++;
}

static int module_note(struct lines_state *s, const struct sprobe_df_module *m)
{
	if (m->index >= 1u << 20)
		return 0; /* not one the agent wrote: leave it unnamed */
	if (m->index >= s->capmods) {
		size_t ncap = s->capmods ? s->capmods : 64;

		while (ncap <= m->index)
			ncap *= 2;
		struct part_mod *v = realloc(s->mods, ncap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->mods = v;
		s->capmods = ncap;
	}
	while (s->nmods <= m->index)
		s->mods[s->nmods++] = (struct part_mod){ .file = -1 };
	s->mods[m->index].file = file_of(s, m);
	s->mods[m->index].bias = m->load_bias;
	return 0;
}

/* A symbol record the agent left unnamed (STACKPROBE_NAMES=record: module
 * and offset from its bias): named from the module's file, as the agent
 * would have (same lookup, same offset = pc - symbol start). The name is
 * owned by the inventory. Left as it is when the file has no symbol. */
static void name_symbol(struct lines_state *s, struct sprobe_df_symbol *sym)
{
	struct sprobe_symbol out;

	if (sym->name_len || sym->module >= s->nmods || s->mods[sym->module].file < 0)
		return;
	const struct mod_file *f = &s->files[s->mods[sym->module].file];
	uint64_t shift = f->bias - s->mods[sym->module].bias;

	if (!f->inv || sprobe_modules__symbolize(f->inv, lookup_pc(s, sym->pc) + shift, &out) != 0 ||
	    !out.name)
		return;
	sym->name = out.name;
	sym->name_len = (uint32_t)strlen(out.name);
	sym->offset = sym->pc + shift - out.sym_start;
}

/* A pc in no module that the agent left unnamed (JIT code whose perf map
 * line came after the agent saw the pc, or a map written only at exit:
 * the JVM's -XX:+DumpPerfMapAtExit): named from the map the process left
 * in /tmp, as perf report does. Only a map last modified while the part
 * ran or just after (an older one is an earlier process's of the same
 * pid; a newer one a later process's, or an image this one exec'd); for
 * a process that still runs (record -p), its map, modified since. */
static void name_jit(struct lines_state *s, struct sprobe_df_symbol *sym)
{
	struct sprobe_symbol out;

	if (!s->o->jit || sym->name_len || sym->module != SPROBE_DF_NO_MODULE || !s->pid || !sym->pc)
		return;
	if (!s->jit) {
		char path[PATH_MAX];
		int64_t end = s->part < s->nends ? s->ends[s->part] : 0;

		if (!s->o->live && !end)
			return; /* a part with no time to bound the map by */
		snprintf(path, sizeof(path), "%s/tmp/perf-%u.map", s->o->root ? s->o->root : "", s->pid);
		/* a few seconds after the end: a JVM writes its map as it exits */
		s->jit = sprobe_perfmap_file__new(path, s->start_s, s->o->live ? 0 : end + 5,
						  s->o->owner_set ? s->o->owner : geteuid());
		if (!s->jit)
			return;
	}
	if (sprobe_perfmap_file__symbolize(s->jit, lookup_pc(s, sym->pc), &out) != 0 || !out.name)
		return;
	sym->name = out.name;
	sym->name_len = (uint32_t)strlen(out.name);
	sym->offset = sym->pc - out.sym_start;
}

/* Write the srcline record of symbol record sym, when its module's DWARF
 * has lines for it. Returns 1 written, 0 none, -errno. Same text layout
 * and truncation as the agent's (userspace/sampler/emit.c). */
static int add_srcline(struct lines_state *s, struct sprobe_datafile_writer *w,
		       const struct sprobe_df_symbol *sym)
{
	struct sprobe_src_frame fr[SPROBE_DF_MAX_INLINE];
	uint32_t lines[SPROBE_DF_MAX_INLINE];
	char text[4096];
	struct sprobe_df_record rec;

	if (!s->lines || !sym->name_len || sym->module >= s->nmods || s->mods[sym->module].file < 0)
		return 0;
	const struct mod_file *f = &s->files[s->mods[sym->module].file];

	if (!f->inv)
		return 0;
	uint64_t at = lookup_pc(s, sym->pc) - s->mods[sym->module].bias + f->bias;
	int n = sprobe_modules__inline_frames(f->inv, at, fr, SPROBE_DF_MAX_INLINE);

	if (!sprobe_srcline__pack(fr, n, sym->pc, text, sizeof(text), lines, &rec))
		return 0;
	int err = sprobe_datafile_writer__write(w, &rec);

	return err ? err : 1;
}

static void state_free(struct lines_state *s)
{
	for (size_t i = 0; i < s->nfiles; i++) {
		free(s->files[i].path);
		sprobe_modules__free(s->files[i].inv);
	}
	free(s->files);
	free(s->ends);
	sprobe_perfmap_file__free(s->jit);
	free(s->mods);
	free(s->pcs);
	free(s->leaf);
}

/* Any part's header (a merge may hold parts of agents with other
 * settings): the file is read to its end when none says so. */
bool cli_lines_left_to_reader(const char *path)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(path);
	struct sprobe_df_record rec;
	bool left = false;

	while (!left && rd && sprobe_datafile_reader__next(rd, &rec) == 1)
		if (rec.type == SPROBE_DF_HEADER)
			left = rec.header.flags &
			       (SPROBE_DF_HEADER_LINES_BY_READER | SPROBE_DF_HEADER_NAMES_BY_READER);
	sprobe_datafile_reader__free(rd);
	return left;
}

/* The end of each part, in file order (see lines_state.ends). */
static int part_ends(const char *path, struct lines_state *s)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(path);
	struct sprobe_df_record rec;
	uint64_t start_real = 0, start_mono = 0;
	size_t cap = 0;

	if (!rd)
		return -(errno ? errno : EIO);
	while (sprobe_datafile_reader__next(rd, &rec) == 1) {
		int64_t *e = s->nends ? &s->ends[s->nends - 1] : NULL;

		if (rec.type == SPROBE_DF_HEADER) {
			if (s->nends == cap) {
				size_t nc = cap ? cap * 2 : 16;
				int64_t *v = realloc(s->ends, nc * sizeof(*v));

				if (!v) {
					sprobe_datafile_reader__free(rd);
					return -ENOMEM;
				}
				s->ends = v;
				cap = nc;
			}
			s->ends[s->nends++] = 0;
			start_real = rec.header.start_realtime_ns;
			start_mono = rec.header.start_mono_ns;
		} else if (e && rec.type == SPROBE_DF_TRAILER) {
			*e = (int64_t)(rec.trailer.end_realtime_ns / 1000000000u) + 1;
		} else if (e && rec.type == SPROBE_DF_SAMPLE && rec.sample.time_ns >= start_mono) {
			int64_t t = (int64_t)((start_real + (rec.sample.time_ns - start_mono)) / 1000000000u) + 1;

			if (t > *e)
				*e = t;
		}
	}
	sprobe_datafile_reader__free(rd);
	return 0;
}

long cli_lines_pass(const char *path, int fd, const struct cli_lines_opts *o, char *msg, size_t msg_len)
{
	static const struct cli_lines_opts none;
	struct lines_state s = { .o = o ? o : &none };
	struct sprobe_datafile_reader *rd = NULL;
	struct sprobe_datafile_writer *w = NULL;
	struct sprobe_df_record rec;
	long added = 0, in_part = 0;
	int rc, err = 0;

	if (msg_len)
		msg[0] = '\0';
	if (!path || fd < 0)
		return -EINVAL;
	/* Images of compressed DWARF are kept between runs (dwarf_cache.h):
	 * the pass's largest cost, the same on every run of a program. */
	(void)sprobe_dwarf_cache__set_default();
	if (s.o->jit && (err = part_ends(path, &s)) != 0)
		goto out;
	rd = sprobe_datafile_reader__open(path);
	struct sprobe_datafile_writer_opts wo = { .sz = sizeof(wo), .buffer_bytes = 1u << 20 };

	w = rd ? sprobe_datafile_writer__new(fd, &wo) : NULL;
	if (!rd || !w) {
		err = -(errno ? errno : EIO);
		goto out;
	}
	bool first = true;

	while (!err && (rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		switch (rec.type) {
		case SPROBE_DF_HEADER:
			if (!first)
				s.part++;
			first = false;
			part_reset(&s, &rec.header);
			/* this pass is the reader the writer left them to */
			if (!s.o->keep_flags)
				rec.header.flags &= ~(SPROBE_DF_HEADER_LINES_BY_READER |
						      SPROBE_DF_HEADER_NAMES_BY_READER);
			in_part = 0;
			break;
		case SPROBE_DF_TRAILER:
			rec.trailer.records += (uint64_t)in_part;
			break;
		case SPROBE_DF_MODULE:
			err = module_note(&s, &rec.module);
			break;
		case SPROBE_DF_SAMPLE:
			for (uint32_t i = 0; i < rec.sample.nframes && !err; i++)
				err = pc_note(&s, rec.sample.pcs[i], i == 0);
			break;
		default:
			break;
		}
		if (!err && rec.type == SPROBE_DF_SYMBOL) {
			name_symbol(&s, &rec.symbol);
			name_jit(&s, &rec.symbol);
		}
		if (!err)
			err = sprobe_datafile_writer__write(w, &rec);
		if (!err && rec.type == SPROBE_DF_SYMBOL) {
			int a = add_srcline(&s, w, &rec.symbol);

			if (a < 0)
				err = a;
			added += a > 0;
			in_part += a > 0;
		}
	}
	if (!err && sprobe_datafile_reader__status(rd) == SPROBE_DF_CORRUPT) {
		snprintf(msg, msg_len, "%s", sprobe_datafile_reader__error(rd));
		err = -EILSEQ;
	}
	if (!err)
		err = sprobe_datafile_writer__flush(w);
out:
	sprobe_datafile_writer__free(w);
	sprobe_datafile_reader__free(rd);
	state_free(&s);
	return err ? err : added;
}

long cli_record_lines(const char *path, const struct cli_lines_opts *o, char *msg, size_t msg_len)
{
	struct stat st;
	char *tmp;
	long ret;
	int fd, err = 0;

	if (msg_len)
		msg[0] = '\0';
	if (!path)
		return -EINVAL;
	if (stat(path, &st) != 0)
		return -errno;
	size_t tl = strlen(path) + 16;

	tmp = malloc(tl);
	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, tl, "%s.lines.XXXXXX", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(tmp);
		return err;
	}
	(void)fchmod(fd, st.st_mode & 07777);
	ret = cli_lines_pass(path, fd, o, msg, msg_len);
	if (close(fd) != 0 && ret >= 0)
		ret = -errno;
	if (ret >= 0 && rename(tmp, path) != 0)
		ret = -errno;
	if (ret < 0)
		unlink(tmp);
	free(tmp);
	return ret;
}
