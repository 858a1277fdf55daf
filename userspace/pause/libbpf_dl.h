/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libbpf through dlopen, for the companion's loader (pause.c) only.
 *
 * Why: libstackprobe.so is preloaded into every program `record` runs, and
 * the agent in that program never loads BPF (the companion is loaded by
 * the `record` process). Linked, libbpf.so.1 was mapped into each of them
 * anyway (~140 kB of RSS at start: its text faulted around, its relocated
 * data; docs/PERFORMANCE.md, "Memory, what does not grow with threads"). So the shared library
 * does not link libbpf; the companion opens libbpf.so.1 on its first use
 * (sprobe_pause__probe / __new), and every libbpf call in pause.c goes
 * through one table filled then. Programs linked with -lbpf (the CLI, the
 * tests) get the copy already loaded.
 *
 * Include this header instead of the libbpf headers, before the skeleton:
 * after it, the libbpf names pause.c and pause.skel.h call are macros that
 * read the table (their declarations, included first, stay untouched).
 * A call through the table before sprobe__libbpf_load() returned 0 is a
 * NULL call: every entry point loads first.
 */
#ifndef SPROBE_PAUSE_LIBBPF_DL_H
#define SPROBE_PAUSE_LIBBPF_DL_H

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <bpf/libbpf_version.h>

/* The soname opened: the major version the headers are from. */
#if LIBBPF_MAJOR_VERSION != 1
#error "libbpf_dl.h opens libbpf.so.1: update the soname for this libbpf"
#endif
#define SPROBE_LIBBPF_SONAME "libbpf.so.1"

/* Every libbpf function pause.c and its skeleton call. */
#define SPROBE_LIBBPF_FNS(X)                                                              \
	X(bpf_map__fd) X(bpf_map__set_max_entries) X(bpf_map__update_elem)                    \
	X(bpf_obj_get_info_by_fd) X(bpf_object__open_skeleton) X(bpf_object__load_skeleton)  \
	X(bpf_object__attach_skeleton) X(bpf_object__detach_skeleton)                        \
	X(bpf_object__destroy_skeleton) X(bpf_program__fd) X(bpf_program__set_autoattach)    \
	X(btf__load_vmlinux_btf) X(btf__find_by_name_kind) X(btf__type_by_id) X(btf__free)  \
	X(libbpf_probe_bpf_prog_type) X(libbpf_probe_bpf_map_type) X(libbpf_set_print)       \
	X(ring_buffer__new) X(ring_buffer__poll) X(ring_buffer__consume) X(ring_buffer__free)

struct sprobe_libbpf {
#define SPROBE_LIBBPF_PTR(f) __typeof__(f) *f;
	SPROBE_LIBBPF_FNS(SPROBE_LIBBPF_PTR)
#undef SPROBE_LIBBPF_PTR
};

/* Filled by sprobe__libbpf_load(); read-only after. */
extern struct sprobe_libbpf sprobe__libbpf;

/* Open libbpf and fill the table, once per process (later calls return
 * the first call's result). Returns 0, or -ENOSYS: no libbpf.so.1, or one
 * of its functions missing (dlerror()'s message in *why if why is not NULL:
 * static storage, set once). Thread-safe; not
 * async-signal-safe (dlopen). */
int sprobe__libbpf_load(const char **why);

#ifndef SPROBE_LIBBPF_DL_IMPL
#define bpf_map__fd (sprobe__libbpf.bpf_map__fd)
#define bpf_map__set_max_entries (sprobe__libbpf.bpf_map__set_max_entries)
#define bpf_map__update_elem (sprobe__libbpf.bpf_map__update_elem)
#define bpf_obj_get_info_by_fd (sprobe__libbpf.bpf_obj_get_info_by_fd)
#define bpf_object__open_skeleton (sprobe__libbpf.bpf_object__open_skeleton)
#define bpf_object__load_skeleton (sprobe__libbpf.bpf_object__load_skeleton)
#define bpf_object__attach_skeleton (sprobe__libbpf.bpf_object__attach_skeleton)
#define bpf_object__detach_skeleton (sprobe__libbpf.bpf_object__detach_skeleton)
#define bpf_object__destroy_skeleton (sprobe__libbpf.bpf_object__destroy_skeleton)
#define bpf_program__fd (sprobe__libbpf.bpf_program__fd)
#define bpf_program__set_autoattach (sprobe__libbpf.bpf_program__set_autoattach)
#define btf__load_vmlinux_btf (sprobe__libbpf.btf__load_vmlinux_btf)
#define btf__find_by_name_kind (sprobe__libbpf.btf__find_by_name_kind)
#define btf__type_by_id (sprobe__libbpf.btf__type_by_id)
#define btf__free (sprobe__libbpf.btf__free)
#define libbpf_probe_bpf_prog_type (sprobe__libbpf.libbpf_probe_bpf_prog_type)
#define libbpf_probe_bpf_map_type (sprobe__libbpf.libbpf_probe_bpf_map_type)
#define libbpf_set_print (sprobe__libbpf.libbpf_set_print)
#define ring_buffer__new (sprobe__libbpf.ring_buffer__new)
#define ring_buffer__poll (sprobe__libbpf.ring_buffer__poll)
#define ring_buffer__consume (sprobe__libbpf.ring_buffer__consume)
#define ring_buffer__free (sprobe__libbpf.ring_buffer__free)
#endif

#endif /* SPROBE_PAUSE_LIBBPF_DL_H */
