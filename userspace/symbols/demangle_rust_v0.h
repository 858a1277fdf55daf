/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The v0 half of Rust demangling (demangle_rust_v0.c), which
 * sprobe__rust_demangle() (demangle_rust.h) calls for a "_R" name. Same
 * output rules and bounds as there. Not async-signal-safe (allocates);
 * thread-safe (no shared state).
 */
#ifndef SPROBE_SYMBOLS_DEMANGLE_RUST_V0_H
#define SPROBE_SYMBOLS_DEMANGLE_RUST_V0_H

#include <stddef.h>

/* s[0, n) demangled ("_R" and the rest, without a ".llvm." suffix): a
 * string the caller frees, or NULL with errno EINVAL (malformed, or a
 * cap reached) or ENOMEM. */
char *sprobe__rust_v0_demangle(const char *s, size_t n);

#endif
