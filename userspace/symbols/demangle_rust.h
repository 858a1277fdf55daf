/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Rust symbol demangling, both manglings rustc emits:
 *   - legacy: "_ZN" {<len><ident>} "17h" <16 hex digits> "E", an Itanium
 *     nested name whose last element is a hash and whose identifiers carry
 *     "$LT$"/"$u7b$"-style escapes and ".." for "::";
 *   - v0 (RFC 2603, `-C symbol-mangling-version=v0`): "_R" <path> ...
 *
 * The output is what perf, gdb, `nm -C` and rustc-demangle's "{:#}" print:
 * no hash, no crate disambiguators ("std::rt::lang_start", not
 * "std[d6d3ed0fd5e4d8a1]::rt::lang_start"), generic arguments and closures
 * as Rust writes them ("<T as core::ops::Fn<()>>::call", "{closure#0}").
 * A ".llvm.<hex>" suffix (LLVM's ThinLTO renaming) is dropped; other "."
 * suffixes (".cold") are kept.
 *
 * Not async-signal-safe (allocates). Thread-safe (no shared state).
 */
#ifndef SPROBE_DEMANGLE_RUST_H
#define SPROBE_DEMANGLE_RUST_H

#include <stdbool.h>

/* True when name is a legacy Rust symbol (an Itanium nested name whose last
 * element is "h" + 16 hex digits) or a v0 one ("_R" + an uppercase tag).
 * Cheap: no allocation, reads name once. */
bool sprobe__rust_is_mangled(const char *name);

/*
 * The demangled form of name (see the top of this file). Returns a string
 * the caller frees, or NULL with errno EINVAL (not a Rust symbol, or
 * malformed: a hostile or truncated name never reads past its NUL and is
 * bounded in recursion depth and output size), or ENOMEM.
 */
char *sprobe__rust_demangle(const char *name);

#endif
