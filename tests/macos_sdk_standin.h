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

/* ---- <errno.h>: Darwin's numbers, not Linux's ---------------------------- */
#if defined(SPROBE_STANDIN_WANT_errno_h) && !defined(SPROBE_STANDIN_HAVE_errno_h)
#define SPROBE_STANDIN_HAVE_errno_h
extern int *__error(void);
#define errno (*__error())
#define EPERM 1
#define ENOENT 2
#define ESRCH 3
#define EINTR 4
#define EIO 5
#define ENXIO 6
#define E2BIG 7
#define ENOEXEC 8
#define EBADF 9
#define ECHILD 10
#define EDEADLK 11
#define ENOMEM 12
#define EACCES 13
#define EFAULT 14
#define EBUSY 16
#define EEXIST 17
#define EXDEV 18
#define ENODEV 19
#define ENOTDIR 20
#define EISDIR 21
#define EINVAL 22
#define ENFILE 23
#define EMFILE 24
#define ENOTTY 25
#define ETXTBSY 26
#define EFBIG 27
#define ENOSPC 28
#define ESPIPE 29
#define EROFS 30
#define EMLINK 31
#define EPIPE 32
#define EDOM 33
#define ERANGE 34
#define EAGAIN 35
#define EWOULDBLOCK EAGAIN
#define EINPROGRESS 36
#define EALREADY 37
#define EPROTONOSUPPORT 43
#define ENOTSUP 45
#define ETIMEDOUT 60
#define ELOOP 62
#define ENAMETOOLONG 63
#define ENOTEMPTY 66
#define ESTALE 70
#define EDQUOT 69
#define ENOLCK 77
#define ENOSYS 78
#define EOVERFLOW 84
#define ECANCELED 89
#define EILSEQ 92
#define EBADMSG 94
#define ENODATA 96
#define EPROTO 100
#define ETIME 101
#define EOPNOTSUPP 102
#endif

/* ---- <math.h> -------------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_math_h) && !defined(SPROBE_STANDIN_HAVE_math_h)
#define SPROBE_STANDIN_HAVE_math_h
#define NAN __builtin_nanf("")
#define INFINITY __builtin_inff()
#define isnan(x) __builtin_isnan(x)
#define isinf(x) __builtin_isinf(x)
double sqrt(double x);
double fabs(double x);
double fmax(double x, double y);
double exp(double x);
double log(double x);
double log1p(double x);
double lgamma(double x);
long long llround(double x);
#endif

/* ---- <string.h> ------------------------------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_string_h) && !defined(SPROBE_STANDIN_HAVE_string_h)
#define SPROBE_STANDIN_HAVE_string_h
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *b, int c, size_t len);
int memcmp(const void *a, const void *b, size_t n);
void *memchr(const void *s, int c, size_t n);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
size_t strlen(const char *s);
size_t strnlen(const char *s, size_t maxlen);
char *strcpy(char *dst, const char *src);
char *strncpy(char *dst, const char *src, size_t n);
char *strdup(const char *s);
char *strndup(const char *s, size_t n);
char *strchr(const char *s, int c);
char *strrchr(const char *s, int c);
char *strstr(const char *big, const char *little);
char *strtok_r(char *str, const char *sep, char **lasts);
size_t strspn(const char *s, const char *charset);
size_t strcspn(const char *s, const char *charset);
char *strerror(int errnum);
int strerror_r(int errnum, char *strerrbuf, size_t buflen);	/* XSI: returns int */
#endif

/* ---- <stdlib.h> ------------------------------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_stdlib_h) && !defined(SPROBE_STANDIN_HAVE_stdlib_h)
#define SPROBE_STANDIN_HAVE_stdlib_h
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
void *malloc(size_t size);
void *calloc(size_t count, size_t size);
void *realloc(void *ptr, size_t size);
void free(void *ptr);
void qsort(void *base, size_t nel, size_t width, int (*compar)(const void *, const void *));
/* BSD order: the context comes before the comparator and is passed to it
 * FIRST (glibc's qsort_r has both the other way round). */
void qsort_r(void *base, size_t nel, size_t width, void *thunk,
	     int (*compar)(void *, const void *, const void *));
char *getenv(const char *name);
int setenv(const char *name, const char *value, int overwrite);
int unsetenv(const char *name);
void abort(void) __attribute__((noreturn));
void exit(int status) __attribute__((noreturn));
int atoi(const char *s);
long strtol(const char *s, char **end, int base);
unsigned long strtoul(const char *s, char **end, int base);
long long strtoll(const char *s, char **end, int base);
unsigned long long strtoull(const char *s, char **end, int base);
double strtod(const char *s, char **end);
int mkstemp(char *tmpl);
char *mkdtemp(char *tmpl);
char *realpath(const char *path, char *resolved);
#endif

/* ---- <stdio.h> ------------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_stdio_h) && !defined(SPROBE_STANDIN_HAVE_stdio_h)
#define SPROBE_STANDIN_HAVE_stdio_h
typedef struct __sFILE FILE;		/* opaque here */
extern FILE *__stdinp;
extern FILE *__stdoutp;
extern FILE *__stderrp;
#define stdin __stdinp
#define stdout __stdoutp
#define stderr __stderrp
#define EOF (-1)
#define BUFSIZ 1024
#define SEEK_SET 0
#define SEEK_CUR 1
#define SEEK_END 2
FILE *fopen(const char *path, const char *mode);
FILE *fdopen(int fd, const char *mode);
int fclose(FILE *f);
int fflush(FILE *f);
int ferror(FILE *f);
int feof(FILE *f);
int fileno(FILE *f);
size_t fread(void *ptr, size_t size, size_t n, FILE *f);
size_t fwrite(const void *ptr, size_t size, size_t n, FILE *f);
int fputs(const char *s, FILE *f);
int fputc(int c, FILE *f);
int putc(int c, FILE *f);
int fgetc(FILE *f);
char *fgets(char *s, int n, FILE *f);
int fseeko(FILE *f, off_t off, int whence);
off_t ftello(FILE *f);
int setvbuf(FILE *f, char *buf, int mode, size_t size);
int printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int fprintf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int snprintf(char *str, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int vfprintf(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
int vsnprintf(char *str, size_t size, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
/* Deprecated in the macOS 13 SDK and later: with -Werror, a build error. */
int sprintf(char *str, const char *fmt, ...) __attribute__((format(printf, 2, 3)))
	__attribute__((deprecated("use snprintf (deprecated in the macOS 13 SDK)")));
int vsprintf(char *str, const char *fmt, va_list ap)
	__attribute__((deprecated("use vsnprintf (deprecated in the macOS 13 SDK)")));
int sscanf(const char *s, const char *fmt, ...) __attribute__((format(scanf, 2, 3)));
void perror(const char *s);
FILE *popen(const char *command, const char *mode);
int pclose(FILE *f);
FILE *open_memstream(char **bufp, size_t *sizep);	/* macOS 10.13 */
FILE *tmpfile(void);
int remove(const char *path);
int rename(const char *from, const char *to);
#endif

/* ---- <unistd.h> ------------------------------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_unistd_h) && !defined(SPROBE_STANDIN_HAVE_unistd_h)
#define SPROBE_STANDIN_HAVE_unistd_h
#define STDIN_FILENO 0
#define STDOUT_FILENO 1
#define STDERR_FILENO 2
#define F_OK 0
#define X_OK 1
#define W_OK 2
#define R_OK 4
ssize_t read(int fd, void *buf, size_t n);
ssize_t write(int fd, const void *buf, size_t n);
ssize_t pread(int fd, void *buf, size_t n, off_t off);
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off);
off_t lseek(int fd, off_t off, int whence);
int close(int fd);
int dup(int fd);
int dup2(int fd, int fd2);
int pipe(int fds[2]);
int fsync(int fd);
int ftruncate(int fd, off_t length);
int truncate(const char *path, off_t length);
int unlink(const char *path);
int access(const char *path, int mode);
int symlink(const char *target, const char *path);
ssize_t readlink(const char *path, char *buf, size_t size);
int isatty(int fd);
pid_t getpid(void);
pid_t getppid(void);
uid_t getuid(void);
uid_t geteuid(void);
gid_t getgid(void);
int setuid(uid_t uid);
int setgid(gid_t gid);
pid_t fork(void);
void _exit(int status) __attribute__((noreturn));
int execv(const char *path, char *const argv[]);
int execvp(const char *file, char *const argv[]);
unsigned int alarm(unsigned int seconds);
unsigned int sleep(unsigned int seconds);
int usleep(useconds_t usec);
long sysconf(int name);
int getpagesize(void);
char *getcwd(char *buf, size_t size);
int chdir(const char *path);
int rmdir(const char *path);
/* mkstemp is in <stdlib.h> and <unistd.h> on Darwin. */
int mkstemp(char *tmpl);
#endif

/* ---- <fcntl.h> ------------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_fcntl_h) && !defined(SPROBE_STANDIN_HAVE_fcntl_h)
#define SPROBE_STANDIN_HAVE_fcntl_h
#define O_RDONLY 0x0000
#define O_WRONLY 0x0001
#define O_RDWR 0x0002
#define O_NONBLOCK 0x00000004
#define O_NOCTTY 0x00020000
#define O_APPEND 0x00000008
#define O_NOFOLLOW 0x00000100
#define O_CREAT 0x00000200
#define O_TRUNC 0x00000400
#define O_EXCL 0x00000800
#define O_DIRECTORY 0x00100000
#define O_CLOEXEC 0x01000000
#define F_DUPFD 0
#define F_DUPFD_CLOEXEC 67
#define F_GETFD 1
#define F_SETFD 2
#define F_GETFL 3
#define F_SETFL 4
#define FD_CLOEXEC 1
/* F_PREALLOCATE: Darwin's counterpart of posix_fallocate (which it lacks). */
#define F_PREALLOCATE 42
#define F_ALLOCATECONTIG 0x00000002
#define F_ALLOCATEALL 0x00000004
#define F_PEOFPOSMODE 3
#define F_VOLPOSMODE 4
typedef struct fstore {
	unsigned int fst_flags;
	int fst_posmode;
	off_t fst_offset;
	off_t fst_length;
	off_t fst_bytesalloc;
} fstore_t;
int open(const char *path, int flags, ...);
int openat(int fd, const char *path, int flags, ...);
int fcntl(int fd, int cmd, ...);
#endif

/* ---- <sys/resource.h> ------------------------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_sys_resource_h) && !defined(SPROBE_STANDIN_HAVE_sys_resource_h)
#define SPROBE_STANDIN_HAVE_sys_resource_h
typedef __UINT64_TYPE__ rlim_t;
struct rlimit {
	rlim_t rlim_cur;
	rlim_t rlim_max;
};
#define RLIM_INFINITY (((rlim_t)1 << 63) - 1)
#define RLIMIT_NOFILE 8
int getrlimit(int resource, struct rlimit *rlp);
int setrlimit(int resource, const struct rlimit *rlp);
#endif

/* ---- <sys/types.h> --------------------------------------------------------- */
/* Everything it has that is used is in the common section. */

/* ---- <sys/stat.h> (64-bit inode layout, the default) ----------------------- */
#if defined(SPROBE_STANDIN_WANT_sys_stat_h) && !defined(SPROBE_STANDIN_HAVE_sys_stat_h)
#define SPROBE_STANDIN_HAVE_sys_stat_h
struct stat {
	dev_t st_dev;
	mode_t st_mode;
	nlink_t st_nlink;
	ino_t st_ino;
	uid_t st_uid;
	gid_t st_gid;
	dev_t st_rdev;
	struct timespec st_atimespec;
	struct timespec st_mtimespec;
	struct timespec st_ctimespec;
	struct timespec st_birthtimespec;
	off_t st_size;
	blkcnt_t st_blocks;
	blksize_t st_blksize;
	uint32_t st_flags;
	uint32_t st_gen;
	int32_t st_lspare;
	int64_t st_qspare[2];
};
#define st_atime st_atimespec.tv_sec
#define st_mtime st_mtimespec.tv_sec
#define st_ctime st_ctimespec.tv_sec
#define S_IFMT 0170000
#define S_IFIFO 0010000
#define S_IFDIR 0040000
#define S_IFREG 0100000
#define S_IFLNK 0120000
#define S_ISDIR(m) (((m) & S_IFMT) == S_IFDIR)
#define S_ISREG(m) (((m) & S_IFMT) == S_IFREG)
#define S_ISLNK(m) (((m) & S_IFMT) == S_IFLNK)
#define S_ISFIFO(m) (((m) & S_IFMT) == S_IFIFO)
#define S_IRUSR 0000400
#define S_IWUSR 0000200
#define S_IXUSR 0000100
#define S_IRWXU 0000700
int stat(const char *path, struct stat *st);
int lstat(const char *path, struct stat *st);
int fstat(int fd, struct stat *st);
int chmod(const char *path, mode_t mode);
int fchmod(int fd, mode_t mode);
int mkdir(const char *path, mode_t mode);
int mkfifo(const char *path, mode_t mode);
mode_t umask(mode_t mask);
#endif

/* ---- <sys/mman.h> ---------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_sys_mman_h) && !defined(SPROBE_STANDIN_HAVE_sys_mman_h)
#define SPROBE_STANDIN_HAVE_sys_mman_h
#define PROT_NONE 0x00
#define PROT_READ 0x01
#define PROT_WRITE 0x02
#define PROT_EXEC 0x04
#define MAP_SHARED 0x0001
#define MAP_PRIVATE 0x0002
#define MAP_FIXED 0x0010
#define MAP_ANON 0x1000
#define MAP_ANONYMOUS MAP_ANON
#define MAP_NORESERVE 0x0040 /* Darwin: accepted, "don't check for reservations" */
#define MAP_FAILED ((void *)-1)
#define MADV_NORMAL 0
#define MADV_RANDOM 1
#define MADV_SEQUENTIAL 2
#define MADV_WILLNEED 3
#define MADV_DONTNEED 4
#define MADV_FREE 5
int madvise(void *addr, size_t len, int advice);
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int munmap(void *addr, size_t len);
int mprotect(void *addr, size_t len, int prot);
int msync(void *addr, size_t len, int flags);
int shm_open(const char *name, int oflag, ...);	/* name <= PSHMNAMLEN (31) */
int shm_unlink(const char *name);
#endif

/* ---- <sys/wait.h> ---------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_sys_wait_h) && !defined(SPROBE_STANDIN_HAVE_sys_wait_h)
#define SPROBE_STANDIN_HAVE_sys_wait_h
#define WNOHANG 0x00000001
/* Without _POSIX_C_SOURCE the argument must be an lvalue (union wait). */
#define _W_INT(w) (*(int *)&(w))
#define _WSTATUS(x) (_W_INT(x) & 0177)
#define _WSTOPPED 0177
#define WIFEXITED(x) (_WSTATUS(x) == 0)
#define WEXITSTATUS(x) ((_W_INT(x) >> 8) & 0x000000ff)
#define WIFSIGNALED(x) (_WSTATUS(x) != _WSTOPPED && _WSTATUS(x) != 0)
#define WTERMSIG(x) (_WSTATUS(x))
pid_t wait(int *status);
pid_t waitpid(pid_t pid, int *status, int options);
#endif

/* ---- <signal.h>: Darwin's numbers; no real-time signals (no SIGRTMIN) ------ */
#if defined(SPROBE_STANDIN_WANT_signal_h) && !defined(SPROBE_STANDIN_HAVE_signal_h)
#define SPROBE_STANDIN_HAVE_signal_h
#define SIGHUP 1
#define SIGINT 2
#define SIGQUIT 3
#define SIGABRT 6
#define SIGKILL 9
#define SIGBUS 10
#define SIGSEGV 11
#define SIGPIPE 13
#define SIGALRM 14
#define SIGTERM 15
#define SIGURG 16
#define SIGSTOP 17
#define SIGCONT 19
#define SIGCHLD 20
#define SIGPROF 27
#define SIGUSR1 30
#define SIGUSR2 31
typedef int sig_atomic_t;
typedef void (*sig_t)(int);
#define SIG_DFL ((sig_t)0)
#define SIG_IGN ((sig_t)1)
sig_t signal(int sig, sig_t func);
int kill(pid_t pid, int sig);
int raise(int sig);
#endif

/* ---- <getopt.h> ------------------------------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_getopt_h) && !defined(SPROBE_STANDIN_HAVE_getopt_h)
#define SPROBE_STANDIN_HAVE_getopt_h
#define no_argument 0
#define required_argument 1
#define optional_argument 2
struct option {
	const char *name;
	int has_arg;
	int *flag;
	int val;
};
extern char *optarg;
extern int optind, opterr, optopt, optreset;
int getopt_long(int argc, char *const *argv, const char *optstring,
		const struct option *longopts, int *longindex);
#endif

/* ---- <inttypes.h>: 64-bit types are long long on Darwin -------------------- */
#if defined(SPROBE_STANDIN_WANT_inttypes_h) && !defined(SPROBE_STANDIN_HAVE_inttypes_h)
#define SPROBE_STANDIN_HAVE_inttypes_h
#define PRId32 "d"
#define PRIu32 "u"
#define PRIx32 "x"
#define PRId64 "lld"
#define PRIu64 "llu"
#define PRIx64 "llx"
#define PRIX64 "llX"
#define SCNu64 "llu"
#define SCNx64 "llx"
#endif

/* ---- <sched.h> ------------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_sched_h) && !defined(SPROBE_STANDIN_HAVE_sched_h)
#define SPROBE_STANDIN_HAVE_sched_h
int sched_yield(void);
#endif

/* ---- <time.h> -------------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_time_h) && !defined(SPROBE_STANDIN_HAVE_time_h)
#define SPROBE_STANDIN_HAVE_time_h
struct tm {
	int tm_sec;
	int tm_min;
	int tm_hour;
	int tm_mday;
	int tm_mon;
	int tm_year;
	int tm_wday;
	int tm_yday;
	int tm_isdst;
	long tm_gmtoff;
	char *tm_zone;
};
typedef enum {
	_CLOCK_REALTIME = 0,
	_CLOCK_MONOTONIC = 6,
	_CLOCK_MONOTONIC_RAW = 4,
	_CLOCK_UPTIME_RAW = 8,
} clockid_t;
#define CLOCK_REALTIME _CLOCK_REALTIME
#define CLOCK_MONOTONIC _CLOCK_MONOTONIC
#define CLOCK_MONOTONIC_RAW _CLOCK_MONOTONIC_RAW
#define CLOCK_UPTIME_RAW _CLOCK_UPTIME_RAW
int clock_gettime(clockid_t clock_id, struct timespec *tp);
int nanosleep(const struct timespec *req, struct timespec *rem);
time_t time(time_t *t);
struct tm *gmtime_r(const time_t *t, struct tm *tm);
struct tm *localtime_r(const time_t *t, struct tm *tm);
size_t strftime(char *s, size_t max, const char *fmt, const struct tm *tm);
#endif

/* ---- <setjmp.h> (cmocka needs it) ------------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_setjmp_h) && !defined(SPROBE_STANDIN_HAVE_setjmp_h)
#define SPROBE_STANDIN_HAVE_setjmp_h
#if defined(__x86_64__)
typedef int jmp_buf[((9 * 2) + 3 + 16)];
#else
typedef int jmp_buf[((14 + 8 + 2) * 2)];
#endif
int setjmp(jmp_buf env);
void longjmp(jmp_buf env, int val) __attribute__((noreturn));

#endif

/* ---- <zlib.h> (the SDK's libz, zlib 1.2.11 API) ---------------------------- */
#if defined(SPROBE_STANDIN_WANT_zlib_h) && !defined(SPROBE_STANDIN_HAVE_zlib_h)
#define SPROBE_STANDIN_HAVE_zlib_h
#define ZLIB_VERSION "1.2.11"
typedef unsigned char Bytef;
typedef unsigned int uInt;
typedef unsigned long uLong;
typedef void *voidpf;
typedef voidpf (*alloc_func)(voidpf opaque, uInt items, uInt size);
typedef void (*free_func)(voidpf opaque, voidpf address);
struct internal_state;
typedef struct z_stream_s {
	const Bytef *next_in;
	uInt avail_in;
	uLong total_in;
	Bytef *next_out;
	uInt avail_out;
	uLong total_out;
	const char *msg;
	struct internal_state *state;
	alloc_func zalloc;
	free_func zfree;
	voidpf opaque;
	int data_type;
	uLong adler;
	uLong reserved;
} z_stream;
typedef z_stream *z_streamp;
#define Z_NO_FLUSH 0
#define Z_FINISH 4
#define Z_OK 0
#define Z_STREAM_END 1
#define Z_STREAM_ERROR (-2)
#define Z_BUF_ERROR (-5)
#define Z_BEST_COMPRESSION 9
#define Z_DEFAULT_COMPRESSION (-1)
#define Z_DEFAULT_STRATEGY 0
#define Z_DEFLATED 8
#define Z_NULL 0
#define MAX_WBITS 15
#define MAX_MEM_LEVEL 9
int deflate(z_streamp strm, int flush);
int deflateEnd(z_streamp strm);
int deflateInit2_(z_streamp strm, int level, int method, int windowBits, int memLevel,
		  int strategy, const char *version, int stream_size);
#define deflateInit2(strm, level, method, windowBits, memLevel, strategy) \
	deflateInit2_((strm), (level), (method), (windowBits), (memLevel), (strategy), \
		      ZLIB_VERSION, (int)sizeof(z_stream))
uLong crc32(uLong crc, const Bytef *buf, uInt len);
#endif

/* ---- <mach/...>: types (any mach header) ------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_mach_mach_types) && !defined(SPROBE_STANDIN_HAVE_mach_types)
#define SPROBE_STANDIN_HAVE_mach_types
typedef int integer_t;
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

#endif

/* ---- <mach/mach.h> ------------------------------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_mach_mach_h) && !defined(SPROBE_STANDIN_HAVE_mach_mach_h)
#define SPROBE_STANDIN_HAVE_mach_mach_h
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

#endif

/* ---- <mach/mach_vm.h> --------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_mach_mach_vm_h) && !defined(SPROBE_STANDIN_HAVE_mach_mach_vm_h)
#define SPROBE_STANDIN_HAVE_mach_mach_vm_h
kern_return_t mach_vm_read_overwrite(vm_map_read_t target_task, mach_vm_address_t address,
				     mach_vm_size_t size, mach_vm_address_t data,
				     mach_vm_size_t *outsize);

#endif

/* ---- <mach/mach_time.h> ------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_mach_mach_time_h) && !defined(SPROBE_STANDIN_HAVE_mach_mach_time_h)
#define SPROBE_STANDIN_HAVE_mach_mach_time_h
struct mach_timebase_info {
	uint32_t numer;
	uint32_t denom;
};
typedef struct mach_timebase_info *mach_timebase_info_t;
typedef struct mach_timebase_info mach_timebase_info_data_t;
kern_return_t mach_timebase_info(mach_timebase_info_t info);
uint64_t mach_absolute_time(void);

#endif

/* ---- <pthread.h> -------------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_pthread_h) && !defined(SPROBE_STANDIN_HAVE_pthread_h)
#define SPROBE_STANDIN_HAVE_pthread_h
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

/* One argument: names the calling thread only (glibc's takes a thread). */
int pthread_setname_np(const char *name);
#endif

/* ---- <dlfcn.h> ---------------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_dlfcn_h) && !defined(SPROBE_STANDIN_HAVE_dlfcn_h)
#define SPROBE_STANDIN_HAVE_dlfcn_h
typedef struct dl_info {
	const char *dli_fname;
	void *dli_fbase;
	const char *dli_sname;
	void *dli_saddr;
} Dl_info;
int dladdr(const void *addr, Dl_info *info);

#endif

/* ---- <mach-o/loader.h>, <mach-o/dyld.h> ------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_mach_o_dyld_h) && !defined(SPROBE_STANDIN_HAVE_mach_o_dyld_h)
#define SPROBE_STANDIN_HAVE_mach_o_dyld_h
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

#endif
