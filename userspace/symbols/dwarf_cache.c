/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The DWARF image cache (dwarf_cache.h): files of images by build-id.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

int sprobe_dwarf_cache__set_dir(const char *dir)
{
	char *d = NULL;

	if (dir && *dir && strcmp(dir, "off") != 0) {
		d = strdup(dir);
		if (!d)
			return -ENOMEM;
	}
	free(cache_dir);
	cache_dir = d;
	return 0;
}

int sprobe_dwarf_cache__set_default(void)
{
	const char *env = getenv("STACKPROBE_DWARF_CACHE");
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char buf[4096];

	if (env)
		return sprobe_dwarf_cache__set_dir(env);
	/* XDG: a relative XDG_CACHE_HOME is to be ignored. */
	if (xdg && xdg[0] == '/')
		snprintf(buf, sizeof(buf), "%s/stackprobe/dwarf", xdg);
	else if (home && home[0] == '/')
		snprintf(buf, sizeof(buf), "%s/.cache/stackprobe/dwarf", home);
	else
		return sprobe_dwarf_cache__set_dir(NULL);
	return sprobe_dwarf_cache__set_dir(buf);
}

int sprobe_dwarf_cache__enabled(void)
{
	return cache_dir != NULL;
}

static int key_path(char *out, size_t len, const uint8_t *id, size_t id_len, uint64_t src_size,
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
	n = snprintf(out, len, "%s/%s-%llu-v%u.img", cache_dir, hex, (unsigned long long)src_size,
		     version);
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
			    uint32_t version, void **map, size_t *len)
{
	char path[4400];
	struct hdr h, want;
	struct stat st;
	void *m;
	int fd, err = key_path(path, sizeof(path), id, id_len, src_size, version);

	if (err)
		return err;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	/* Only a regular file of ours (the directory is ours, 0700: anything
	 * else was put there by somebody else, and is left alone). */
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		return -EILSEQ;
	}
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		goto damaged;
	fill_hdr(&want, id, id_len, src_size, version, h.image_len);
	if (memcmp(&h, &want, sizeof(h)) != 0 || !h.image_len ||
	    h.image_len > SPROBE_DWARF_CACHE_MAX_IMAGE ||
	    (uint64_t)st.st_size != HDR_BYTES + h.image_len)
		goto damaged;
	m = mmap(NULL, (size_t)h.image_len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, HDR_BYTES);
	err = m == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err)
		return err;
	*map = m;
	*len = (size_t)h.image_len;
	return 0;
damaged:
	close(fd);
	unlink(path);
	return -EILSEQ;
}

/* mkdir -p dir, each made 0700. */
static int make_dirs(const char *dir)
{
	char p[4096];
	size_t n = strlen(dir);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char c = p[i];

		p[i] = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			return -errno;
		p[i] = c;
	}
	return 0;
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

int sprobe_dwarf_cache__put(const uint8_t *id, size_t id_len, uint64_t src_size,
			    uint32_t version, const void *img, size_t len)
{
	static _Atomic unsigned seq;
	char path[4400], tmp[4500];
	uint8_t page[HDR_BYTES];
	int fd, err = key_path(path, sizeof(path), id, id_len, src_size, version);

	if (err)
		return err;
	if (!img || !len)
		return -EINVAL;
	if (len > SPROBE_DWARF_CACHE_MAX_IMAGE)
		return -EFBIG;
	err = make_dirs(cache_dir);
	if (err)
		return err;
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%d-%ld-%u", cache_dir, (int)getpid(),
		 (long)syscall(SYS_gettid), atomic_fetch_add(&seq, 1));
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
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
	if (!err && rename(tmp, path) != 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}
