/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Zeroed tables that cost memory only where they are written.
 *
 * The agent sizes its per-thread and per-descriptor tables for the worst
 * case (1024 threads, 4096 descriptors) and uses a prefix of them in most
 * programs. calloc() clears heap memory, so every page of such a table was
 * resident from the start (~190 kB at 10 threads, docs/PERFORMANCE.md,
 * "Memory, what does not grow with threads"). These come from an anonymous mapping instead: a
 * page is the kernel's shared zero page until it is first written, and
 * reading it costs nothing.
 *
 * For tables of a page or more, allocated once and freed at the end: each
 * one is an mmap (a system call, and at least one page). Thread-safe; not
 * async-signal-safe. Reading and writing the memory is (a first write is a
 * page fault, served by the kernel).
 */
#ifndef SPROBE_COMMON_ZALLOC_H
#define SPROBE_COMMON_ZALLOC_H

#include <stddef.h>

/* nmemb * size zeroed bytes, 16-byte aligned, as calloc; NULL with errno
 * set (ENOMEM, also on overflow). The caller frees with sprobe__zfree(). */
void *sprobe__zcalloc(size_t nmemb, size_t size);

/* Frees what sprobe__zcalloc() returned; NULL is a no-op. */
void sprobe__zfree(void *p);

#endif /* SPROBE_COMMON_ZALLOC_H */
