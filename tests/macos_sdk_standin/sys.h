/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Part of tests/macos_sdk_standin.h -- a STAND-IN for the macOS SDK, NOT the
 * SDK (see that file): the sections for
 * <sys/resource.h>, <sys/types.h>, <sys/stat.h>, <sys/mman.h>, <sys/wait.h>,
 * <signal.h>, <getopt.h>, <inttypes.h>, <sched.h>, <time.h> and <setjmp.h>.
 * Included by macos_sdk_standin.h only, once per generated forwarding
 * header: no include guard, each section is guarded by its own
 * SPROBE_STANDIN_WANT_/HAVE_ pair.
 */

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
