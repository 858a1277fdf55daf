/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * macos_sdk_standin.h -- a STAND-IN for the macOS SDK. IT IS NOT THE SDK.
 *
 * No macOS SDK exists on the machines that build stackprobe, so
 * `make check-macos` (mk/macos.mk) syntax-checks every source the Darwin
 * build compiles (library, CLI, tests) with
 * `clang --target={arm64,x86_64}-apple-macos11 -fsyntax-only` against this
 * file. Each system header those sources include (<stdio.h>, <pthread.h>,
 * <mach/mach.h>, ...) is a generated one-line file under
 * build/macos-standin/ that defines SPROBE_STANDIN_WANT_<header> and
 * includes this one; only the sections for the headers a source included
 * (and those the real header is known to pull in, see "transitive" below)
 * are declared, so a missing #include fails as it would on a Mac. The host's
 * own C headers are kept out (-nostdlibinc), so a header macOS lacks
 * (<linux/futex.h>, <sys/syscall.h>, <link.h>, <gelf.h>) fails too.
 *
 * It declares what Darwin's libc and Mach have and stackprobe's Darwin build
 * uses, with Darwin's types, values and signatures (taken from Apple's
 * macOS 11 headers as zig 0.11 redistributes them; `make check-macos-sdk`
 * compiles tests/macos/standin_vs_sdk.c against those): Darwin's errno
 * numbers and open() flags, BSD qsort_r (context before the comparator),
 * sprintf deprecated (as in the macOS 13+ SDK), and NO posix_fallocate,
 * memfd_create, gettid, futex, epoll, eventfd, process_vm_readv,
 * timer_create or SIGEV_THREAD_ID, which macOS does not have. Passing the
 * check means: the code is well-formed C for both Darwin targets and calls
 * these declarations with these types. It does NOT mean the code builds
 * with the real SDK, and it says nothing about behaviour: the CI workflow
 * (.github/workflows/ci.yml) builds and tests on real macOS hosts, and
 * tests/macos/standin_vs_sdk.c compares these values with the SDK there.
 * When the two disagree, the SDK is right and this file is wrong.
 */
#if !defined(__APPLE__) || !defined(__MACH__)
#error "macos_sdk_standin.h is only for clang --target=<arch>-apple-macos* syntax checks"
#endif
#if !defined(__x86_64__) && !defined(__arm64__)
#error "the stand-in describes x86_64 and arm64 only"
#endif

/* ---- transitive: what the real headers are known to include ------------- */
#ifdef SPROBE_STANDIN_WANT_stdlib_h	/* Darwin's <stdlib.h> includes <sys/wait.h> */
#define SPROBE_STANDIN_WANT_sys_wait_h
#endif
#ifdef SPROBE_STANDIN_WANT_pthread_h	/* <pthread.h> includes <sched.h>, <time.h> */
#define SPROBE_STANDIN_WANT_sched_h
#define SPROBE_STANDIN_WANT_time_h
#endif
#ifdef SPROBE_STANDIN_WANT_zlib_h	/* zconf.h includes <sys/types.h>, <unistd.h> */
#define SPROBE_STANDIN_WANT_unistd_h
#endif
#if defined(SPROBE_STANDIN_WANT_mach_mach_time_h) || defined(SPROBE_STANDIN_WANT_mach_mach_vm_h)
#define SPROBE_STANDIN_WANT_mach_mach_types
#endif
#ifdef SPROBE_STANDIN_WANT_mach_mach_h
#define SPROBE_STANDIN_WANT_mach_mach_types
#endif
#ifdef SPROBE_STANDIN_WANT_mach_o_dyld_h	/* includes <mach-o/loader.h> */
#define SPROBE_STANDIN_WANT_mach_mach_types
#endif

/* ---- common: <sys/_types/...> that nearly every header pulls in ---------- */
#ifndef SPROBE_STANDIN_HAVE_common
#define SPROBE_STANDIN_HAVE_common
/* From clang's own resource directory, not the host's libc. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int pid_t;			/* __darwin_pid_t = __int32_t */
typedef long ssize_t;			/* __darwin_ssize_t */
typedef long long off_t;		/* __darwin_off_t = __int64_t */
typedef unsigned int uid_t;		/* __darwin_uid_t = __uint32_t */
typedef unsigned int gid_t;
typedef unsigned short mode_t;		/* __darwin_mode_t = __uint16_t */
typedef long time_t;			/* __darwin_time_t */
typedef int dev_t;			/* __darwin_dev_t = __int32_t */
typedef unsigned long long ino_t;	/* __darwin_ino64_t (64-bit inodes) */
typedef unsigned short nlink_t;
typedef long long blkcnt_t;
typedef int blksize_t;
typedef unsigned int useconds_t;
typedef unsigned int natural_t;		/* __darwin_natural_t */
typedef natural_t mach_port_name_t;
typedef mach_port_name_t mach_port_t;	/* __darwin_mach_port_t */
struct timespec {
	time_t tv_sec;
	long tv_nsec;
};
#endif

/* ---- the sections, one per header, in three pieces by header group ---- */
#include "macos_sdk_standin/c.h"
#include "macos_sdk_standin/sys.h"
#include "macos_sdk_standin/mach.h"
