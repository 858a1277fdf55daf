/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A process tree's parts -> one version-3 data file (contract in merge.h,
 * layout in docs/FORMAT.md "Several processes").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

#include "userspace/datafile/datafile_internal.h"
#include "userspace/datafile/merge.h"

struct part {
	uint32_t pid, exec;
	char *path;			/* NULL: unsampled (no part) */
	uint64_t start;			/* CLOCK_MONOTONIC at its start */
	uint64_t good;			/* bytes up to the last intact record */
	int status;			/* enum sprobe_df_status of the part */
	char msg[256];
	char *exe, *note;		/* unsampled: what and why */
	/* How it ended: source rank (0 none, 1 agent, 2 parent, 3 trusted). */
	int end_rank;
	struct sprobe_merge_exit end;
};

struct parts {
	struct part *v;
	size_t n, cap;
};

static struct part *part_add(struct parts *ps)
{
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 64;
		struct part *v = realloc(ps->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		ps->v = v;
		ps->cap = cap;
	}
	memset(&ps->v[ps->n], 0, sizeof(ps->v[0]));
	return &ps->v[ps->n++];
}

static void parts_free(struct parts *ps)
{
	for (size_t i = 0; i < ps->n; i++) {
		free(ps->v[i].path);
		free(ps->v[i].exe);
		free(ps->v[i].note);
	}
	free(ps->v);
}

/* Read a part's header time, status and last intact byte. */
static void part_scan(struct part *p)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(p->path);
	struct sprobe_df_record rec;

	if (!rd) {
		p->status = SPROBE_DF_CORRUPT;
		snprintf(p->msg, sizeof(p->msg), "cannot read its part: %s", strerror(errno));
		return;
	}
	while (sprobe_datafile_reader__next(rd, &rec) == 1)
		if (rec.type == SPROBE_DF_HEADER && !p->start)
			p->start = rec.header.start_mono_ns;
	p->status = sprobe_datafile_reader__status(rd);
	p->good = sprobe_datafile_reader__good_bytes(rd);
	snprintf(p->msg, sizeof(p->msg), "%s", sprobe_datafile_reader__error(rd));
	sprobe_datafile_reader__free(rd);
}

static int list_parts(const char *dir, struct parts *ps)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		unsigned pid, exec;
		int end = 0;

		if (sscanf(de->d_name, "%u.%u.part%n", &pid, &exec, &end) != 2 ||
		    de->d_name[end] != '\0' || end == 0)
			continue;
		struct part *p = part_add(ps);
		size_t len = strlen(dir) + strlen(de->d_name) + 2;

		if (!p || !(p->path = malloc(len))) {
			closedir(d);
			return -ENOMEM;
		}
		snprintf(p->path, len, "%s/%s", dir, de->d_name);
		p->pid = pid;
		p->exec = exec;
		part_scan(p);
		if (!p->start) {
			/* No header: place it by when its file was made. */
			struct stat st;
			struct timespec rt, mt;

			if (stat(p->path, &st) == 0 && clock_gettime(CLOCK_REALTIME, &rt) == 0 &&
			    clock_gettime(CLOCK_MONOTONIC, &mt) == 0) {
				int64_t off = ((int64_t)rt.tv_sec - mt.tv_sec) * 1000000000ll +
					      (rt.tv_nsec - mt.tv_nsec);
				int64_t t = (int64_t)st.st_mtim.tv_sec * 1000000000ll +
					    st.st_mtim.tv_nsec - off;

				p->start = t > 0 ? (uint64_t)t : 1;
			}
		}
	}
	closedir(d);
	return 0;
}

/* The part an end applies to: (pid, exec), or the pid's last image that
 * started before t (LATEST). */
static struct part *find(struct parts *ps, uint32_t pid, uint32_t exec, uint64_t t)
{
	struct part *best = NULL;

	for (size_t i = 0; i < ps->n; i++) {
		struct part *p = &ps->v[i];

		if (p->pid != pid)
			continue;
		if (exec != SPROBE_MERGE_LATEST) {
			if (p->exec == exec)
				return p;
			continue;
		}
		if (t && p->start && p->start > t)
			continue;
		if (!best || p->exec > best->exec)
			best = p;
	}
	return best;
}

static void set_end(struct parts *ps, const struct sprobe_merge_exit *x, int rank)
{
	struct part *p = find(ps, x->pid, x->exec_index, x->time_ns);

	if (p && rank >= p->end_rank) {
		p->end = *x;
		p->end.exec_index = p->exec;
		p->end_rank = rank;
	}
}

/* DIR/events: one line per note (userspace/agent/process_wrappers.c). */
static int read_events(const char *dir, struct parts *ps)
{
	char path[4096], line[4608];
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/events", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		struct sprobe_merge_exit x = { 0 };
		unsigned long long t;
		int n = 0;

		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "exit %u %u %u %d %llu%n", &x.pid, &x.exec_index, &x.how, &x.code, &t,
			   &n) == 5 && line[n] == '\0') {
			x.time_ns = t;
			if (x.how > SPROBE_DF_EXIT_RUNNING)
				continue;
			/* A process's own note knows its image; a parent's
			 * (LATEST) knows how it really ended (a signal). */
			set_end(ps, &x, x.exec_index == SPROBE_MERGE_LATEST ? 2 : 1);
			continue;
		}
		unsigned pid, exec;

		if (sscanf(line, "unsampled %u %u %llu %n", &pid, &exec, &t, &n) == 3 && n > 0) {
			char *tab = strchr(line + n, '\t');
			struct part *p;

			if (!tab || find(ps, pid, exec, 0))
				continue;
			*tab = '\0';
			p = part_add(ps);
			if (!p) {
				fclose(f);
				return -ENOMEM;
			}
			p->pid = pid;
			p->exec = exec;
			p->start = t;
			p->exe = strdup(line + n);
			p->note = strdup(tab + 1);
			if (!p->exe || !p->note) {
				fclose(f);
				return -ENOMEM;
			}
		}
	}
	fclose(f);
	return 0;
}

static int cmp_part(const void *a, const void *b)
{
	const struct part *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->exec < y->exec ? -1 : x->exec > y->exec;
}

/* ---- output ----------------------------------------------------------- */

struct out {
	FILE *f;
	int err;
};

static void out_bytes(struct out *o, const void *p, size_t n)
{
	if (!o->err && n && fwrite(p, 1, n, o->f) != n)
		o->err = errno ? -errno : -EIO;
}

static void out_record(struct out *o, const struct sprobe_df_record *rec)
{
	uint8_t buf[8192], frame[SPROBE_DF_FRAME_SIZE];
	long n = sprobe_df__encode(rec, buf, sizeof(buf));

	if (n < 0 || (size_t)n > sizeof(buf)) {
		if (!o->err)
			o->err = n < 0 ? (int)n : -E2BIG;
		return;
	}
	sprobe_df__frame(frame, rec->type, buf, (uint32_t)n);
	out_bytes(o, frame, sizeof(frame));
	out_bytes(o, buf, (size_t)n);
}

/* The part's intact records, as written. */
static void out_part(struct out *o, const struct part *p)
{
	char buf[65536];
	FILE *f;
	uint64_t left;

	if (p->good <= SPROBE_DF_PREAMBLE_SIZE)
		return;
	f = fopen(p->path, "rbe");
	if (!f || fseek(f, SPROBE_DF_PREAMBLE_SIZE, SEEK_SET) != 0) {
		if (f)
			fclose(f);
		if (!o->err)
			o->err = -EIO;
		return;
	}
	left = p->good - SPROBE_DF_PREAMBLE_SIZE;
	while (left && !o->err) {
		size_t want = left < sizeof(buf) ? (size_t)left : sizeof(buf);
		size_t got = fread(buf, 1, want, f);

		if (got == 0) {
			o->err = -EIO;
			break;
		}
		out_bytes(o, buf, got);
		left -= got;
	}
	fclose(f);
}

static bool pid_alive(uint32_t pid)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%u", pid);
	return stat(path, &st) == 0;
}

int sprobe_merge__dir(const struct sprobe_merge_opts *o, struct sprobe_merge_result *res)
{
	struct parts ps = { 0 };
	struct out out = { 0 };
	int err;

	if (!o || !o->dir || !o->output || !res)
		return -EINVAL;
	memset(res, 0, sizeof(*res));
	err = list_parts(o->dir, &ps);
	if (!err)
		err = read_events(o->dir, &ps);
	if (err)
		goto done;
	for (size_t i = 0; i < o->nexits; i++)
		set_end(&ps, &o->exits[i], 3);
	qsort(ps.v, ps.n, sizeof(ps.v[0]), cmp_part);

	/* 0600, as perf.data: the recording is its user's to read. */
	int ofd = open(o->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	out.f = ofd >= 0 ? fdopen(ofd, "wb") : NULL;
	if (!out.f) {
		err = -errno;
		if (ofd >= 0)
			close(ofd);
		goto done;
	}
	uint8_t pre[SPROBE_DF_PREAMBLE_SIZE] = "SPRBDATA";

	put32(pre + 8, SPROBE_DF_VERSION);
	put32(pre + 12, SPROBE_DF_PREAMBLE_SIZE);
	out_bytes(&out, pre, sizeof(pre));

	bool *placed = o->nkw ? calloc(o->nkw, sizeof(bool)) : NULL;

	for (size_t i = 0; i < ps.n && !out.err; i++) {
		struct part *p = &ps.v[i];
		struct sprobe_df_record rec = { .type = SPROBE_DF_EXIT };
		bool latest = true;

		for (size_t j = 0; j < ps.n; j++)
			if (ps.v[j].pid == p->pid && ps.v[j].exec > p->exec)
				latest = false;
		bool seen_pid = false;

		for (size_t j = 0; j < i; j++)
			if (ps.v[j].pid == p->pid)
				seen_pid = true;
		if (!seen_pid)
			res->processes++;
		if (!p->path) {
			struct sprobe_df_record pr = { .type = SPROBE_DF_PROCESS };
			const char *base = strrchr(p->exe, '/');

			base = base ? base + 1 : p->exe;
			pr.process = (struct sprobe_df_process){
				.pid = p->pid, .exec_index = p->exec, .flags = SPROBE_DF_PROCESS_UNSAMPLED,
				.start_mono_ns = p->start, .name = base, .name_len = (uint32_t)strlen(base),
				.exe = p->exe, .exe_len = (uint32_t)strlen(p->exe), .note = p->note,
				.note_len = (uint32_t)strlen(p->note),
			};
			out_record(&out, &pr);
			if (!res->unsampled++)
				snprintf(res->unsampled_what, sizeof(res->unsampled_what), "%s: %s", p->exe,
					 p->note);
			rec.exit.part_status = SPROBE_DF_OK;
		} else {
			res->parts++;
			if (p->good <= SPROBE_DF_PREAMBLE_SIZE) {
				/* Nothing intact: the process is still named. */
				struct sprobe_df_record pr = { .type = SPROBE_DF_PROCESS };

				pr.process = (struct sprobe_df_process){ .pid = p->pid, .exec_index = p->exec,
									 .start_mono_ns = p->start,
									 .note = "its part holds no record",
									 .note_len = 24 };
				out_record(&out, &pr);
			}
			out_part(&out, p);
			/* Kernel windows of this image: its pid, from its start
			 * to the next image's. */
			for (size_t k = 0; k < o->nkw && p->good > SPROBE_DF_PREAMBLE_SIZE; k++) {
				uint32_t tg = o->kw_tgid ? o->kw_tgid[k] : (uint32_t)o->root_pid;
				uint64_t t = o->kw[k].deliver_ns ? o->kw[k].deliver_ns : o->kw[k].generate_ns;

				if (placed[k] || tg != p->pid || (p->start && t < p->start))
					continue;
				bool later = false;

				for (size_t j = 0; j < ps.n && !later; j++)
					if (ps.v[j].pid == p->pid && ps.v[j].exec > p->exec && ps.v[j].path &&
					    ps.v[j].start && ps.v[j].start <= t)
						later = true;
				if (later)
					continue;
				struct sprobe_df_record kr = { .type = SPROBE_DF_KWINDOW, .kwindow = o->kw[k] };

				out_record(&out, &kr);
				placed[k] = true;
				res->kwindows++;
			}
			rec.exit.part_status = (uint32_t)p->status;
			if (p->status == SPROBE_DF_CUT_SHORT)
				res->cut_short++;
			if (p->status == SPROBE_DF_CORRUPT && !res->damaged++)
				snprintf(res->damaged_what, sizeof(res->damaged_what), "process %u (%s): %s",
					 p->pid, p->path, p->msg);
			if (p->status != SPROBE_DF_COMPLETE) {
				rec.exit.note = p->msg;
				rec.exit.note_len = (uint32_t)strlen(p->msg);
			}
		}
		rec.exit.pid = p->pid;
		rec.exit.exec_index = p->exec;
		if (p->end_rank) {
			rec.exit.how = p->end.how;
			rec.exit.code = p->end.code;
			rec.exit.time_ns = p->end.time_ns;
		} else if (!latest) {
			rec.exit.how = SPROBE_DF_EXIT_EXECED;
		} else if (pid_alive(p->pid)) {
			rec.exit.how = SPROBE_DF_EXIT_RUNNING;
			res->running++;
		}
		out_record(&out, &rec);
	}
	free(placed);
	if (!out.err && fflush(out.f) != 0)
		out.err = -errno;
	if (fclose(out.f) != 0 && !out.err)
		out.err = -errno;
	err = out.err;
done:
	parts_free(&ps);
	return err;
}
