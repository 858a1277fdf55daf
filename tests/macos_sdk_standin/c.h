/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Part of tests/macos_sdk_standin.h -- a STAND-IN for the macOS SDK, NOT the
 * SDK (see that file): the sections for
 * <errno.h>, <math.h>, <string.h>, <stdlib.h>, <stdio.h>, <unistd.h> and
 * <fcntl.h>.
 * Included by macos_sdk_standin.h only, once per generated forwarding
 * header: no include guard, each section is guarded by its own
 * SPROBE_STANDIN_WANT_/HAVE_ pair.
 */

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
#define ENOBUFS 55
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
