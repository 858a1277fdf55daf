/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * zlib through dlopen, for the library's few uses of it: a debug link's
 * CRC (symbolize.c), compressed .debug_frame (debug_frame.c) and gzip'd
 * pprof output (report/pprof.c).
 *
 * Why: none of them runs in a program under `record` in the common case,
 * yet linked, libz.so.1 was mapped into every such program (~80 kB of
 * RSS: text faulted around at load; docs/PERFORMANCE.md, "Memory, third
 * pass"). So the shared library does not link it: the first call opens
 * libz.so.1. Programs linked with -lz get the copy already loaded.
 *
 * Include this header instead of <zlib.h>: after it, the five names are
 * macros for the functions below, which load first and fail as zlib does
 * when it is missing (crc32 returns 0, the others Z_VERSION_ERROR).
 * Thread-safe; not async-signal-safe (dlopen).
 */
#ifndef SPROBE_COMMON_ZLIB_DL_H
#define SPROBE_COMMON_ZLIB_DL_H

#include <zlib.h>

/* macOS links zlib (there is no preloaded agent there, and
 * userspace/common/zlib_dl.c is not in the Darwin build): the names stay
 * zlib's. */
#ifndef __APPLE__
#define SPROBE_ZLIB_SONAME "libz.so.1"

uLong sprobe__crc32(uLong crc, const Bytef *buf, uInt len);
int sprobe__uncompress(Bytef *dest, uLongf *dest_len, const Bytef *source, uLong source_len);
int sprobe__deflateInit2_(z_streamp strm, int level, int method, int window_bits, int mem_level,
			  int strategy, const char *version, int stream_size);
int sprobe__deflate(z_streamp strm, int flush);
int sprobe__deflateEnd(z_streamp strm);

#ifndef SPROBE_ZLIB_DL_IMPL
#define crc32 sprobe__crc32
#define uncompress sprobe__uncompress
#define deflateInit2_ sprobe__deflateInit2_
#define deflate sprobe__deflate
#define deflateEnd sprobe__deflateEnd
#endif
#endif /* !__APPLE__ */

#endif /* SPROBE_COMMON_ZLIB_DL_H */
