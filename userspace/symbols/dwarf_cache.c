/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The DWARF image cache (dwarf_cache.h): files of images by build-id.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "userspace/symbols/dwarf_cache.h"

#define HDR_BYTES 4096u
#define ID_MAX 64u

static const char magic[8] = { 'S', 'P', 'D', 'W', 'I', 'M', 'G', '1' };

struct hdr {
	char magic[8];
	uint32_t version;
	uint32_t id_len;
	uint8_t id[ID_MAX];
	uint64_t src_size;
	uint64_t image_len;
};

static char *cache_dir;
static int problem; /* the first -errno of a set directory, not a miss */
static uint64_t max_total = SPROBE_DWARF_CACHE_MAX_TOTAL;

void sprobe_dwarf_cache__set_max_total(uint64_t bytes)
{
	max_total = bytes;
}

/* err: a descriptor (>= 0) or -errno; only an error other than a miss
 * is a problem. */
static int note(int err)
{
	if (err < 0 && err != -ENOENT && !problem)
		problem = err;
	return err;
}

int sprobe_dwarf_cache__problem(const char **dir)
{
	if (dir)
		*dir = cache_dir;
	return problem;
}

/* An absolute path, or NULL: "off", "0", "" and relative paths turn the
 * cache off (a relative one would land in whatever directory record runs
 * from). */
int sprobe_dwarf_cache__set_dir(const char *dir)
{
	char *d = NULL;

	if (dir && dir[0] == '/') {
		d = strdup(dir);
		if (!d)
			return -ENOMEM;
	}
	free(cache_dir);
	cache_dir = d;
	problem = 0; /* a new directory has had none yet */
	return 0;
}

int sprobe_dwarf_cache__set_default(void)
{
	const char *env = getenv("STACKPROBE_DWARF_CACHE");
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char buf[4096];
	int n;

	if (env)
		return sprobe_dwarf_cache__set_dir(env);
	/* XDG: a relative XDG_CACHE_HOME is to be ignored. */
	if (xdg && xdg[0] == '/')
		n = snprintf(buf, sizeof(buf), "%s/stackprobe/dwarf", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, sizeof(buf), "%s/.cache/stackprobe/dwarf", home);
	else
		return sprobe_dwarf_cache__set_dir(NULL);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return sprobe_dwarf_cache__set_dir(NULL);
	return sprobe_dwarf_cache__set_dir(buf);
}

int sprobe_dwarf_cache__enabled(void)
{
	return cache_dir != NULL;
}

/* mkdir -p of the cache directory, each made 0700, but only inside a
 * directory of this user's: root running with another user's HOME (sudo
 * -E) must not create root-owned directories in it. */
static int make_dirs(const char *dir)
{
	char p[4096];
	size_t n = strlen(dir);
	struct stat st;

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char c = p[i];

		p[i] = '\0';
		if (stat(p, &st) != 0) {
			char *slash = strrchr(p, '/');
			struct stat parent;
			int err;

			*slash = '\0';
			err = stat(slash == p ? "/" : p, &parent);
			*slash = '/';
			if (err != 0)
				return -errno;
			if (parent.st_uid != geteuid())
				return -EPERM;
			if (mkdir(p, 0700) != 0 && errno != EEXIST)
				return -errno;
		}
		p[i] = c;
	}
	return 0;
}

/* The cache directory, opened: a directory owned by this user that no
 * one else may write (else another user could swap files under a
 * mapping, or plant names). Returns a descriptor or -errno (-EPERM: not
 * such a directory: no cache). */
static int open_dir(bool create)
{
	struct stat st;
	int fd, err;

	if (!cache_dir)
		return -ENOENT;
	if (create && (err = make_dirs(cache_dir)) != 0)
		return err;
	fd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

static int key_name(char *out, size_t len, const uint8_t *id, size_t id_len, uint64_t src_size,
		    uint32_t version)
{
	char hex[2 * ID_MAX + 1];
	int n;

	if (!cache_dir)
		return -ENOENT;
	if (!id || !id_len || id_len > ID_MAX)
		return -EINVAL;
	for (size_t i = 0; i < id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	n = snprintf(out, len, "%s-%llu-v%u.img", hex, (unsigned long long)src_size, version);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void fill_hdr(struct hdr *h, const uint8_t *id, size_t id_len, uint64_t src_size,
		     uint32_t version, uint64_t image_len)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, magic, sizeof(magic));
	h->version = version;
	h->id_len = (uint32_t)id_len;
	memcpy(h->id, id, id_len);
	h->src_size = src_size;
	h->image_len = image_len;
}

int sprobe_dwarf_cache__get(const uint8_t *id, size_t id_len, uint64_t src_size,
			    uint32_t version, void **map, size_t *len, size_t *image_off)
{
	char name[256];
	struct hdr h, want;
	struct stat st;
	void *m;
	int dfd, fd, err = key_name(name, sizeof(name), id, id_len, src_size, version);

	if (err)
		return err;
	dfd = note(open_dir(false));
	if (dfd < 0)
		return dfd;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		err = errno == ENOENT ? -ENOENT : -errno;
		close(dfd);
		return err;
	}
	/* Only a regular file of ours that no one else may write (one
	 * truncated under the mapping would end the reader with SIGBUS). */
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		close(fd);
		close(dfd);
		return -EPERM;
	}
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		goto damaged;
	fill_hdr(&want, id, id_len, src_size, version, h.image_len);
	if (memcmp(&h, &want, sizeof(h)) != 0 || !h.image_len ||
	    h.image_len > SPROBE_DWARF_CACHE_MAX_IMAGE ||
	    (uint64_t)st.st_size != HDR_BYTES + h.image_len)
		goto damaged;
	/* From offset 0: an mmap offset must be a multiple of the page size,
	 * which is 16 or 64 KiB on some aarch64 kernels. */
	m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	err = m == MAP_FAILED ? -errno : 0;
	if (!err)
		(void)futimens(fd, NULL); /* used now: the last to be evicted */
	close(fd);
	close(dfd);
	if (err)
		return err;
	*map = m;
	*len = (size_t)st.st_size;
	*image_off = HDR_BYTES;
	return 0;
damaged:
	close(fd);
	unlinkat(dfd, name, 0);
	close(dfd);
	return -EILSEQ;
}


static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* A listing of directory dfd from its start, on a descriptor of its own
 * (dfd stays open), or NULL. A dup shares dfd's offset, which another
 * listing may have moved: rewound. */
static DIR *listing(int dfd)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d && fd >= 0)
		close(fd);
	if (d)
		rewinddir(d);
	return d;
}

/* Temporary files of writers that are gone (killed mid-write): removed,
 * so nothing is left behind for good. Names: .tmp-PID-TID-SEQ. */
static void sweep_tmp(int dfd)
{
	DIR *d = listing(dfd);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		int pid;

		if (sscanf(de->d_name, ".tmp-%d-", &pid) == 1 && pid > 0 && kill(pid, 0) != 0 &&
		    errno == ESRCH)
			unlinkat(dfd, de->d_name, 0);
	}
	closedir(d);
}

struct img_ent {
	struct timespec used;
	uint64_t size;
	char name[256];
};

static int cmp_used(const void *a, const void *b)
{
	const struct img_ent *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	return (x->used.tv_nsec > y->used.tv_nsec) - (x->used.tv_nsec < y->used.tv_nsec);
}

/* Remove the least recently used images (by mtime: a get marks its file)
 * until the directory's images take at most max_total bytes; keep is the
 * one just stored. Best effort. */
static void evict(int dfd, const char *keep)
{
	DIR *d = listing(dfd);
	struct img_ent *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t nl = strlen(de->d_name);
		struct stat st;

		if (nl < 5 || nl >= sizeof(v->name) || de->d_name[0] == '.' ||
		    strcmp(de->d_name + nl - 4, ".img") != 0 ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
			continue;
		total += (uint64_t)st.st_size;
		if (strcmp(de->d_name, keep) == 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct img_ent *nv = realloc(v, nc * sizeof(*nv));

			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		v[n].used = st.st_mtim;
		v[n].size = (uint64_t)st.st_size;
		memcpy(v[n].name, de->d_name, nl + 1);
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_used);
	for (size_t i = 0; i < n && total > max_total; i++)
		if (unlinkat(dfd, v[i].name, 0) == 0 || errno == ENOENT) /* or another's eviction */
			total -= v[i].size;
	free(v);
}

int sprobe_dwarf_cache__put(const uint8_t *id, size_t id_len, uint64_t src_size,
			    uint32_t version, const void *img, size_t len)
{
	static _Atomic unsigned seq;
	char name[256], tmp[128];
	uint8_t page[HDR_BYTES];
	int dfd, fd, err = key_name(name, sizeof(name), id, id_len, src_size, version);

	if (err)
		return err;
	if (!img || !len)
		return -EINVAL;
	if (len > SPROBE_DWARF_CACHE_MAX_IMAGE)
		return -EFBIG;
	dfd = note(open_dir(true));
	if (dfd < 0)
		return dfd;
	sweep_tmp(dfd);
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%ld-%u", (int)getpid(), (long)syscall(SYS_gettid),
		 atomic_fetch_add(&seq, 1));
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		close(dfd);
		return err;
	}
	memset(page, 0, sizeof(page));
	fill_hdr((struct hdr *)page, id, id_len, src_size, version, len);
	err = write_all(fd, page, sizeof(page));
	if (!err)
		err = write_all(fd, img, len);
	/* On disk before the name is: after a crash the name shows a whole
	 * file or nothing (a renamed file whose data was lost would read as
	 * zeros with a valid size). */
	if (!err && fdatasync(fd) != 0)
		err = -errno;
	if (close(fd) != 0 && !err)
		err = -errno;
	if (!err && renameat(dfd, tmp, dfd, name) != 0)
		err = -errno;
	if (err)
		unlinkat(dfd, tmp, 0);
	else
		evict(dfd, name);
	close(dfd);
	return note(err);
}
