/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table backing store on Windows: a file mapping. The logic and the
 * format are in table.c, identical on every OS; this file only creates,
 * opens, maps and removes the object behind it.
 *
 * Two kinds of "path":
 *  - "Local\..." or "Global\..." names a pagefile-backed *named* file
 *    mapping (the default, "Local\stackprobe-<pid>.table"). It lives as
 *    long as a handle to it is open: when the writer process ends, the table
 *    disappears with it, so there are no stale tables to clean up. Readers
 *    open it by name from any process of the same session.
 *  - anything else is a file on disk, mapped through an unnamed mapping.
 *    It persists until removed, like the POSIX file in /dev/shm.
 * The table format checks that the object is exactly as large as its
 * header says. A file has an exact size; a section does not (Windows, and
 * wine, report it rounded up to pages). So a named mapping starts with one
 * allocation-granularity block (64 KiB, the smallest offset a view may
 * start at) holding a small prefix -- magic, version, the exact table size
 * -- and the table bytes, identical to every other OS, follow at offset
 * 64 KiB. Readers check the prefix against the section's (rounded) size
 * before mapping exactly `size` bytes of table.
 *
 * Differences from table_posix.c, by necessity:
 *  - no owner check on open: access is decided by the object's DACL (the
 *    creator's default DACL: the user, SYSTEM, administrators), which the
 *    OS enforces at open time;
 *  - check_size always succeeds: Windows refuses to shrink a file or a
 *    section while a view of it is mapped (ERROR_USER_MAPPED_FILE), so the
 *    size cannot change under a reader.
 */
#ifdef _WIN32

#include <windows.h>
#include <winternl.h>

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "table_os.h"

#ifndef ELOOP
#define ELOOP 114	/* Linux's value; mingw's errno.h lacks it */
#endif

/* ntdll: not declared by the mingw-w64 headers. */
typedef struct {
	PVOID base;
	ULONG attributes;
	LARGE_INTEGER size;
} sprobe_section_basic_info;
NTSTATUS NTAPI NtQuerySection(HANDLE section, int info_class, PVOID info, SIZE_T len,
			      PSIZE_T ret_len);

static int map_win_error(DWORD e)
{
	switch (e) {
	case ERROR_FILE_NOT_FOUND:
	case ERROR_PATH_NOT_FOUND: return -ENOENT;
	case ERROR_FILE_EXISTS:
	case ERROR_ALREADY_EXISTS:
	case ERROR_INVALID_HANDLE: /* the name belongs to another object type */
		return -EEXIST;
	case ERROR_ACCESS_DENIED:
	case ERROR_SHARING_VIOLATION: return -EACCES;
	case ERROR_DISK_FULL:
	case ERROR_HANDLE_DISK_FULL:
	case ERROR_COMMITMENT_LIMIT:
	case ERROR_NOT_ENOUGH_MEMORY:
	case ERROR_OUTOFMEMORY: return -ENOSPC;
	case ERROR_FILENAME_EXCED_RANGE: return -ENAMETOOLONG;
	case ERROR_INVALID_NAME:
	case ERROR_INVALID_PARAMETER: return -EINVAL;
	default: return -EIO;
	}
}

/* The prefix of a named mapping (see the top of the file). */
#define NAMED_PREFIX_BYTES 65536u
#define NAMED_PREFIX_MAGIC 0x54575053u	/* "SPWT" */
struct named_prefix {
	uint32_t magic;		/* written last (release) */
	uint32_t version;	/* 1 */
	uint64_t table_size;	/* exact bytes of table after the prefix */
};

static bool is_named_mapping(const char *path)
{
	return strncmp(path, "Local\\", 6) == 0 || strncmp(path, "Global\\", 7) == 0;
}

/* UTF-8 path -> wide, for the file API. Returns 0 or -errno. */
static int widen(const char *path, WCHAR *out, size_t outlen)
{
	int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, out, (int)outlen);
	if (n > 0)
		return 0;
	return GetLastError() == ERROR_INSUFFICIENT_BUFFER ? -ENAMETOOLONG : -EINVAL;
}

#define WPATH_MAX 32768

int sprobe_table_os__default_path(int pid, char *buf, size_t len)
{
	int n = snprintf(buf, len, "Local\\stackprobe-%d.table", pid);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int map_view(HANDLE mapping, DWORD access, uint64_t off, size_t len, void **base)
{
	void *p = MapViewOfFile(mapping, access, (DWORD)(off >> 32), (DWORD)off, len);
	if (!p)
		return map_win_error(GetLastError());
	*base = p;
	return 0;
}

int sprobe_table_os__reserve(const struct sprobe_table_os *os, const char *path, size_t off,
			     size_t len)
{
	(void)os;
	(void)path;
	(void)off;
	(void)len;
	return 0; /* a pagefile-backed section is committed whole at create */
}

int sprobe_table_os__create(const char *path, size_t size, size_t reserved,
			    struct sprobe_table_os *os, void **base)
{
	DWORD hi = (DWORD)((uint64_t)size >> 32), lo = (DWORD)size;
	HANDLE mapping;
	int err;

	if (size == 0)
		return -EINVAL;
	memset(os, 0, sizeof(*os));
	os->fd = -1;

	if (is_named_mapping(path)) {
		uint64_t total = (uint64_t)size + NAMED_PREFIX_BYTES;
		/* SEC_COMMIT charges the whole size now: a full commit limit
		 * fails here, never on first touch in the profiled process. The
		 * pages start zeroed. */
		mapping = CreateFileMappingA(INVALID_HANDLE_VALUE, NULL, PAGE_READWRITE | SEC_COMMIT,
					     (DWORD)(total >> 32), (DWORD)total, path);
		if (!mapping)
			return map_win_error(GetLastError());
		if (GetLastError() == ERROR_ALREADY_EXISTS) {
			/* Someone else's (or a previous run's) table: not ours
			 * to write into. */
			CloseHandle(mapping);
			return -EEXIST;
		}
	} else {
		WCHAR *wp = HeapAlloc(GetProcessHeap(), 0, WPATH_MAX * sizeof(WCHAR));
		if (!wp)
			return -ENOMEM;
		err = widen(path, wp, WPATH_MAX);
		if (err) {
			HeapFree(GetProcessHeap(), 0, wp);
			return err;
		}
		/* CREATE_NEW fails on any existing name, links included (the
		 * O_EXCL of POSIX). Others may read, nobody else may write. */
		HANDLE file = CreateFileW(wp, GENERIC_READ | GENERIC_WRITE,
					  FILE_SHARE_READ | FILE_SHARE_DELETE, NULL, CREATE_NEW,
					  FILE_ATTRIBUTE_NORMAL, NULL);
		HeapFree(GetProcessHeap(), 0, wp);
		if (file == INVALID_HANDLE_VALUE)
			return map_win_error(GetLastError());
		BY_HANDLE_FILE_INFORMATION fi;
		if (!GetFileInformationByHandle(file, &fi)) {
			err = map_win_error(GetLastError());
			goto fail_file;
		}
		os->dev = fi.dwVolumeSerialNumber;
		os->ino = ((uint64_t)fi.nFileIndexHigh << 32) | fi.nFileIndexLow;
		/* Extending the file through the mapping allocates its space
		 * now (zero-filled): a full disk fails here. */
		mapping = CreateFileMappingW(file, NULL, PAGE_READWRITE, hi, lo, NULL);
		if (!mapping) {
			err = map_win_error(GetLastError());
			goto fail_file;
		}
		/* The mapping keeps the file open; remember how to remove it
		 * if mapping the view fails. */
		os->handle = mapping;
		err = map_view(mapping, FILE_MAP_READ | FILE_MAP_WRITE, 0, 0, base);
		if (err) {
			os->handle = NULL;
			CloseHandle(mapping);
			goto fail_file;
		}
		CloseHandle(file);
		return 0;
fail_file:
		{
			FILE_DISPOSITION_INFO del = { .DeleteFile = TRUE };
			SetFileInformationByHandle(file, FileDispositionInfo, &del, sizeof(del));
		}
		CloseHandle(file);
		return err;
	}
	/* Named mapping: the table view first, then publish the prefix. */
	err = map_view(mapping, FILE_MAP_READ | FILE_MAP_WRITE, NAMED_PREFIX_BYTES, size, base);
	if (err) {
		CloseHandle(mapping);
		return err;
	}
	struct named_prefix *pre = NULL;
	err = map_view(mapping, FILE_MAP_READ | FILE_MAP_WRITE, 0, sizeof(*pre), (void **)&pre);
	if (err) {
		UnmapViewOfFile(*base);
		CloseHandle(mapping);
		return err;
	}
	pre->version = 1;
	pre->table_size = size;
	/* Release; pairs with the acquire load of magic in
	 * sprobe_table_os__open(): a reader that sees the magic sees the
	 * size. */
	__atomic_store_n(&pre->magic, NAMED_PREFIX_MAGIC, __ATOMIC_RELEASE);
	UnmapViewOfFile(pre);
	os->handle = mapping;
	return 0;
}

int sprobe_table_os__open(const char *path, struct sprobe_table_os *os,
			  const void **base, size_t *size, char *err,
			  size_t errlen)
{
	HANDLE mapping;
	uint64_t sz, off = 0;
	void *p = NULL;
	int e;

	memset(os, 0, sizeof(*os));
	os->fd = -1;
	if (is_named_mapping(path)) {
		mapping = OpenFileMappingA(SECTION_QUERY | FILE_MAP_READ, FALSE, path);
		if (!mapping) {
			e = map_win_error(GetLastError());
			sprobe_table__seterr(err, errlen, "cannot open the mapping %s: %s", path,
					     e == -ENOENT ? "no such table (is the writer running?)"
					    : strerror(-e));
			return e;
		}
		sprobe_section_basic_info sbi;
		SIZE_T got = 0;
		memset(&sbi, 0, sizeof(sbi));
		NTSTATUS st = NtQuerySection(mapping, 0 /* SectionBasicInformation */, &sbi,
					     sizeof(sbi), &got);
		if (st < 0 || sbi.size.QuadPart <= 0) {
			CloseHandle(mapping);
			sprobe_table__seterr(err, errlen,
					"cannot query the size of %s (status %#lx)", path,
			       (unsigned long)st);
			return -EIO;
		}
		uint64_t section = (uint64_t)sbi.size.QuadPart;
		const struct named_prefix *pre = NULL;
		if (section < NAMED_PREFIX_BYTES ||
		    map_view(mapping, FILE_MAP_READ, 0, sizeof(*pre), (void **)&pre) != 0) {
			CloseHandle(mapping);
			sprobe_table__seterr(err, errlen,
					"%s is not a stackprobe table mapping", path);
			return -EBADMSG;
		}
		/* Acquire; pairs with the release store in create. */
		uint32_t magic = __atomic_load_n(&pre->magic, __ATOMIC_ACQUIRE);
		uint32_t version = pre->version;
		sz = pre->table_size;
		UnmapViewOfFile(pre);
		if (magic == 0) {
			CloseHandle(mapping);
			sprobe_table__seterr(err, errlen, "%s is still being created: retry", path);
			return -EAGAIN;
		}
		/* The section is the prefix plus the table, rounded up to
		 * pages by the OS: anything else is not what create made. */
		if (magic != NAMED_PREFIX_MAGIC || version != 1 || sz == 0 ||
		    sz > section - NAMED_PREFIX_BYTES ||
		    section - NAMED_PREFIX_BYTES - sz >= NAMED_PREFIX_BYTES) {
			CloseHandle(mapping);
			sprobe_table__seterr(err, errlen,
					"%s: bad mapping prefix (magic %#x, version %u, "
			       "size %llu in a section of %llu)", path, magic, version,
			       (unsigned long long)sz, (unsigned long long)section);
			return -EBADMSG;
		}
		off = NAMED_PREFIX_BYTES;
	} else {
		WCHAR *wp = HeapAlloc(GetProcessHeap(), 0, WPATH_MAX * sizeof(WCHAR));
		if (!wp)
			return -ENOMEM;
		e = widen(path, wp, WPATH_MAX);
		if (e) {
			HeapFree(GetProcessHeap(), 0, wp);
			sprobe_table__seterr(err, errlen, "%s: not a valid UTF-8 path", path);
			return e;
		}
		/* OPEN_REPARSE_POINT: open a symlink itself, so it can be
		 * refused below instead of followed. Sharing everything: the
		 * writer has it open read-write. */
		HANDLE file = CreateFileW(wp, GENERIC_READ,
					  FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
					  NULL, OPEN_EXISTING, FILE_FLAG_OPEN_REPARSE_POINT, NULL);
		HeapFree(GetProcessHeap(), 0, wp);
		if (file == INVALID_HANDLE_VALUE) {
			e = map_win_error(GetLastError());
			sprobe_table__seterr(err, errlen, "cannot open %s: %s", path, strerror(-e));
			return e;
		}
		BY_HANDLE_FILE_INFORMATION fi;
		LARGE_INTEGER fsz;
		if (!GetFileInformationByHandle(file, &fi) || !GetFileSizeEx(file, &fsz)) {
			e = map_win_error(GetLastError());
			sprobe_table__seterr(err, errlen, "cannot stat %s: %s", path, strerror(-e));
			CloseHandle(file);
			return e;
		}
		if (fi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) {
			CloseHandle(file);
			sprobe_table__seterr(err, errlen,
					"%s is a symlink or junction: refused", path);
			return -ELOOP;
		}
		if ((fi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) ||
		    GetFileType(file) != FILE_TYPE_DISK) {
			CloseHandle(file);
			sprobe_table__seterr(err, errlen, "%s is not a regular file", path);
			return -EINVAL;
		}
		if (fsz.QuadPart <= 0) {
			CloseHandle(file);
			sprobe_table__seterr(err, errlen, "%s is empty (truncated table)", path);
			return -EBADMSG;
		}
		sz = (uint64_t)fsz.QuadPart;
		os->dev = fi.dwVolumeSerialNumber;
		os->ino = ((uint64_t)fi.nFileIndexHigh << 32) | fi.nFileIndexLow;
		mapping = CreateFileMappingW(file, NULL, PAGE_READONLY, 0, 0, NULL);
		e = mapping ? 0 : map_win_error(GetLastError());
		CloseHandle(file);	/* the mapping holds the file */
		if (e) {
			sprobe_table__seterr(err, errlen, "cannot map %s: %s", path, strerror(-e));
			return e;
		}
	}
	if (sz > (uint64_t)SIZE_MAX) {
		CloseHandle(mapping);
		sprobe_table__seterr(err, errlen, "%s is too large", path);
		return -EFBIG;
	}
	e = map_view(mapping, FILE_MAP_READ, off, off ? (size_t)sz : 0, &p);
	if (e) {
		CloseHandle(mapping);
		sprobe_table__seterr(err, errlen,
				"cannot map a view of %s: %s", path, strerror(-e));
		return e;
	}
	os->handle = mapping;
	*base = p;
	*size = (size_t)sz;
	return 0;
}

int sprobe_table_os__check_size(const struct sprobe_table_os *os, size_t size)
{
	/* A mapped file or section cannot shrink (see the top of the file). */
	(void)os;
	(void)size;
	return 0;
}

/* Remove path if it still names the file we created (same volume and file
 * index): the check and the delete use one handle, so a file swapped in
 * between is never deleted. */
static void remove_if_ours(const char *path, const struct sprobe_table_os *os)
{
	WCHAR *wp = HeapAlloc(GetProcessHeap(), 0, WPATH_MAX * sizeof(WCHAR));
	if (!wp)
		return;
	if (widen(path, wp, WPATH_MAX) == 0) {
		HANDLE f = CreateFileW(wp, DELETE | FILE_READ_ATTRIBUTES,
				       FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
				       OPEN_EXISTING, FILE_FLAG_OPEN_REPARSE_POINT, NULL);
		if (f != INVALID_HANDLE_VALUE) {
			BY_HANDLE_FILE_INFORMATION fi;
			if (GetFileInformationByHandle(f, &fi) &&
			    fi.dwVolumeSerialNumber == os->dev &&
			    (((uint64_t)fi.nFileIndexHigh << 32) | fi.nFileIndexLow) == os->ino) {
				FILE_DISPOSITION_INFO del = { .DeleteFile = TRUE };
				SetFileInformationByHandle(f, FileDispositionInfo, &del, sizeof(del));
			}
			CloseHandle(f);
		}
	}
	HeapFree(GetProcessHeap(), 0, wp);
}

void *sprobe_table_os__zalloc(size_t size)
{
	return VirtualAlloc(NULL, size ? size : 1, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void sprobe_table_os__zfree(void *p, size_t size)
{
	(void)size;
	if (p)
		VirtualFree(p, 0, MEM_RELEASE);
}

void sprobe_table_os__close(struct sprobe_table_os *os, void *base,
			    size_t size, const char *unlink_path)
{
	(void)size;
	if (base)
		UnmapViewOfFile(base);
	if (os->handle)
		CloseHandle(os->handle);
	os->handle = NULL;
	/* A named mapping goes away with its last handle: nothing to remove.
	 * A file on disk is removed after the view and the mapping are gone
	 * (a mapped file cannot be deleted on Windows). */
	if (unlink_path && !is_named_mapping(unlink_path) && (os->dev || os->ino))
		remove_if_ours(unlink_path, os);
	os->fd = -1;
}

int sprobe_table_os__getpid(void)
{
	return (int)GetCurrentProcessId();
}

uint64_t sprobe_table_os__clock_ns(int monotonic)
{
	if (monotonic) {
		LARGE_INTEGER now, freq;
		QueryPerformanceFrequency(&freq);
		QueryPerformanceCounter(&now);
		uint64_t t = (uint64_t)now.QuadPart, f = (uint64_t)freq.QuadPart;
		return t / f * 1000000000ull + t % f * 1000000000ull / f;
	}
	/* FILETIME: 100 ns units since 1601-01-01; Unix epoch is 11644473600 s
	 * later. */
	FILETIME ft;
	GetSystemTimeAsFileTime(&ft);
	uint64_t t = ((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
	return (t - 116444736000000000ull) * 100;
}

#endif /* _WIN32 */
