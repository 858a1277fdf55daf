/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * JIT symbol maps: /tmp/perf-PID.map, the text format perf defined and
 * every JIT that wants perf to name its code writes (node --perf-basic-prof,
 * the JVM's -XX:+DumpPerfMapAtExit and perf-map-agent, python3.12 -X perf,
 * LuaJIT, .NET's DOTNET_PerfMapEnabled): one "START SIZE NAME" line per
 * piece of generated code, START and SIZE in hex (an optional 0x), NAME the
 * rest of the line.
 *
 * The running program appends to the file while we read it, and anyone
 * can create a file in /tmp, so the reader trusts nothing:
 *   - only a regular file (O_NOFOLLOW, O_NONBLOCK: no symlink, FIFO or
 *     device), owned by the process's user or root, as perf requires;
 *   - only whole lines: a last line without its newline is being written
 *     and is read next time; a line longer than PERFMAP_LINE_MAX, or one
 *     that does not parse, is skipped;
 *   - bounded: at most PERFMAP_BYTES_MAX bytes of file and
 *     PERFMAP_ENTRIES_MAX entries per inventory (a JVM's map of a large
 *     service is tens of MB); past that the rest is ignored;
 *   - incremental: a miss re-reads only what was appended since (one
 *     fstat when nothing was); a file replaced under the same name (other
 *     device or inode, or shorter than what was read) starts over.
 * Later lines win over earlier ones for the same address: a JIT reuses
 * the memory of code it freed.
 *
 * Names live in blocks that never move, so a name handed out stays valid
 * until the inventory is freed, across re-reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "userspace/common/fds.h"
#include "userspace/symbols/modules_internal.h"
#include "userspace/symbols/perfmap.h"

#define PERFMAP_LINE_MAX 4096
#define PERFMAP_BYTES_MAX (256u << 20)
#define PERFMAP_ENTRIES_MAX (4u << 20)
#define PERFMAP_BLOCK (64u << 10)
#define PERFMAP_CHUNK (64u << 10)
/* Entries looked at before the candidate, for overlapping code. */
#define PERFMAP_BACK 16

struct perfmap_block {
	struct perfmap_block *next;
	size_t used;
	char data[PERFMAP_BLOCK];
};

static const char *intern(struct perfmap *pm, const char *s, size_t n)
{
	struct perfmap_block *b = pm->blocks;

	if (n + 1 > PERFMAP_BLOCK)
		return NULL;
	if (!b || b->used + n + 1 > PERFMAP_BLOCK) {
		b = malloc(sizeof(*b));
		if (!b)
			return NULL;
		b->next = pm->blocks;
		b->used = 0;
		pm->blocks = b;
	}
	char *p = b->data + b->used;

	memcpy(p, s, n);
	p[n] = '\0';
	b->used += n + 1;
	return p;
}

void sprobe__perfmap_release(struct perfmap *pm)
{
	struct perfmap_block *b = pm->blocks, *nb;

	for (; b; b = nb) {
		nb = b->next;
		free(b);
	}
	free(pm->v);
	memset(pm, 0, sizeof(*pm));
}

static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t x = 0;
	int nd = 0;

	if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end; s++, nd++) {
		int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (nd == 16)
			return false;
		x = x << 4 | (uint64_t)d;
	}
	if (nd == 0)
		return false;
	*p = s;
	*out = x;
	return true;
}

/* One line without its newline. 0: added or skipped; -ENOMEM. */
static int add_line(struct perfmap *pm, const char *s, const char *end)
{
	uint64_t start, size;

	if (end > s && end[-1] == '\r')
		end--;
	if (!parse_hex(&s, end, &start) || s == end || *s != ' ')
		return 0;
	s++;
	if (!parse_hex(&s, end, &size) || s == end || *s != ' ')
		return 0;
	s++;
	if (size == 0 || start + size < start || s == end || memchr(s, '\0', (size_t)(end - s)))
		return 0;
	if (pm->n == PERFMAP_ENTRIES_MAX) {
		pm->capped = true;
		return 0;
	}
	if (pm->n == pm->cap) {
		size_t nc = pm->cap ? pm->cap * 2 : 256;
		struct jit_sym *nv = realloc(pm->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		pm->v = nv;
		pm->cap = nc;
	}
	const char *name = intern(pm, s, (size_t)(end - s));

	if (!name)
		return (size_t)(end - s) + 1 > PERFMAP_BLOCK ? 0 : -ENOMEM;
	pm->v[pm->n++] = (struct jit_sym){ start, size, pm->seq++, name };
	return 0;
}

static int cmp_jit(const void *a, const void *b)
{
	const struct jit_sym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The path of the map of process pid (0: this one). For another process
 * it is read through /proc/PID/root, its own view of /tmp. */
static void map_path(pid_t pid, char *buf, size_t len)
{
	if (pid)
		snprintf(buf, len, "/proc/%d/root/tmp/perf-%d.map", (int)pid, (int)pid);
	else
		snprintf(buf, len, "/tmp/perf-%d.map", (int)getpid());
}

/* Whose file we accept: the process's user, or root. */
static bool owner_ok(pid_t pid, uid_t uid)
{
	char path[64];
	struct stat st;

	if (uid == 0)
		return true;
	if (!pid)
		return uid == geteuid();
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) == 0 && st.st_uid == uid;
}

/* Read what was appended to the map at path since the last time: owned
 * by owner_pid's user or root (owner_pid 0: this process's), modified in
 * [not_before_s, not_after_s] (0: no bound). 0 (also when there is no
 * map: -ENOENT is "nothing to name", not an error here), -errno. */
static int perfmap_read(struct perfmap *pm, const char *path, pid_t owner_pid, int64_t not_before_s,
			int64_t not_after_s, const uid_t *owner_uid)
{
	struct stat st;
	int h, fd, ret = 0;
	char *buf;
	size_t have = 0;
	bool skipping;
	uint8_t head[sizeof(pm->head)];

	if (pm->capped)
		return 0;
	h = sprobe_fd__open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, SPROBE_FD_TRANSIENT);
	fd = sprobe_fd__get(h);
	if (fd < 0) {
		sprobe_fd__close(h);
		return 0;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    !(owner_uid ? st.st_uid == 0 || st.st_uid == *owner_uid : owner_ok(owner_pid, st.st_uid)) ||
	    (int64_t)st.st_mtime < not_before_s || (not_after_s && (int64_t)st.st_mtime > not_after_s)) {
		sprobe_fd__done(h);
		return 0;
	}
	if ((uint64_t)st.st_dev != pm->dev || (uint64_t)st.st_ino != pm->ino ||
	    (uint64_t)st.st_size < pm->offset ||
	    (pm->head_len && (pread(fd, head, pm->head_len, 0) != (ssize_t)pm->head_len ||
			      memcmp(head, pm->head, pm->head_len) != 0))) {
		/* another file, or this one written again from the start
		 * (perf-map-agent rewrites it): its entries replace the old
		 * ones (the names already handed out stay in their blocks) */
		pm->n = 0;
		pm->offset = 0;
		pm->skipping = false;
		pm->head_len = 0;
		pm->dev = (uint64_t)st.st_dev;
		pm->ino = (uint64_t)st.st_ino;
	}
	skipping = pm->skipping;
	if ((uint64_t)st.st_size == pm->offset) {
		sprobe_fd__done(h);
		return 0;
	}
	buf = malloc(PERFMAP_CHUNK + PERFMAP_LINE_MAX);
	if (!buf) {
		sprobe_fd__done(h);
		return -ENOMEM;
	}
	size_t before = pm->n;
	uint64_t pos = pm->offset;

	while (pos < PERFMAP_BYTES_MAX) {
		size_t want = PERFMAP_CHUNK;
		ssize_t k;

		if (want > PERFMAP_BYTES_MAX - pos)
			want = (size_t)(PERFMAP_BYTES_MAX - pos);
		k = pread(fd, buf + have, want, (off_t)(pos + have));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		have += (size_t)k;
		/* whole lines only */
		char *line = buf, *end = buf + have, *nl;

		while ((nl = memchr(line, '\n', (size_t)(end - line)))) {
			if (!skipping && nl - line <= PERFMAP_LINE_MAX &&
			    (ret = add_line(pm, line, nl)) != 0)
				break;
			skipping = false;
			line = nl + 1;
		}
		if (ret)
			break;
		size_t used = (size_t)(line - buf);

		pos += used;
		have -= used;
		memmove(buf, line, have);
		if (have >= PERFMAP_LINE_MAX) {
			/* a line too long to be a name: drop it up to its newline */
			pos += have;
			have = 0;
			skipping = true;
		}
	}
	if (pos >= PERFMAP_BYTES_MAX)
		pm->capped = true;
	/* An over-long line not yet ended stays skipped next time. */
	pm->skipping = skipping;
	pm->offset = pos;
	if (pm->head_len < sizeof(pm->head) && pos > pm->head_len) {
		size_t want = pos < sizeof(pm->head) ? (size_t)pos : sizeof(pm->head);

		if (pread(fd, pm->head, want, 0) == (ssize_t)want)
			pm->head_len = (uint32_t)want;
		else
			pm->head_len = 0;
	}
	free(buf);
	sprobe_fd__done(h);
	if (pm->n != before && pm->n > 1)
		qsort(pm->v, pm->n, sizeof(*pm->v), cmp_jit);
	return ret;
}

static int perfmap_update(struct perfmap *pm, pid_t pid)
{
	char path[96];

	map_path(pid, path, sizeof(path));
	return perfmap_read(pm, path, pid, 0, 0, NULL);
}

static const struct jit_sym *perfmap_find(const struct perfmap *pm, uint64_t pc)
{
	size_t lo = 0, hi = pm->n;
	const struct jit_sym *best = NULL;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pm->v[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i > 0 && k < PERFMAP_BACK; i--, k++) {
		const struct jit_sym *e = &pm->v[i - 1];

		if (pc - e->start < e->size && (!best || e->seq > best->seq))
			best = e;
	}
	return best;
}

static int fill(const struct jit_sym *e, uint64_t pc, struct sprobe_symbol *out)
{
	if (!e)
		return -ENOENT;
	out->name = e->name;
	out->sym_start = e->start;
	out->sym_offset = pc - e->start;
	out->sym_size = e->size;
	out->source = "perf-map";
	return 0;
}

int sprobe__perfmap_symbolize(struct sprobe_modules *m, uint64_t pc, struct sprobe_symbol *out)
{
	struct perfmap *pm = &m->jit;
	const struct jit_sym *e;
	int ret;

	if (m->empty_mode || m->no_perf_map)
		return -ENOENT;
	e = perfmap_find(pm, pc);
	if (!e) {
		ret = perfmap_update(pm, m->pid);
		if (ret)
			return ret;
		e = perfmap_find(pm, pc);
	}
	return fill(e, pc, out);
}

struct sprobe_perfmap_file {
	struct perfmap pm;
	char *path;
	int64_t not_before_s, not_after_s;
	uid_t owner;
	bool read;
};

struct sprobe_perfmap_file *sprobe_perfmap_file__new(const char *path, int64_t not_before_s,
						     int64_t not_after_s, uid_t owner)
{
	struct sprobe_perfmap_file *f = calloc(1, sizeof(*f));

	if (!f || !path)
		goto fail;
	f->path = strdup(path);
	if (!f->path)
		goto fail;
	f->not_before_s = not_before_s;
	f->not_after_s = not_after_s;
	f->owner = owner;
	return f;
fail:
	free(f);
	errno = path ? ENOMEM : EINVAL;
	return NULL;
}

int sprobe_perfmap_file__symbolize(struct sprobe_perfmap_file *f, uint64_t pc,
				   struct sprobe_symbol *out)
{
	if (!f->read) {
		/* Once: the process has exited, its map no longer grows. */
		int ret = perfmap_read(&f->pm, f->path, 0, f->not_before_s, f->not_after_s, &f->owner);

		if (ret)
			return ret;
		f->read = true;
	}
	return fill(perfmap_find(&f->pm, pc), pc, out);
}

void sprobe_perfmap_file__free(struct sprobe_perfmap_file *f)
{
	if (!f)
		return;
	sprobe__perfmap_release(&f->pm);
	free(f->path);
	free(f);
}
