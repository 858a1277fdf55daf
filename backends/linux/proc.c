/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * /proc readers, probe side (never inside a window): /proc/self/maps into
 * the sorted range array the handler bounds its copy with, the thread set
 * (/proc/self/task), and a thread's SigBlk/SigPnd.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/linux/linux.h"
#include "userspace/common/fds.h"

pid_t sprobe_lx_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

int sprobe_lx_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* Read a whole /proc file into c->maps (grown as needed). */
static int read_maps(struct sprobe_capturer *c, size_t *len)
{
	int h = sprobe_fd__open("/proc/self/maps", O_RDONLY, 0, SPROBE_FD_TRANSIENT);
	int fd = h >= 0 ? sprobe_fd__get(h) : h;
	size_t off = 0;
	ssize_t n;

	if (fd < 0) {
		sprobe_fd__close(h);
		return fd;
	}
	for (;;) {
		if (off + 4096 > c->maps_cap) {
			size_t cap = c->maps_cap;
			int err = sprobe_lx_grow((void **)&c->maps, &cap, off + 4096 + 1, 1);

			if (err) {
				sprobe_fd__done(h);
				return err;
			}
			c->maps_cap = cap;
		}
		n = read(fd, c->maps + off, c->maps_cap - off - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			n = -errno;
			sprobe_fd__done(h);
			return (int)n;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	sprobe_fd__done(h);
	c->maps[off] = '\0';
	*len = off;
	return 0;
}

uint64_t sprobe_lx_parse_hex(const char **pp)
{
	const char *p = *pp;
	uint64_t v = 0;

	for (;; p++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else
			break;
		v = v << 4 | d;
	}
	*pp = p;
	return v;
}

/* Re-read /proc/self/maps into c->ranges: rw mappings, ascending. */
static int refresh_ranges_once(struct sprobe_capturer *c)
{
	size_t len = 0, cap = c->ranges_cap;
	const char *p, *end;
	uint32_t n = 0;
	int err = read_maps(c, &len);

	if (err)
		return err;
	p = c->maps;
	end = c->maps + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		uint64_t lo, hi;

		if (!eol)
			eol = end;
		lo = sprobe_lx_parse_hex(&p);
		if (*p == '-') {
			p++;
			hi = sprobe_lx_parse_hex(&p);
			if (*p == ' ' && p + 3 < eol && p[1] == 'r' && p[2] == 'w' && hi > lo) {
				if (n == cap) {
					err = sprobe_lx_grow((void **)&c->ranges, &cap, n + 1, sizeof(*c->ranges));
					if (err)
						return err;
					c->ranges_cap = (uint32_t)cap;
				}
				c->ranges[n].lo = lo;
				c->ranges[n].hi = hi;
				c->ranges[n].growsdown =
					eol - p >= 7 && memcmp(eol - 7, "[stack]", 7) == 0;
				/* The kernel lists mappings in ascending order;
				 * the handler's binary search relies on it. */
				if (n && c->ranges[n - 1].hi > lo)
					return -EPROTO;
				n++;
			}
		}
		p = eol + 1;
	}
	c->nranges = n;
	c->maps_stale = false;
	return 0;
}

/*
 * The kernel makes each read(2) of /proc/self/maps consistent, not the
 * whole file: a mapping created or removed between two reads (an
 * allocator's mmap, a thread's stack) can show ranges out of order. Such a
 * parse is refused (-EPROTO: the handler's binary search needs the order)
 * and the file read again, a bounded number of times.
 */
int sprobe_lx_refresh_ranges(struct sprobe_capturer *c)
{
	int err = -EPROTO;

	for (int attempt = 0; attempt < 16 && err == -EPROTO; attempt++)
		err = refresh_ranges_once(c);
	return err;
}

bool sprobe_lx_is_excluded(const struct sprobe_capturer *c, pid_t tid)
{
	for (uint32_t i = 0; i < c->nexcl; i++)
		if (c->excl[i] == tid)
			return true;
	return false;
}

/* Enumerate /proc/self/task into c->tids, excluding self and the excluded
 * threads (they are neither signalled nor counted). */
int sprobe_lx_enumerate_threads(struct sprobe_capturer *c, pid_t self)
{
	uint32_t n = 0;

	int fd = sprobe_fd__get(c->task_fd);

	if (fd < 0)
		return fd;
	if (lseek(fd, 0, SEEK_SET) < 0) {
		sprobe_fd__put(c->task_fd);
		return -errno;
	}
	for (;;) {
		long got = syscall(SYS_getdents64, fd, c->dents, c->dents_len);
		long off = 0;

		if (got < 0) {
			int e = -errno;

			sprobe_fd__put(c->task_fd);
			return e;
		}
		if (got == 0)
			break;
		while (off < got) {
			struct dirent64 *d = (struct dirent64 *)(c->dents + off);
			const char *s = d->d_name;
			long tid = 0;

			off += d->d_reclen;
			if (*s < '0' || *s > '9')
				continue;
			for (; *s >= '0' && *s <= '9'; s++)
				tid = tid * 10 + (*s - '0');
			if ((pid_t)tid == self || sprobe_lx_is_excluded(c, (pid_t)tid))
				continue;
			if (n == c->tids_cap) {
				size_t cap = c->tids_cap;
				size_t cap2 = c->tids_cap;
				int err = sprobe_lx_grow((void **)&c->tids, &cap, n + 1, sizeof(pid_t));

				if (!err)
					err = sprobe_lx_grow((void **)&c->prev_tids, &cap2, n + 1, sizeof(pid_t));
				if (!err) {
					size_t cap3 = c->tids_cap;

					err = sprobe_lx_grow((void **)&c->sent, &cap3, n + 1, sizeof(uint32_t));
				}
				if (err) {
					sprobe_fd__put(c->task_fd);
					return err;
				}
				c->tids_cap = (uint32_t)cap;
			}
			c->tids[n++] = (pid_t)tid;
		}
	}
	sprobe_fd__put(c->task_fd);
	c->ntids = n;
	return 0;
}

static bool status_mask(const char *buf, const char *key, uint64_t *mask)
{
	const char *p = strstr(buf, key), *q;

	if (!p)
		return false;
	p += strlen(key);
	while (*p == ' ' || *p == '\t')
		p++;
	q = p;
	*mask = sprobe_lx_parse_hex(&q);
	/* 16 hex digits, most significant first; signal n is bit n-1. */
	return q - p == 16;
}

/*
 * Should the capture signal be sent to tid? From SigBlk and SigPnd in
 * /proc/self/task/<tid>/status, read outside any window.
 * Returns 0 (send), or the drop reason: EXITED if the thread is gone,
 * BLOCKED if it blocks the signal, ERROR if status is unreadable.
 *
 * A thread that is still returning from one of our handlers (the previous
 * capture returned as soon as the handler published DONE; often the
 * probe's wake-up preempts the handler right there) has every signal in
 * the handler's sa_mask blocked until its sigreturn. Such a thread is
 * signalled anyway: the signal is delivered right after the sigreturn. A
 * thread that really blocks that whole set is found out while waiting
 * (strict = true: only blocked with our signal pending counts; blocked
 * without it means the signal was just delivered) and from then on keeps
 * exactly one stale signal pending, which makes later checks drop it
 * without queueing more.
 */

uint32_t sprobe_lx_thread_sigcheck(const struct sprobe_capturer *c, pid_t tid, bool strict)
{
	char path[64], buf[2048];
	uint64_t blk, pnd, bit = 1ull << (c->signo - 1);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	int h = sprobe_fd__open(path, O_RDONLY, 0, SPROBE_FD_TRANSIENT);
	if (h < 0)
		return h == -ENOENT ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR;
	fd = sprobe_fd__get(h);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	int e = errno;
	sprobe_fd__done(h);
	errno = e;
	if (n <= 0)
		return n == 0 || errno == ESRCH ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR;
	buf[n] = '\0';
	if (!status_mask(buf, "SigBlk:", &blk) || !status_mask(buf, "SigPnd:", &pnd))
		return SPROBE_DROP_ERROR;
	if (!(blk & bit))
		return 0;
	/* Inside one of our handlers a thread blocks at least the handler's
	 * whole mask: anything less is the application's doing. */
	if ((blk & c->handler_mask) != c->handler_mask)
		return SPROBE_DROP_BLOCKED;
	if (!(pnd & bit))
		return 0; /* in our handler, or just delivered: see above */
	/* Pending behind a full mask while some handler of ours runs: most
	 * likely this thread, preempted before its sigreturn. Undecided: the
	 * caller asks again once no handler runs. */
	if (strict && atomic_load(&sprobe_lx_g.in_handler))
		return SIGCHECK_UNSURE;
	return SPROBE_DROP_BLOCKED;
}

int sprobe_lx_cmp_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

/* In place (glibc's qsort may malloc a merge buffer: a warm capture must
 * not allocate). Shell sort, Ciura's gaps. */
void sprobe_lx_sort_tids(pid_t *v, uint32_t n)
{
	static const uint32_t gaps[] = { 701, 301, 132, 57, 23, 10, 4, 1 };

	for (size_t k = 0; k < sizeof(gaps) / sizeof(gaps[0]); k++) {
		uint32_t gap = gaps[k];

		for (uint32_t i = gap; i < n; i++) {
			pid_t x = v[i];
			uint32_t j = i;

			for (; j >= gap && v[j - gap] > x; j -= gap)
				v[j] = v[j - gap];
			v[j] = x;
		}
	}
}

/*
 * Did a thread appear since the maps were last read? Only new threads can
 * run on stacks the range array does not know; exits make no range wrong
 * (a thread's stack is never unmapped while it runs). prev_tids is kept
 * sorted; updated here.
 */
bool sprobe_lx_new_threads(struct sprobe_capturer *c)
{
	bool fresh = false;

	for (uint32_t i = 0; i < c->ntids && !fresh; i++)
		fresh = !bsearch(&c->tids[i], c->prev_tids, c->nprev, sizeof(pid_t), sprobe_lx_cmp_tid);
	if (c->ntids)
		memcpy(c->prev_tids, c->tids, c->ntids * sizeof(pid_t));
	c->nprev = c->ntids;
	sprobe_lx_sort_tids(c->prev_tids, c->nprev);
	return fresh;
}

bool sprobe_lx_thread_count_changed(struct sprobe_capturer *c)
{
	int fd = sprobe_fd__get(c->task_fd);
	struct stat st;
	bool changed = true;

	if (fd < 0)
		return true;
	/* procfs counts a process's threads in its task directory's links
	 * (proc_task_getattr(): 2 + threads), read in O(1). */
	if (fstat(fd, &st) == 0) {
		changed = (uint64_t)st.st_nlink != c->task_nlink;
		c->task_nlink = (uint64_t)st.st_nlink;
	}
	sprobe_fd__put(c->task_fd);
	return changed;
}

/*
 * Is the main executable a Go program (a ".go.buildinfo" section)? Then
 * the handler may read the current goroutine's stack bounds from its g
 * (stack_bounds() in handler.c). Read once, outside any window, from
 * /proc/self/exe's section headers; false on any doubt.
 */
bool sprobe_lx_is_go_program(void)
{
	int h = sprobe_fd__open("/proc/self/exe", O_RDONLY, 0, SPROBE_FD_TRANSIENT);
	int fd = sprobe_fd__get(h);
	Elf64_Ehdr eh;
	Elf64_Shdr sh, strsh;
	bool go = false;
	char name[16];

	if (fd < 0) {
		sprobe_fd__close(h);
		return false;
	}
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum ||
	    pread(fd, &strsh, sizeof(strsh), (off_t)(eh.e_shoff + (uint64_t)eh.e_shstrndx * sizeof(sh))) !=
		    (ssize_t)sizeof(strsh))
		goto out;
	for (uint32_t i = 0; i < eh.e_shnum && i < 4096 && !go; i++) {
		if (pread(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + (uint64_t)i * sizeof(sh))) !=
			    (ssize_t)sizeof(sh) ||
		    sh.sh_name >= strsh.sh_size)
			break;
		ssize_t n = pread(fd, name, sizeof(name) - 1, (off_t)(strsh.sh_offset + sh.sh_name));
		if (n <= 0)
			break;
		name[n] = '\0';
		go = strcmp(name, ".go.buildinfo") == 0;
	}
out:
	sprobe_fd__put(h);
	sprobe_fd__close(h);
	return go;
}
