/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * zlib through dlopen (see zlib_dl.h for the contract and why the shared
 * library does not link it; the loader is userspace/common/dl_table.h).
 */
#define SPROBE_ZLIB_DL_IMPL
#include "userspace/common/zlib_dl.h"
#include "userspace/common/dl_table.h"

#define SPROBE_ZLIB_FNS(X) X(crc32) X(uncompress) X(deflateInit2_) X(deflate) X(deflateEnd)

static struct {
#define SPROBE_ZLIB_PTR(f) __typeof__(f) *f;
	SPROBE_ZLIB_FNS(SPROBE_ZLIB_PTR)
#undef SPROBE_ZLIB_PTR
} fns;

static const char *const names[] = { SPROBE_ZLIB_FNS(SPROBE_DL_NAME) };
_Static_assert(sizeof(names) / sizeof(names[0]) * sizeof(void *) == sizeof(fns),
	       "one pointer per name");
static struct sprobe_dl dl = SPROBE_DL_INIT(SPROBE_ZLIB_SONAME, names, &fns, NULL);

/* Is zlib there (loaded now if not yet)? */
static int load(void)
{
	return sprobe__dl_load(&dl, NULL) == 0;
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
