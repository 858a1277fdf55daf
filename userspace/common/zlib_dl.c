/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * zlib through dlopen (see zlib_dl.h for the contract and why the shared
 * library does not link it).
 */
#include <dlfcn.h>
#include <pthread.h>

#define SPROBE_ZLIB_DL_IMPL
#include "userspace/common/zlib_dl.h"

#define SPROBE_ZLIB_FNS(X) X(crc32) X(uncompress) X(deflateInit2_) X(deflate) X(deflateEnd)

static struct {
#define SPROBE_ZLIB_PTR(f) __typeof__(f) *f;
	SPROBE_ZLIB_FNS(SPROBE_ZLIB_PTR)
#undef SPROBE_ZLIB_PTR
} fns;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ready; /* set once */

static void load_once(void)
{
	/* Never closed; RTLD_LOCAL: its symbols stay out of the program's
	 * namespace. */
	void *dl = dlopen(SPROBE_ZLIB_SONAME, RTLD_NOW | RTLD_LOCAL);
	__typeof__(fns) t;

	if (!dl)
		return;
#define SPROBE_ZLIB_SYM(f)                       \
	if (!(*(void **)&t.f = dlsym(dl, #f))) \
		return;
	SPROBE_ZLIB_FNS(SPROBE_ZLIB_SYM)
#undef SPROBE_ZLIB_SYM
	fns = t;
	ready = 1;
}

/* pthread_once orders the table's writes before every caller's reads. */
static int load(void)
{
	pthread_once(&once, load_once);
	return ready;
}

uLong sprobe__crc32(uLong crc, const Bytef *buf, uInt len)
{
	return load() ? fns.crc32(crc, buf, len) : 0;
}

int sprobe__uncompress(Bytef *dest, uLongf *dest_len, const Bytef *source, uLong source_len)
{
	return load() ? fns.uncompress(dest, dest_len, source, source_len) : Z_VERSION_ERROR;
}

int sprobe__deflateInit2_(z_streamp strm, int level, int method, int window_bits, int mem_level,
			  int strategy, const char *version, int stream_size)
{
	return load() ? fns.deflateInit2_(strm, level, method, window_bits, mem_level, strategy,
					  version, stream_size)
		      : Z_VERSION_ERROR;
}

int sprobe__deflate(z_streamp strm, int flush)
{
	return load() ? fns.deflate(strm, flush) : Z_STREAM_ERROR;
}

int sprobe__deflateEnd(z_streamp strm)
{
	return load() ? fns.deflateEnd(strm) : Z_STREAM_ERROR;
}
