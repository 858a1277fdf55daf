/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe on Windows: unwinding of captured stacks with the PE unwind
 * data, and the module inventory used to attribute and (minimally)
 * symbolize return addresses.
 *
 * Capture itself goes through the portable API in <stackprobe/capture.h>
 * (sprobe_capturer__capture(); the Windows backend is
 * backends/windows/capture.c).
 * This header adds only what has no portable equivalent. Everything here
 * runs *after* the suspend windows, while every thread runs: it may
 * allocate and take locks, and none of it is async-signal-safe.
 *
 * Declarations exist only when compiling for Windows (_WIN32); the types are
 * plain C and compile everywhere.
 *
 * Errors: int functions return 0 (or a count) or -errno; pointer functions
 * return NULL and set errno.
 */
#ifndef STACKPROBE_WIN_H
#define STACKPROBE_WIN_H

#include <stackprobe/api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackprobe/capture.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest module path kept, in bytes of UTF-8 including the NUL. */
#define SPROBE_WIN_PATH_MAX 1024

/* One loaded image (EXE or DLL) of the current process. */
struct sprobe_win_module {
	uint64_t base;			/* load address (HMODULE) */
	uint64_t size;			/* SizeOfImage */
	char path[SPROBE_WIN_PATH_MAX];	/* full path, UTF-8 */
	/* CodeView RSDS record from the debug directory: the key a symbol
	 * server files the PDB under (GUID as stored, then age). has_pdb is
	 * false when the image has no such record (many mingw builds). */
	bool has_pdb;
	uint8_t pdb_guid[16];
	uint32_t pdb_age;
	char pdb_path[SPROBE_WIN_PATH_MAX]; /* as recorded by the linker */
	uint32_t nexports;		/* named exports indexed for symbolization */
};

struct sprobe_win_modules;

#ifdef _WIN32

/*
 * Take an inventory of the modules loaded in the current process (toolhelp
 * module snapshot), with each image's debug directory and named exports
 * read from memory.
 *
 * Returns a new inventory owned by the caller (sprobe_win_modules__free()),
 * or NULL with errno set (ENOMEM, or the mapped Win32 error). It is a copy:
 * later loads/unloads are not reflected; an address in an image unloaded
 * since is simply not found. Thread-safe (takes the loader lock through
 * toolhelp); NOT async-signal-safe: never call it inside a suspend window.
 */
SPROBE_API
struct sprobe_win_modules *sprobe_win_modules__new(void);

/* Free an inventory. NULL is accepted. */
SPROBE_API
void sprobe_win_modules__free(struct sprobe_win_modules *mods);

/* Number of modules. Thread-safe on a shared const inventory. */
SPROBE_API
size_t sprobe_win_modules__count(const struct sprobe_win_modules *mods);

/* The i-th module (sorted by base), or NULL with errno = ERANGE. The
 * pointer is owned by the inventory. */
SPROBE_API
const struct sprobe_win_module *
sprobe_win_modules__get(const struct sprobe_win_modules *mods, size_t i);

/* The module whose [base, base + size) contains addr, or NULL with errno =
 * ENOENT. The pointer is owned by the inventory. */
SPROBE_API
const struct sprobe_win_module *
sprobe_win_modules__find(const struct sprobe_win_modules *mods, uint64_t addr);

/*
 * Minimal symbolization: the named export of the containing module with the
 * highest address <= addr. Writes its name (truncated to len - 1 bytes,
 * always NUL-terminated) to buf and addr minus the export's address to
 * *offset (may be NULL).
 *
 * This is only as good as the export table: a non-exported function is
 * reported as the nearest exported one before it, with a large offset.
 * Callers that know better (PDBs) should use that instead.
 *
 * Returns 0; -ENOENT when addr is in no module or no export precedes it;
 * -EINVAL for a NULL/empty buffer. Thread-safe on a shared const inventory.
 */
SPROBE_API
int sprobe_win_modules__symbolize(const struct sprobe_win_modules *mods, uint64_t addr,
				  char *buf, size_t len, uint64_t *offset);

/*
 * Unwind one captured sample (stage RAW, method SUSPEND) with the PE unwind
 * data of the running process: RtlLookupFunctionEntry + RtlVirtualUnwind
 * over the *copy* of the stack. Before each step, every register that
 * points into the original stack range is translated into the copy and back
 * afterwards, so no byte of the live stack is read. A function without an
 * unwind entry is treated as a leaf (x86_64: return address at [sp];
 * aarch64: in lr). The walk stops at the copy's end, a zero or repeating
 * pc, a stack pointer that does not increase, or SPROBE_MAX_FRAMES.
 *
 * On success fills s->frames (frame 0 = the captured ip, method IP; the
 * rest method PE), sets s->nframes and s->stage = SPROBE_STAGE_UNWOUND and
 * returns the number of frames (frames stored as sprobe_unwind_fp() does:
 * see struct sprobe_thread_sample). Returns -EINVAL if s is NULL or not a
 * RAW sample with a stack copy, -ENOBUFS if s has no frame storage. Reads only the copy and the code/unwind data
 * of loaded images: the images must still be loaded (capture and unwind in
 * the same process, soon after). Thread-safe for distinct samples; NOT
 * async-signal-safe (RtlLookupFunctionEntry may take the loader's lock).
 */
SPROBE_API
int sprobe_unwind_pe(struct sprobe_thread_sample *s);

/*
 * sprobe_unwind_pe() on every captured (RAW) sample of snap, then
 * sprobe_snapshot__set_frames_resolved(snap, true). Dropped samples are left
 * alone. Returns 0 or -EINVAL for NULL. Not thread-safe against a capture
 * into the same snapshot; NOT async-signal-safe.
 */
SPROBE_API
int sprobe_snapshot__unwind_pe(struct sprobe_snapshot *snap);

#endif /* _WIN32 */

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_WIN_H */
