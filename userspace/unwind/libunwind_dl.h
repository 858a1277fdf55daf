/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libunwind (the remote-capable libunwind-<arch>) through dlopen, for the
 * unwinder (unwind.c, access.c). Included at the end of unwind_internal.h.
 *
 * Why: libstackprobe.so is preloaded into every program `record` runs, and
 * an agent whose threads never run (cpu mode in a program that sleeps)
 * never walks a stack. Linked, libunwind-<arch>.so.8, libunwind.so.8 and
 * the liblzma they pull in were mapped anyway (~180 kB of RSS: their text
 * faulted around at load; docs/PERFORMANCE.md, "Memory, what does not grow with threads"). So
 * the shared library does not link them: the unwinder's first walk
 * (unwinder_as() in unwind.c) opens the library. Programs linked with
 * -lunwind-generic get the copy already loaded.
 *
 * After this header the unw_* names the unwinder calls (and
 * SEARCH_UNWIND_TABLE) read one table. A call before
 * sprobe__libunwind_load() returned 0 is a NULL call: every other call
 * takes the address space or a cursor made from it, which needs the load.
 */
#ifndef SPROBE_UNWIND_LIBUNWIND_DL_H
#define SPROBE_UNWIND_LIBUNWIND_DL_H

#include <libunwind.h>

#if defined(__x86_64__)
#define SPROBE_LIBUNWIND_SONAME "libunwind-x86_64.so.8"
#elif defined(__aarch64__)
#define SPROBE_LIBUNWIND_SONAME "libunwind-aarch64.so.8"
#else
#error "libunwind_dl.h: no libunwind soname for this architecture (x86_64 and aarch64 only)"
#endif

/* unw_* are macros for the target's names (_Ux86_64_init_remote...);
 * the table's members get those names. */
#define SPROBE_LIBUNWIND_FNS(X)                                                        \
	X(unw_create_addr_space) X(unw_destroy_addr_space) X(unw_set_caching_policy)     \
	X(unw_init_remote) X(unw_get_reg) X(unw_is_signal_frame) X(unw_reg_states_iterate) \
	X(unw_apply_reg_state) X(SEARCH_UNWIND_TABLE)

#define SPROBE_LIBUNWIND_PTR(f) __typeof__(f) *f;
struct sprobe_libunwind {
	SPROBE_LIBUNWIND_FNS(SPROBE_LIBUNWIND_PTR)
};
#undef SPROBE_LIBUNWIND_PTR

/* Filled by sprobe__libunwind_load(); read-only after. */
extern struct sprobe_libunwind sprobe__libunwind;

/* Open libunwind-<arch> and fill the table, once per process (later calls
 * return the first call's result). Returns 0, or -ENOSYS: no such
 * library, or one of its functions missing. Thread-safe; not
 * async-signal-safe (dlopen). */
int sprobe__libunwind_load(void);

#ifndef SPROBE_LIBUNWIND_DL_IMPL
#undef unw_create_addr_space
#undef unw_destroy_addr_space
#undef unw_set_caching_policy
#undef unw_init_remote
#undef unw_get_reg
#undef unw_is_signal_frame
#undef unw_reg_states_iterate
#undef unw_apply_reg_state
#define unw_create_addr_space (sprobe__libunwind.UNW_OBJ(create_addr_space))
#define unw_destroy_addr_space (sprobe__libunwind.UNW_OBJ(destroy_addr_space))
#define unw_set_caching_policy (sprobe__libunwind.UNW_OBJ(set_caching_policy))
#define unw_init_remote (sprobe__libunwind.UNW_OBJ(init_remote))
#define unw_get_reg (sprobe__libunwind.UNW_OBJ(get_reg))
#define unw_is_signal_frame (sprobe__libunwind.UNW_OBJ(is_signal_frame))
#define unw_reg_states_iterate (sprobe__libunwind.UNW_OBJ(reg_states_iterate))
#define unw_apply_reg_state (sprobe__libunwind.UNW_OBJ(apply_reg_state))
#endif

#endif /* SPROBE_UNWIND_LIBUNWIND_DL_H */
