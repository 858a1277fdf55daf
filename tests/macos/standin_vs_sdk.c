/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Built and run by `make test` on a macOS host, and syntax-checked here by
 * `make check-macos-sdk` against Apple's headers as zig ships them: checks
 * that the values and layouts tests/macos_sdk_standin.h declares for the
 * syntax check on Linux agree with the SDK. Compiling is most of the test:
 * every _Static_assert below names a claim the stand-in makes; main()
 * checks the few that are not constant expressions. When one fails, fix the
 * stand-in (the SDK is right).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <mach/mach.h>
#include <mach/mach_time.h>
#include <mach/mach_vm.h>
#include <mach-o/dyld.h>
#include <mach-o/loader.h>

#define SAME(a, b) _Static_assert((a) == (b), #a " == " #b)

/* errno numbers the stand-in defines. */
SAME(EPERM, 1); SAME(ENOENT, 2); SAME(ESRCH, 3); SAME(EINTR, 4); SAME(EIO, 5);
SAME(ENOMEM, 12); SAME(EACCES, 13); SAME(EFAULT, 14); SAME(EBUSY, 16);
SAME(EEXIST, 17); SAME(EINVAL, 22); SAME(EMFILE, 24); SAME(ENOSPC, 28);
SAME(ERANGE, 34); SAME(EAGAIN, 35); SAME(ENOTSUP, 45); SAME(ETIMEDOUT, 60);
SAME(EOVERFLOW, 84); SAME(ENODATA, 96); SAME(EPROTO, 100);
SAME(ENXIO, 6); SAME(E2BIG, 7); SAME(ENOEXEC, 8); SAME(EBADF, 9); SAME(ECHILD, 10);
SAME(EDEADLK, 11); SAME(EXDEV, 18); SAME(ENODEV, 19); SAME(ENOTDIR, 20); SAME(EISDIR, 21);
SAME(ENFILE, 23); SAME(ENOTTY, 25); SAME(ETXTBSY, 26); SAME(EFBIG, 27); SAME(ESPIPE, 29);
SAME(EROFS, 30); SAME(EMLINK, 31); SAME(EPIPE, 32); SAME(EDOM, 33); SAME(EWOULDBLOCK, EAGAIN);
SAME(EINPROGRESS, 36); SAME(EALREADY, 37); SAME(EPROTONOSUPPORT, 43); SAME(ELOOP, 62);
SAME(ENAMETOOLONG, 63); SAME(ENOTEMPTY, 66); SAME(ESTALE, 70); SAME(ENOLCK, 77);
SAME(ENOSYS, 78); SAME(ECANCELED, 89); SAME(EILSEQ, 92); SAME(EBADMSG, 94); SAME(ETIME, 101);
SAME(EOPNOTSUPP, 102);
SAME(CLOCK_REALTIME, 0); SAME(CLOCK_MONOTONIC, 6);
SAME(CLOCK_MONOTONIC_RAW, 4); SAME(CLOCK_UPTIME_RAW, 8);

/* libc: open() flags, F_PREALLOCATE (Darwin's posix_fallocate), mmap, stat. */
SAME(O_RDONLY, 0); SAME(O_WRONLY, 1); SAME(O_RDWR, 2); SAME(O_NONBLOCK, 0x4);
SAME(O_APPEND, 0x8); SAME(O_NOFOLLOW, 0x100); SAME(O_CREAT, 0x200); SAME(O_TRUNC, 0x400);
SAME(O_EXCL, 0x800); SAME(O_DIRECTORY, 0x100000); SAME(O_CLOEXEC, 0x1000000);
SAME(F_GETFD, 1); SAME(F_SETFD, 2); SAME(F_GETFL, 3); SAME(F_SETFL, 4); SAME(FD_CLOEXEC, 1);
SAME(F_PREALLOCATE, 42); SAME(F_ALLOCATECONTIG, 2); SAME(F_ALLOCATEALL, 4);
SAME(F_PEOFPOSMODE, 3); SAME(F_VOLPOSMODE, 4);
SAME(sizeof(fstore_t), 32); SAME(offsetof(fstore_t, fst_length), 16);
SAME(PROT_READ, 1); SAME(PROT_WRITE, 2); SAME(PROT_EXEC, 4); SAME(MAP_SHARED, 1);
SAME(MAP_PRIVATE, 2); SAME(MAP_FIXED, 0x10); SAME(MAP_ANONYMOUS, 0x1000);
SAME(sizeof(struct stat), 144); SAME(offsetof(struct stat, st_ino), 8);
SAME(offsetof(struct stat, st_uid), 16); SAME(offsetof(struct stat, st_size), 96);
SAME(sizeof(off_t), 8); SAME(sizeof(ino_t), 8); SAME(sizeof(dev_t), 4); SAME(sizeof(mode_t), 2);
SAME(S_IFMT, 0170000); SAME(S_IFREG, 0100000); SAME(S_IFDIR, 0040000); SAME(S_IFLNK, 0120000);
SAME(F_OK, 0); SAME(R_OK, 4); SAME(W_OK, 2); SAME(X_OK, 1); SAME(STDOUT_FILENO, 1);
SAME(WNOHANG, 1); SAME(EOF, -1); SAME(SEEK_SET, 0); SAME(SEEK_END, 2);
SAME(SIGINT, 2); SAME(SIGKILL, 9); SAME(SIGBUS, 10); SAME(SIGSEGV, 11); SAME(SIGPIPE, 13);
SAME(SIGALRM, 14); SAME(SIGTERM, 15); SAME(SIGURG, 16); SAME(SIGCHLD, 20); SAME(SIGPROF, 27);
SAME(SIGUSR1, 30); SAME(SIGUSR2, 31);
SAME(no_argument, 0); SAME(required_argument, 1); SAME(optional_argument, 2);
SAME(sizeof(struct option), 32);
SAME(sizeof(struct tm), 56); SAME(offsetof(struct tm, tm_gmtoff), 40);
SAME(sizeof(struct timespec), 16);

/* zlib (the SDK's libz). */
SAME(Z_NO_FLUSH, 0); SAME(Z_FINISH, 4); SAME(Z_OK, 0); SAME(Z_STREAM_END, 1);
SAME(Z_STREAM_ERROR, -2); SAME(Z_BEST_COMPRESSION, 9); SAME(Z_DEFAULT_STRATEGY, 0);
SAME(Z_DEFLATED, 8); SAME(sizeof(z_stream), 112);

/* Mach scalar types and return codes. */
SAME(sizeof(mach_port_t), 4); SAME(sizeof(natural_t), 4);
SAME(sizeof(kern_return_t), 4); SAME(sizeof(mach_msg_type_number_t), 4);
SAME(sizeof(vm_address_t), 8); SAME(sizeof(mach_vm_address_t), 8);
SAME(sizeof(thread_state_flavor_t), 4); SAME(sizeof(pid_t), 4);
SAME(KERN_SUCCESS, 0); SAME(KERN_INVALID_ADDRESS, 1); SAME(KERN_PROTECTION_FAILURE, 2);
SAME(KERN_INVALID_ARGUMENT, 4); SAME(KERN_FAILURE, 5); SAME(KERN_RESOURCE_SHORTAGE, 6);
SAME(KERN_NO_ACCESS, 8); SAME(KERN_TERMINATED, 37); SAME(MACH_SEND_INVALID_DEST, 0x10000003);
SAME(MACH_PORT_NULL, 0);

/* thread_info(THREAD_IDENTIFIER_INFO). */
SAME(THREAD_IDENTIFIER_INFO, 4);
SAME(sizeof(thread_identifier_info_data_t), 24);
SAME(offsetof(thread_identifier_info_data_t, thread_id), 0);
SAME(THREAD_IDENTIFIER_INFO_COUNT, 6);

/* Thread state layouts. */
#if defined(__x86_64__)
SAME(x86_THREAD_STATE64, 4);
SAME(sizeof(x86_thread_state64_t), 21 * 8);
SAME(x86_THREAD_STATE64_COUNT, 42);
SAME(offsetof(x86_thread_state64_t, __rbp), 6 * 8);
SAME(offsetof(x86_thread_state64_t, __rsp), 7 * 8);
SAME(offsetof(x86_thread_state64_t, __rip), 16 * 8);
#else
SAME(ARM_THREAD_STATE64, 6);
SAME(sizeof(arm_thread_state64_t), 29 * 8 + 4 * 8 + 8);
SAME(ARM_THREAD_STATE64_COUNT, 68);
#endif

/* dladdr, timebase, pthread, dyld. */
SAME(sizeof(Dl_info), 32);
SAME(offsetof(Dl_info, dli_saddr), 24);
SAME(sizeof(mach_timebase_info_data_t), 8);
SAME(sizeof(pthread_mutex_t), 64);
SAME(sizeof(struct mach_header), 28);
SAME(sizeof(struct mach_header_64), 32);
SAME(MH_MAGIC_64, 0xfeedfacf);
SAME(LC_SEGMENT_64, 0x19); SAME(LC_SYMTAB, 0x2); SAME(LC_UUID, 0x1b);
SAME(LC_FUNCTION_STARTS, 0x26);
SAME(sizeof(struct segment_command_64), 72);
SAME(sizeof(struct symtab_command), 24);
SAME(sizeof(struct uuid_command), 24);
SAME(sizeof(struct linkedit_data_command), 16);

/* The signatures the stand-in declares, as function pointer types. */
static kern_return_t (*const p_task_threads)(task_inspect_t, thread_act_array_t *,
					     mach_msg_type_number_t *) = task_threads;
static kern_return_t (*const p_get_state)(thread_read_t, thread_state_flavor_t, thread_state_t,
					  mach_msg_type_number_t *) = thread_get_state;
static kern_return_t (*const p_read)(vm_map_read_t, mach_vm_address_t, mach_vm_size_t,
				     mach_vm_address_t, mach_vm_size_t *) = mach_vm_read_overwrite;
static pthread_t (*const p_from_port)(mach_port_t) = pthread_from_mach_thread_np;
static void *(*const p_stackaddr)(pthread_t) = pthread_get_stackaddr_np;
static intptr_t (*const p_slide)(uint32_t) = _dyld_get_image_vmaddr_slide;
static const struct mach_header *(*const p_header)(uint32_t) = _dyld_get_image_header;
/* libc calls whose Darwin signature differs from glibc's. */
static void (*const p_qsort_r)(void *, size_t, size_t, void *,
			       int (*)(void *, const void *, const void *)) = qsort_r;
static int (*const p_setname)(const char *) = pthread_setname_np;
static int (*const p_getopt_long)(int, char *const *, const char *, const struct option *,
				  int *) = getopt_long;
static FILE *(*const p_memstream)(char **, size_t *) = open_memstream;
static int (*const p_fcntl)(int, int, ...) = fcntl;

int main(void)
{
	/* Referenced so the pointers are not unused; never called. */
	if (!(p_task_threads && p_get_state && p_read && p_from_port && p_stackaddr &&
	      p_slide && p_header && p_qsort_r && p_setname && p_getopt_long && p_memstream &&
	      p_fcntl))
		return 1;
	/* Not integer constant expressions: checked when the program runs. */
	if (strcmp(PRIu64, "llu") || strcmp(PRIx64, "llx") || strcmp(ZLIB_VERSION, "1.2.11") < 0)
		return 2;
	/* An lvalue: Darwin's W* macros take the address of their argument. */
	int exited3 = 3 << 8, killed = SIGKILL;

	if (!WIFEXITED(exited3) || WEXITSTATUS(exited3) != 3 || WIFSIGNALED(exited3) ||
	    !WIFSIGNALED(killed) || WTERMSIG(killed) != SIGKILL)
		return 3;
	return MAP_FAILED == (void *)-1 ? 0 : 4;
}
