/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * SPROBE_API: the mark of a public function.
 *
 * The library is compiled with -fvisibility=hidden, so a function is
 * exported from libstackprobe.so only when its declaration in a public
 * header carries SPROBE_API (and userspace/libstackprobe.map lets it
 * through). Everything else -- the ro_* report helpers, the private
 * sprobe_* functions shared between the library's files -- stays inside
 * the library: the agent is LD_PRELOADed ahead of every library of the
 * profiled program, and an exported internal would replace the program's
 * own function of the same name. tests/exports_test.sh derives the allowed
 * export list from these marks.
 *
 * Windows (mingw) builds a static library only, and a PE image exports
 * by __declspec(dllexport), not by ELF visibility: the mark is empty
 * there. A DLL build would define SPROBE_API as __declspec(dllexport) (or
 * dllimport for its users) before including the headers: a definition
 * made beforehand overrides the default on every platform.
 */
#ifndef STACKPROBE_API_H
#define STACKPROBE_API_H

#ifndef SPROBE_API
#if defined(_WIN32) || defined(__CYGWIN__)
#define SPROBE_API
#elif defined(__GNUC__) || defined(__clang__)
#define SPROBE_API __attribute__((visibility("default")))
#else
#define SPROBE_API
#endif
#endif

#endif /* STACKPROBE_API_H */
