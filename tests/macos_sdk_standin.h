/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * macos_sdk_standin.h -- a STAND-IN for the macOS SDK. IT IS NOT THE SDK.
 *
 * No macOS SDK exists on the machines that build stackprobe, so
 * `make check-macos` (mk/macos.mk) syntax-checks the macOS sources with
 * `clang --target={arm64,x86_64}-apple-macos11 -fsyntax-only` against this
 * file. Each system header those sources include (<mach/mach.h>, <pthread.h>,
 * <errno.h>, ...) is a generated one-line file under build/macos-standin/
 * that includes this one, and the host's own C headers are kept out
 * (-nostdlibinc), so a macOS source that reached for a Linux-only header
 * fails the check.
 *
 * It declares only what stackprobe's macOS code uses, with the types and
 * values documented for the SDK (Darwin's errno numbers, Mach's typedefs and
 * thread-state layouts, dyld's functions). Passing the check means: the code
 * is well-formed C and calls these functions with these types. It does NOT
 * mean the code builds with the real SDK, and it says nothing about
 * behaviour: the CI workflow (.github/workflows/ci.yml) builds and tests on
 * real macOS hosts. When the two disagree, the SDK is right and this file
 * is wrong.
 */
#ifndef SPROBE_MACOS_SDK_STANDIN_H
#define SPROBE_MACOS_SDK_STANDIN_H

#if !defined(__APPLE__) || !defined(__MACH__)
#error "macos_sdk_standin.h is only for clang --target=<arch>-apple-macos* syntax checks"
#endif
#if !defined(__x86_64__) && !defined(__arm64__)
#error "the stand-in describes x86_64 and arm64 only"
#endif

/* From clang's own resource directory, not the host's libc. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- <sys/types.h> ------------------------------------------------------ */
typedef int pid_t;			/* __darwin_pid_t = __int32_t */
typedef long ssize_t;			/* __darwin_ssize_t */
typedef long long off_t;		/* __darwin_off_t = __int64_t */
typedef unsigned int uid_t;		/* __darwin_uid_t = __uint32_t */
typedef unsigned int gid_t;
typedef unsigned short mode_t;		/* __darwin_mode_t = __uint16_t */
typedef long time_t;			/* __darwin_time_t */

/* ---- <errno.h>: Darwin's numbers, not Linux's ---------------------------- */
extern int *__error(void);
#define errno (*__error())
#define EPERM 1
#define ENOENT 2
#define ESRCH 3
#define EINTR 4
#define EIO 5
#define ENOMEM 12
#define EACCES 13
#define EFAULT 14
#define EBUSY 16
#define EEXIST 17
#define EINVAL 22
#define EMFILE 24
#define ENOSPC 28
#define ERANGE 34
#define EAGAIN 35
#define ENOTSUP 45
#define ETIMEDOUT 60
#define EOVERFLOW 84
#define ENODATA 96
#define EPROTO 100

/* ---- <string.h>, <stdlib.h>, <stdio.h>, <unistd.h> ---------------------- */
void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *b, int c, size_t len);
int memcmp(const void *a, const void *b, size_t n);
void *memchr(const void *s, int c, size_t n);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
size_t strlen(const char *s);
char *strerror(int errnum);
void *malloc(size_t size);
void *calloc(size_t count, size_t size);
void *realloc(void *ptr, size_t size);
void free(void *ptr);
void qsort(void *base, size_t nel, size_t width, int (*compar)(const void *, const void *));
char *getenv(const char *name);
void abort(void);
int printf(const char *fmt, ...);
int snprintf(char *str, size_t size, const char *fmt, ...);
pid_t getpid(void);
int sched_yield(void);			/* <sched.h> */

/* ---- <time.h> ----------------------------------------------------------- */
struct timespec {
	time_t tv_sec;
	long tv_nsec;
};
typedef enum {
	_CLOCK_REALTIME = 0,
	_CLOCK_MONOTONIC = 6,
	_CLOCK_MONOTONIC_RAW = 4,
	_CLOCK_UPTIME_RAW = 8,
} clockid_t;
#define CLOCK_REALTIME _CLOCK_REALTIME
#define CLOCK_MONOTONIC _CLOCK_MONOTONIC
int clock_gettime(clockid_t clock_id, struct timespec *tp);

/* ---- <setjmp.h> (cmocka needs it) ---------------------------------------- */
#if defined(__x86_64__)
typedef int jmp_buf[((9 * 2) + 3 + 16)];
#else
typedef int jmp_buf[((14 + 8 + 2) * 2)];
#endif
int setjmp(jmp_buf env);
void longjmp(jmp_buf env, int val) __attribute__((noreturn));

/* ---- <mach/...>: types ---------------------------------------------------- */
typedef unsigned int natural_t;			/* __darwin_natural_t */
typedef int integer_t;
typedef natural_t mach_port_name_t;
typedef mach_port_name_t mach_port_t;		/* __darwin_mach_port_t */
typedef mach_port_t ipc_space_t;
typedef mach_port_t task_t;
typedef mach_port_t task_inspect_t;
typedef mach_port_t thread_t;
typedef mach_port_t thread_act_t;
typedef mach_port_t thread_inspect_t;
typedef mach_port_t thread_read_t;
typedef mach_port_t vm_map_t;
typedef mach_port_t vm_map_read_t;
typedef thread_act_t *thread_act_array_t;
typedef int kern_return_t;
typedef natural_t mach_msg_type_number_t;
typedef uintptr_t vm_offset_t;
typedef vm_offset_t vm_address_t;
typedef uintptr_t vm_size_t;
typedef uint64_t mach_vm_address_t;
typedef uint64_t mach_vm_size_t;
typedef int thread_state_flavor_t;
typedef natural_t *thread_state_t;
typedef natural_t thread_flavor_t;
typedef integer_t *thread_info_t;
typedef integer_t cpu_type_t;
typedef integer_t cpu_subtype_t;

#define MACH_PORT_NULL 0
#define KERN_SUCCESS 0
#define KERN_INVALID_ADDRESS 1
#define KERN_PROTECTION_FAILURE 2
#define KERN_INVALID_ARGUMENT 4
#define KERN_FAILURE 5
#define KERN_RESOURCE_SHORTAGE 6
#define KERN_NO_ACCESS 8
#define KERN_TERMINATED 37
#define MACH_SEND_INVALID_DEST 0x10000003

/* ---- <mach/mach.h>: calls ------------------------------------------------- */
extern mach_port_t mach_task_self_;
#define mach_task_self() mach_task_self_
mach_port_t mach_thread_self(void);
kern_return_t task_threads(task_inspect_t target_task, thread_act_array_t *act_list,
			   mach_msg_type_number_t *act_listCnt);
kern_return_t thread_suspend(thread_read_t target_act);
kern_return_t thread_resume(thread_read_t target_act);
kern_return_t thread_get_state(thread_read_t target_act, thread_state_flavor_t flavor,
			       thread_state_t old_state, mach_msg_type_number_t *old_stateCnt);
kern_return_t thread_info(thread_inspect_t target_act, thread_flavor_t flavor,
			  thread_info_t thread_info_out, mach_msg_type_number_t *thread_info_outCnt);
kern_return_t mach_port_deallocate(ipc_space_t task, mach_port_name_t name);
kern_return_t vm_deallocate(vm_map_t target_task, vm_address_t address, vm_size_t size);

/* <mach/thread_info.h> */
#define THREAD_IDENTIFIER_INFO 4
struct thread_identifier_info {
	uint64_t thread_id;
	uint64_t thread_handle;
	uint64_t dispatch_qaddr;
};
typedef struct thread_identifier_info thread_identifier_info_data_t;
typedef struct thread_identifier_info *thread_identifier_info_t;
#define THREAD_IDENTIFIER_INFO_COUNT \
	((mach_msg_type_number_t)(sizeof(thread_identifier_info_data_t) / sizeof(natural_t)))

/* <mach/mach_vm.h> */
kern_return_t mach_vm_read_overwrite(vm_map_read_t target_task, mach_vm_address_t address,
				     mach_vm_size_t size, mach_vm_address_t data,
				     mach_vm_size_t *outsize);

/* <mach/mach_time.h> */
struct mach_timebase_info {
	uint32_t numer;
	uint32_t denom;
};
typedef struct mach_timebase_info *mach_timebase_info_t;
typedef struct mach_timebase_info mach_timebase_info_data_t;
kern_return_t mach_timebase_info(mach_timebase_info_t info);
uint64_t mach_absolute_time(void);

/* <mach/{i386,arm}/_structs.h>, <mach/{i386,arm}/thread_status.h> */
#if defined(__x86_64__)
typedef struct {
	uint64_t __rax, __rbx, __rcx, __rdx, __rdi, __rsi, __rbp, __rsp;
	uint64_t __r8, __r9, __r10, __r11, __r12, __r13, __r14, __r15;
	uint64_t __rip, __rflags, __cs, __fs, __gs;
} x86_thread_state64_t;
#define x86_THREAD_STATE64 4
#define x86_THREAD_STATE64_COUNT \
	((mach_msg_type_number_t)(sizeof(x86_thread_state64_t) / sizeof(int)))
#else
/* The non-arm64e layout (arm64e makes fp/lr/sp/pc opaque: use the macros). */
typedef struct {
	uint64_t __x[29];
	uint64_t __fp;
	uint64_t __lr;
	uint64_t __sp;
	uint64_t __pc;
	uint32_t __cpsr;
	uint32_t __pad;
} arm_thread_state64_t;
#define ARM_THREAD_STATE64 6
#define ARM_THREAD_STATE64_COUNT \
	((mach_msg_type_number_t)(sizeof(arm_thread_state64_t) / sizeof(uint32_t)))
#define arm_thread_state64_get_pc(ts) ((uintptr_t)((ts).__pc))
#define arm_thread_state64_get_lr(ts) ((uintptr_t)((ts).__lr))
#define arm_thread_state64_get_sp(ts) ((uintptr_t)((ts).__sp))
#define arm_thread_state64_get_fp(ts) ((uintptr_t)((ts).__fp))
#endif

/* ---- <pthread.h> ---------------------------------------------------------- */
typedef struct _opaque_pthread_t *pthread_t;
typedef struct { long __sig; char __opaque[56]; } pthread_attr_t;
typedef struct { long __sig; char __opaque[56]; } pthread_mutex_t;
typedef struct { long __sig; char __opaque[8]; } pthread_mutexattr_t;
#define PTHREAD_MUTEX_INITIALIZER { 0x32AAABA7, { 0 } }
int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
		   void *arg);
int pthread_join(pthread_t thread, void **value);
pthread_t pthread_self(void);
int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr);
int pthread_mutex_destroy(pthread_mutex_t *m);
int pthread_mutex_lock(pthread_mutex_t *m);
int pthread_mutex_unlock(pthread_mutex_t *m);
/* The _np ("not portable") calls macOS documents in <pthread.h>. */
pthread_t pthread_from_mach_thread_np(mach_port_t port);
mach_port_t pthread_mach_thread_np(pthread_t thread);
void *pthread_get_stackaddr_np(pthread_t thread);
size_t pthread_get_stacksize_np(pthread_t thread);
int pthread_threadid_np(pthread_t thread, uint64_t *thread_id);

/* ---- <mach-o/loader.h>, <mach-o/dyld.h> --------------------------------- */
struct mach_header {
	uint32_t magic;
	cpu_type_t cputype;
	cpu_subtype_t cpusubtype;
	uint32_t filetype;
	uint32_t ncmds;
	uint32_t sizeofcmds;
	uint32_t flags;
};
uint32_t _dyld_image_count(void);
const struct mach_header *_dyld_get_image_header(uint32_t image_index);
intptr_t _dyld_get_image_vmaddr_slide(uint32_t image_index);
const char *_dyld_get_image_name(uint32_t image_index);

#endif /* SPROBE_MACOS_SDK_STANDIN_H */
