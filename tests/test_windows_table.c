/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The node table on Windows (table/table_win.c under table/table.c): named
 * file mappings (the default) and files on disk, read from the same process
 * and from another process. Built with mingw-w64, run under wine by
 * `make test-windows`.
 */
#ifndef _WIN32
#error "Windows-only test: built by mk/windows.mk with mingw-w64, run under wine"
#endif

#include <windows.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stackprobe.h>
#include <stackprobe/table.h>

#include "sprobe_test.h"

#define NREC 5

static void fill_record(struct sprobe_table_record *rec, struct sprobe_table_frame *fr, int i)
{
	for (int k = 0; k < 3; k++) {
		fr[k].pc = 0x140001000ull + (uint64_t)i * 0x100 + (uint64_t)k;
		fr[k].fp = 0x7f0000ull + (uint64_t)k * 16;
	}
	*rec = (struct sprobe_table_record){
		.tid = 1000 + i,
		.capture_ns = 42 + (uint64_t)i,
		.stack_bytes = 4096u * (uint64_t)(i + 1),
		.nframes = 3,
		.frames = fr,
	};
}

static void write_records(struct sprobe_table *t)
{
	for (int i = 0; i < NREC; i++) {
		struct sprobe_table_frame fr[3];
		struct sprobe_table_record rec;
		fill_record(&rec, fr, i);
		assert_true(sprobe_table__insert(t, &rec) > 0);
	}
}

/* Read every node and check it against write_records(). Returns the
 * number of mismatches (0 when the table is exactly what was written). */
static int verify_records(struct sprobe_table *r)
{
	static struct sprobe_table_node node;
	int seen[NREC] = { 0 }, bad = 0, n = 0, rc;

	if (sprobe_table__iter_begin(r) != 0)
		return 100;
	while ((rc = sprobe_table__iter_next(r, &node)) == 1) {
		int i = (int)node.tid - 1000;
		n++;
		if (i < 0 || i >= NREC || seen[i]++) {
			bad++;
			continue;
		}
		struct sprobe_table_frame fr[3];
		struct sprobe_table_record rec;
		fill_record(&rec, fr, i);
		if (node.nframes != 3 || node.capture_ns != rec.capture_ns ||
		    node.stack_bytes != rec.stack_bytes || memcmp(node.frames, fr, sizeof(fr)))
			bad++;
	}
	if (rc != 0 || n != NREC)
		bad++;
	return bad;
}

static void test_named_mapping_roundtrip(void **state)
{
	(void)state;
	struct sprobe_table *w = sprobe_table__create(NULL, 16);
	assert_non_null(w);
	char want[64];
	snprintf(want, sizeof(want), "Local\\stackprobe-%lu.table",
		 (unsigned long)GetCurrentProcessId());
	assert_string_equal(sprobe_table__path(w), want);
	write_records(w);

	char errbuf[256] = "";
	struct sprobe_table_open_opts o = { .sz = sizeof(o), .errbuf = errbuf,
					    .errbuf_len = sizeof(errbuf) };
	struct sprobe_table *r = sprobe_table__open_pid((pid_t)GetCurrentProcessId(), &o);
	if (!r)
		fail_msg("open_pid: %s (errno %d)", errbuf, errno);
	struct sprobe_table_info info;
	assert_int_equal(sprobe_table__info(r, &info), 0);
	assert_int_equal(info.capacity, 16);
	assert_int_equal(info.writer_pid, (pid_t)GetCurrentProcessId());
	assert_false(info.writer_closed);
	assert_int_equal(verify_records(r), 0);
	sprobe_table__close(r);

	/* A second writer on the same name is refused. */
	errno = 0;
	assert_null(sprobe_table__create(NULL, 16));
	assert_int_equal(errno, EEXIST);

	/* The mapping lives with its handles: once the writer closes, the
	 * table is gone. */
	sprobe_table__close(w);
	errno = 0;
	errbuf[0] = '\0';
	assert_null(sprobe_table__open_pid((pid_t)GetCurrentProcessId(), &o));
	assert_int_equal(errno, ENOENT);
	assert_true(strlen(errbuf) > 0);
}

static void temp_path(char *buf, size_t len, const char *tag)
{
	char dir[MAX_PATH];
	DWORD n = GetTempPathA(sizeof(dir), dir);
	assert_true(n > 0 && n < sizeof(dir));
	snprintf(buf, len, "%sstackprobe-test-%lu-%s.table", dir,
		 (unsigned long)GetCurrentProcessId(), tag);
	DeleteFileA(buf);
}

static void test_file_backed_table(void **state)
{
	(void)state;
	char path[MAX_PATH + 64];
	temp_path(path, sizeof(path), "file");

	struct sprobe_table *w = sprobe_table__create(path, 8);
	assert_non_null(w);
	assert_true(GetFileAttributesA(path) != INVALID_FILE_ATTRIBUTES);
	write_records(w);

	errno = 0;
	assert_null(sprobe_table__create(path, 8));
	assert_int_equal(errno, EEXIST);

	char errbuf[256] = "";
	struct sprobe_table_open_opts o = { .sz = sizeof(o), .errbuf = errbuf,
					    .errbuf_len = sizeof(errbuf) };
	struct sprobe_table *r = sprobe_table__open_path(path, &o);
	if (!r)
		fail_msg("open_path: %s (errno %d)", errbuf, errno);
	assert_int_equal(verify_records(r), 0);
	struct sprobe_table_info info;
	assert_int_equal(sprobe_table__info(r, &info), 0);
	assert_int_equal(info.capacity, 8);
	sprobe_table__close(r);

	/* The writer removes its own file on close. */
	sprobe_table__close(w);
	assert_true(GetFileAttributesA(path) == INVALID_FILE_ATTRIBUTES);
	errno = 0;
	assert_null(sprobe_table__open_path(path, &o));
	assert_int_equal(errno, ENOENT);
}

static void test_bad_files_are_refused(void **state)
{
	(void)state;
	char path[MAX_PATH + 64];
	char errbuf[256];
	struct sprobe_table_open_opts o = { .sz = sizeof(o), .errbuf = errbuf,
					    .errbuf_len = sizeof(errbuf) };

	/* Empty file. */
	temp_path(path, sizeof(path), "empty");
	HANDLE f = CreateFileA(path, GENERIC_WRITE, 0, NULL, CREATE_NEW, 0, NULL);
	assert_true(f != INVALID_HANDLE_VALUE);
	CloseHandle(f);
	errbuf[0] = '\0';
	errno = 0;
	assert_null(sprobe_table__open_path(path, &o));
	assert_int_equal(errno, EBADMSG);
	assert_non_null(strstr(errbuf, "empty"));
	DeleteFileA(path);

	/* Garbage that is not a table. */
	temp_path(path, sizeof(path), "garbage");
	f = CreateFileA(path, GENERIC_WRITE, 0, NULL, CREATE_NEW, 0, NULL);
	assert_true(f != INVALID_HANDLE_VALUE);
	char junk[8192];
	memset(junk, 0x5a, sizeof(junk));
	DWORD wr;
	assert_true(WriteFile(f, junk, sizeof(junk), &wr, NULL) && wr == sizeof(junk));
	CloseHandle(f);
	errbuf[0] = '\0';
	errno = 0;
	assert_null(sprobe_table__open_path(path, &o));
	assert_int_equal(errno, EBADMSG);
	assert_true(strlen(errbuf) > 0);
	DeleteFileA(path);

	/* A directory. */
	char dir[MAX_PATH];
	assert_true(GetTempPathA(sizeof(dir), dir) > 0);
	errno = 0;
	assert_null(sprobe_table__open_path(dir, &o));
	assert_true(errno == EINVAL || errno == EACCES);

	/* A name that is no mapping. */
	errno = 0;
	assert_null(sprobe_table__open_path("Local\\stackprobe-no-such-table", &o));
	assert_int_equal(errno, ENOENT);
}

/* The child half of test_other_process_reads_by_pid. */
static void child_reader(pid_t parent)
{
	char errbuf[256] = "";
	struct sprobe_table_open_opts o = { .sz = sizeof(o), .errbuf = errbuf,
					    .errbuf_len = sizeof(errbuf) };
	struct sprobe_table *r = sprobe_table__open_pid(parent, &o);
	if (!r)
		fail_msg("child: open_pid(%d): %s (errno %d)", (int)parent, errbuf, errno);
	struct sprobe_table_info info;
	assert_int_equal(sprobe_table__info(r, &info), 0);
	assert_int_equal(info.writer_pid, parent);
	assert_int_equal(verify_records(r), 0);
	sprobe_table__close(r);
}

/*
 * Another process reads the table by pid: the point of a named mapping.
 * The test runs this program again, filtered to this test, with the
 * parent's pid in the environment; that run takes the child's role.
 */
static void test_other_process_reads_by_pid(void **state)
{
	(void)state;
	char pidbuf[32];
	if (GetEnvironmentVariableA("SPROBE_TEST_TABLE_PARENT", pidbuf, sizeof(pidbuf))) {
		child_reader((pid_t)strtoul(pidbuf, NULL, 10));
		return;
	}
	struct sprobe_table *w = sprobe_table__create(NULL, 16);
	assert_non_null(w);
	write_records(w);

	WCHAR exe[MAX_PATH], cmd[MAX_PATH + 64];
	DWORD n = GetModuleFileNameW(NULL, exe, MAX_PATH);
	assert_true(n > 0 && n < MAX_PATH);
	_snwprintf(cmd, sizeof(cmd) / sizeof(cmd[0]), L"\"%ls\" test_other_process_reads_by_pid", exe);
	snprintf(pidbuf, sizeof(pidbuf), "%lu", (unsigned long)GetCurrentProcessId());
	assert_true(SetEnvironmentVariableA("SPROBE_TEST_TABLE_PARENT", pidbuf));
	assert_true(SetEnvironmentVariableA("SPROBE_TEST_FILTER", NULL));

	/* The child's cmocka output goes to a file and is shown with a
	 * prefix, so that its summary lines are not counted as ours. */
	char logpath[MAX_PATH + 64];
	temp_path(logpath, sizeof(logpath), "child-log");
	SECURITY_ATTRIBUTES sa = { .nLength = sizeof(sa), .bInheritHandle = TRUE };
	HANDLE log = CreateFileA(logpath, GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ, &sa,
				 CREATE_ALWAYS, FILE_FLAG_DELETE_ON_CLOSE, NULL);
	assert_true(log != INVALID_HANDLE_VALUE);
	STARTUPINFOW si = { .cb = sizeof(si), .dwFlags = STARTF_USESTDHANDLES,
			    .hStdInput = NULL, .hStdOutput = log, .hStdError = log };
	PROCESS_INFORMATION pi;
	BOOL ok = CreateProcessW(exe, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi);
	SetEnvironmentVariableA("SPROBE_TEST_TABLE_PARENT", NULL);
	assert_true(ok);
	assert_int_equal(WaitForSingleObject(pi.hProcess, 60000), WAIT_OBJECT_0);
	DWORD code = 99;
	assert_true(GetExitCodeProcess(pi.hProcess, &code));
	CloseHandle(pi.hThread);
	CloseHandle(pi.hProcess);
	static char out[16384];
	DWORD got = 0;
	SetFilePointer(log, 0, NULL, FILE_BEGIN);
	if (ReadFile(log, out, sizeof(out) - 1, &got, NULL)) {
		out[got] = '\0';
		for (char *line = strtok(out, "\r\n"); line; line = strtok(NULL, "\r\n"))
			print_message("  child| %s\n", line);
	}
	CloseHandle(log);
	sprobe_table__close(w);
	/* cmocka's exit status is the number of failed tests. */
	assert_int_equal(code, 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_named_mapping_roundtrip),
	cmocka_unit_test(test_file_backed_table),
	cmocka_unit_test(test_bad_files_are_refused),
	cmocka_unit_test(test_other_process_reads_by_pid),
};

SPROBE_TEST_MAIN(tests)
