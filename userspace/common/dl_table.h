/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A table of a library's functions, filled by dlopen on first use
 * (dl_table.c): the one loader behind libunwind_dl.h, libelf_dl.h,
 * libdw_dl.h, zlib_dl.h and libbpf_dl.h.
 *
 * Why: libstackprobe.so is preloaded into every program `record` runs and
 * links only libc; each library it can use is opened when first needed
 * (docs/PERFORMANCE.md, "Memory, what does not grow with threads"). Each of those headers
 * declares its table (a struct of function pointers, one per name of its
 * X-macro list, in that order) and a struct sprobe_dl describing it.
 *
 * Contract: sprobe__dl_load() opens the library once per process
 * (RTLD_NOW | RTLD_LOCAL: its symbols stay out of the program's
 * namespace; never closed: the table and handles made through it point
 * into it for the process's life), looks every name up, and fills the
 * table only if all are there, then runs post() if set (0 or -errno).
 * Later calls return the first call's result at the cost of one acquire
 * load. After a 0 return the table is valid in the calling thread.
 * sprobe__dl_failed() never loads. Thread-safe; not async-signal-safe.
 */
#ifndef SPROBE_COMMON_DL_TABLE_H
#define SPROBE_COMMON_DL_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct sprobe_dl {
	const char *soname;
	const char *const *names; /* n names, the table's order */
	size_t n;
	void *table;		  /* n function pointers, filled once */
	int (*post)(void);	  /* after the table is filled, or NULL */
	/* private */
	pthread_mutex_t lock;
	_Atomic int state;	  /* 0 not tried, 1 loaded, -errno failed */
	char why[160];		  /* dlerror() of the failure */
};

/* Stringify after expansion: a name that is a macro (libunwind's
 * unw_init_remote is _Ux86_64_init_remote) is looked up by what it
 * expands to. */
#define SPROBE_DL_STR2(x) #x
#define SPROBE_DL_NAME(f) SPROBE_DL_STR2(f),

#define SPROBE_DL_INIT(so, names_, table_, post_)                                      \
	{ .soname = (so), .names = (names_), .n = sizeof(names_) / sizeof((names_)[0]), \
	  .table = (table_), .post = (post_), .lock = PTHREAD_MUTEX_INITIALIZER }

/* 0, or -ENOSYS (no library, a name missing) or post()'s -errno. why (may
 * be NULL) gets a one-line reason on failure, NULL on success. */
int sprobe__dl_load(struct sprobe_dl *d, const char **why);

/* Was a load tried and did it fail? */
bool sprobe__dl_failed(struct sprobe_dl *d);

/* dlopen(name, flags), counted: every dlopen of the library's own goes
 * through here, so that sprobe__dl_busy() can tell whether one of its
 * threads waits in the dynamic loader (its lock is held through a
 * library's constructors: the sampler's stop gives up waiting for a probe
 * stuck there, sampler.h). */
void *sprobe__dl_open(const char *name, int flags);

/* Is a thread of ours inside sprobe__dl_open() now? */
bool sprobe__dl_busy(void);

#endif /* SPROBE_COMMON_DL_TABLE_H */
