/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A per-user cache of the DWARF images dwarf_load.c builds (dwarf_cache.c).
 *
 * Why: building libc's image (inflating ~3.5 MB of zlib streams into
 * ~8.6 MB of fresh memory) is most of what `stackprobe record`'s
 * names-and-lines pass costs, and it is the same work on every run for the
 * same debug file (docs/PERFORMANCE.md, "The DWARF image cache"). Like
 * perf's ~/.debug, the image is kept by build-id: the next run maps the
 * file (page-cache pages: nothing to inflate, nothing to zero).
 *
 * Who uses it: only the CLI (record's lines pass) turns it on
 * (sprobe_dwarf_cache__set_default()); the agent inside a profiled program
 * never does, so a profiled program never writes a file of ours.
 *
 * Where: $STACKPROBE_DWARF_CACHE if set (an absolute path; "off", "0" or
 * anything else: no cache), else $XDG_CACHE_HOME/stackprobe/dwarf, else
 * $HOME/.cache/stackprobe/dwarf. Directories are made 0700, and only
 * inside a directory of this user's (root with another user's HOME makes
 * none there); the cache directory is used only if it is this user's and
 * no one else may write it, and files are opened relative to it
 * (openat), never through a symbolic link at their own name. A file is named by the build-id, the source file's size and
 * the image layout's version; it is a 4 KiB header (magic, the same key,
 * the image's length) and the image. It is written to a temporary name,
 * flushed (fdatasync) and renamed, so a reader sees a whole file or none;
 * a file that is not exactly what its header says is not used and is
 * removed; one that is not a regular file of this user's alone is not
 * used either. Either way the image built instead is stored under that
 * name. Temporary files of writers that died are removed by the next
 * writer. The cache is bounded: a use marks a file (its mtime), and each
 * store removes the least recently used images until the directory's
 * images take at most SPROBE_DWARF_CACHE_MAX_TOTAL bytes (never the one
 * just stored).
 *
 * Thread-safety: set the directory before images are opened; get and put
 * may then run from several threads. Errors are 0 or -errno; the cache is
 * best effort: every failure means "build the image as if there were no
 * cache". Nothing here is async-signal-safe.
 */
#ifndef SPROBE_SYMBOLS_DWARF_CACHE_H
#define SPROBE_SYMBOLS_DWARF_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Images larger than this are built every time, never stored. */
#define SPROBE_DWARF_CACHE_MAX_IMAGE (1ull << 30)
/* The images of a cache directory together, after a store (libc's is
 * ~8.6 MB; a large C++ program's can be hundreds of MB). */
#define SPROBE_DWARF_CACHE_MAX_TOTAL (2ull << 30)

/* Another bound than SPROBE_DWARF_CACHE_MAX_TOTAL (tests). */
void sprobe_dwarf_cache__set_max_total(uint64_t bytes);

/* Use dir (copied; NULL, "off" or a relative path: no cache). Returns 0
 * or -ENOMEM. */
int sprobe_dwarf_cache__set_dir(const char *dir);

/* The directory from the environment (see above). Returns 0 or -ENOMEM. */
int sprobe_dwarf_cache__set_default(void);

/* Is a directory set? */
int sprobe_dwarf_cache__enabled(void);

/* The first reason a set directory could not be used or written (not a
 * miss), as -errno, or 0; with the directory's path. So that the CLI can
 * say once why every run rebuilds. */
int sprobe_dwarf_cache__problem(const char **dir);

/* The image of (id, src_size, version): 0 and the file mapped at *map
 * (MAP_PRIVATE, readable and writable, *len bytes; the caller munmaps
 * it), the image at *map + *image_off; or -ENOENT (not cached, or no
 * cache), -EILSEQ (a damaged file, now removed), -EPERM (the directory
 * or the file is not this user's alone: not used, left as it is),
 * -errno. */
int sprobe_dwarf_cache__get(const uint8_t *id, size_t id_len, uint64_t src_size,
			    uint32_t version, void **map, size_t *len, size_t *image_off);

/* Store len bytes of image under (id, src_size, version). 0 or -errno
 * (-ENOENT: no cache; -EFBIG: over SPROBE_DWARF_CACHE_MAX_IMAGE). */
int sprobe_dwarf_cache__put(const uint8_t *id, size_t id_len, uint64_t src_size,
			    uint32_t version, const void *img, size_t len);

#endif /* SPROBE_SYMBOLS_DWARF_CACHE_H */
