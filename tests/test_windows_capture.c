/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Windows capture backend, PE unwinder and module inventory, built with
 * mingw-w64 at -O2 and run under wine by `make test-windows` (mk/windows.mk).
 * Wine's suspend costs 0.2-5 ms per thread, so nothing here asserts a time;
 * waits are on events or bounded polls with generous deadlines.
 *
 * Here: the known stack, a truncated copy, the module inventory (its PDB
 * GUID/age checked against objdump's, by mk/windows.mk) and bad input.
 * Threads exiting, the window's locks, torture and slots are in
 * test_windows_capture_threads.c; the helpers in windows_capture_fixture.h.
 */

#ifndef _WIN32
#error "Windows-only test: built by mk/windows.mk with mingw-w64, run under wine"
#endif

#include <windows.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stackprobe.h>
#include <stackprobe/win.h>

#include "sprobe_test.h"
#include "windows_capture_fixture.h"

/* ---- the known stack: outer -> mid -> leaf, at -O2 ------------------ */

struct marker {
	volatile LONG ready, stop;
	int use_asm_leaf;
	DWORD tid;
};

/* A leaf with no unwind entry at all (no .seh_proc): the unwinder must
 * treat it as a leaf whose return address is at [rsp]. Windows x64 ABI:
 * rcx = ready, rdx = stop. */
__asm__(".text\n"
	".globl sprobe_test_spin_noentry\n"
	"sprobe_test_spin_noentry:\n"
	"\tmovl $1, (%rcx)\n"
	"1:\tpause\n"
	"\tmovl (%rdx), %eax\n"
	"\ttestl %eax, %eax\n"
	"\tje 1b\n"
	"\tret\n"
	".globl sprobe_test_spin_noentry_end\n"
	"sprobe_test_spin_noentry_end:\n");
int sprobe_test_spin_noentry(volatile LONG *ready, volatile LONG *stop);
void sprobe_test_spin_noentry_end(void);

__attribute__((noinline, noclone)) static int leaf_c(volatile LONG *ready, volatile LONG *stop)
{
	InterlockedExchange(ready, 1);
	while (!*stop)
		YieldProcessor();
	return (int)*stop;
}

__declspec(dllexport) int sprobe_test_marker_mid(struct marker *m);
__declspec(dllexport) int sprobe_test_marker_outer(struct marker *m);

/* Exported so the export-table symbolizer has names to find. */
__declspec(dllexport) __attribute__((noinline, noclone)) int sprobe_test_marker_mid(struct marker *m)
{
	int r = m->use_asm_leaf ? sprobe_test_spin_noentry(&m->ready, &m->stop)
				: leaf_c(&m->ready, &m->stop);
	sink += r;	/* keeps the call from being a tail call */
	return r + 1;
}

__declspec(dllexport) __attribute__((noinline, noclone)) int sprobe_test_marker_outer(struct marker *m)
{
	int r = sprobe_test_marker_mid(m);
	sink += r;
	return r + 1;
}

static DWORD WINAPI marker_thread(void *arg)
{
	struct marker *m = arg;
	m->tid = GetCurrentThreadId();
	return (DWORD)sprobe_test_marker_outer(m);
}

static void known_stack(int use_asm_leaf)
{
	struct marker m = { .use_asm_leaf = use_asm_leaf };
	HANDLE th = CreateThread(NULL, 0, marker_thread, &m, 0, NULL);
	assert_non_null(th);
	wait_flag(&m.ready);

	struct sprobe_capturer *c = new_capturer();
	struct sprobe_snapshot *s = sprobe_snapshot__new(0, 0);
	assert_non_null(s);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	InterlockedExchange(&m.stop, 1);
	assert_int_equal(WaitForSingleObject(th, DEADLINE_MS), WAIT_OBJECT_0);
	CloseHandle(th);
	check_stats(s);

	struct sprobe_thread_sample *t = find_tid(s, m.tid);
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);

	/* The whole-snapshot form: every captured sample unwound, flag set. */
	assert_false(sprobe_snapshot__frames_resolved(s));
	assert_int_equal(sprobe_snapshot__unwind_pe(s), 0);
	assert_true(sprobe_snapshot__frames_resolved(s));
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
		struct sprobe_thread_sample *x = sprobe_snapshot__thread(s, i);
		assert_true(x->stage != SPROBE_STAGE_RAW);
		if (x->stage == SPROBE_STAGE_UNWOUND)
			assert_true(x->nframes >= 1);
	}
	int n = (int)t->nframes;
	assert_true(n >= 3);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);

	uint64_t leaf_b, leaf_e, mid_b, mid_e, out_b, out_e;
	if (use_asm_leaf) {
		leaf_b = (uint64_t)(uintptr_t)sprobe_test_spin_noentry;
		leaf_e = (uint64_t)(uintptr_t)sprobe_test_spin_noentry_end;
		DWORD64 base;
		/* The premise of this test: no unwind entry for the leaf. */
		assert_null(RtlLookupFunctionEntry(leaf_b + 4, &base, NULL));
	} else {
		func_range(leaf_c, &leaf_b, &leaf_e);
	}
	func_range(sprobe_test_marker_mid, &mid_b, &mid_e);
	func_range(sprobe_test_marker_outer, &out_b, &out_e);

	/* Frame 0 is the captured ip, inside the spinning leaf. */
	assert_true(t->frames[0].pc >= leaf_b && t->frames[0].pc < leaf_e);
	assert_int_equal(t->frames[0].method, SPROBE_FRAME_IP);
	/* Then the callers, in order: a return address lies after the call,
	 * so (begin, end]. */
	int i_mid = -1, i_out = -1;
	for (int i = 1; i < n; i++) {
		uint64_t pc = t->frames[i].pc;
		assert_int_equal(t->frames[i].method, SPROBE_FRAME_PE);
		if (i_mid < 0 && pc > mid_b && pc <= mid_e)
			i_mid = i;
		else if (i_mid > 0 && i_out < 0 && pc > out_b && pc <= out_e)
			i_out = i;
	}
	if (i_mid != 1 || i_out != 2) {
		for (int i = 0; i < n; i++)
			print_message("frame %d pc %#llx\n", i, (unsigned long long)t->frames[i].pc);
	}
	assert_int_equal(i_mid, 1);
	assert_int_equal(i_out, 2);
	/* Frame stack pointers strictly inside the thread's stack. */
	for (int i = 1; i < n; i++)
		assert_true(t->frames[i].fp > t->frames[i - 1].fp || i == 1);

	/* Export-table symbolization names the caller frames. */
	struct sprobe_win_modules *mods = sprobe_win_modules__new();
	assert_non_null(mods);
	char name[128];
	uint64_t off = 0;
	assert_int_equal(sprobe_win_modules__symbolize(mods, t->frames[1].pc, name,
						       sizeof(name), &off), 0);
	assert_string_equal(name, "sprobe_test_marker_mid");
	assert_int_equal(off, t->frames[1].pc - mid_b);
	assert_int_equal(sprobe_win_modules__symbolize(mods, t->frames[2].pc, name,
						       sizeof(name), &off), 0);
	assert_string_equal(name, "sprobe_test_marker_outer");
	sprobe_win_modules__free(mods);

	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

static void test_known_stack_O2(void **state)
{
	(void)state;
	known_stack(0);
}

static void test_known_stack_leaf_without_unwind_entry(void **state)
{
	(void)state;
	known_stack(1);
}

/* ---- truncated copy: deep recursion, small cap ---------------------- */

struct deep {
	volatile LONG ready, stop;
	DWORD tid;
};

__attribute__((noinline, noclone)) static int recurse(struct deep *d, int n)
{
	volatile char pad[256];
	pad[0] = (char)n;
	if (n == 0) {
		InterlockedExchange(&d->ready, 1);
		while (!d->stop)
			YieldProcessor();
		return pad[0];
	}
	return recurse(d, n - 1) + pad[0];
}

static DWORD WINAPI deep_thread(void *arg)
{
	struct deep *d = arg;
	d->tid = GetCurrentThreadId();
	return (DWORD)recurse(d, 200);
}

static void test_truncated_copy_is_bounded(void **state)
{
	(void)state;
	struct deep d = { 0 };
	HANDLE th = CreateThread(NULL, 0, deep_thread, &d, 0, NULL);
	assert_non_null(th);
	wait_flag(&d.ready);

	struct sprobe_capturer *c = new_capturer();
	struct sprobe_snapshot *s = sprobe_snapshot__new(0, 4096);
	assert_non_null(s);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	InterlockedExchange(&d.stop, 1);
	assert_int_equal(WaitForSingleObject(th, DEADLINE_MS), WAIT_OBJECT_0);
	CloseHandle(th);
	check_stats(s);

	struct sprobe_thread_sample *t = find_tid(s, d.tid);
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	/* 200 frames of >= 256 bytes cannot fit in 4 KiB. */
	assert_true(t->truncated);
	assert_int_equal(t->stack_len, 4096);

	int n = sprobe_unwind_pe(t);
	assert_true(n >= 2);
	uint64_t rb, re;
	func_range(recurse, &rb, &re);
	/* Every frame found is a recurse() frame and stays within the copy. */
	for (int i = 1; i < n; i++) {
		assert_true(t->frames[i].pc > rb && t->frames[i].pc <= re);
		assert_true(t->frames[i].fp <= t->stack_addr + t->stack_len);
	}
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

/* ---- module inventory ------------------------------------------------- */

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static void test_module_inventory(void **state)
{
	(void)state;
	struct sprobe_win_modules *mods = sprobe_win_modules__new();
	assert_non_null(mods);
	assert_true(sprobe_win_modules__count(mods) >= 2);

	/* Sorted, non-overlapping. */
	for (size_t i = 1; i < sprobe_win_modules__count(mods); i++) {
		const struct sprobe_win_module *a = sprobe_win_modules__get(mods, i - 1);
		const struct sprobe_win_module *b = sprobe_win_modules__get(mods, i);
		assert_true(a->base + a->size <= b->base);
	}
	assert_null(sprobe_win_modules__get(mods, sprobe_win_modules__count(mods)));
	assert_int_equal(errno, ERANGE);

	/* Our own image: path, bounds, and the CodeView record ld wrote for
	 * --build-id. */
	const struct sprobe_win_module *self =
		sprobe_win_modules__find(mods, (uint64_t)(uintptr_t)test_module_inventory);
	assert_non_null(self);
	assert_int_equal(self->base, (uint64_t)(uintptr_t)GetModuleHandleW(NULL));
	assert_non_null(strstr(self->path, "test_windows_capture.exe"));
	assert_true(self->has_pdb);
	/* mk/windows.mk passes the GUID and age objdump reads from the file:
	 * an independent oracle. objdump prints the GUID in canonical form
	 * (Data1, Data2, Data3 as little-endian integers, then 8 bytes); we
	 * keep the 16 bytes as stored. */
	const char *want = getenv("SPROBE_TEST_SELF_PDB_GUID");
	const char *want_age = getenv("SPROBE_TEST_SELF_PDB_AGE");
	if (want && strlen(want) == 32) {
		static const int stored_from_canonical[16] = { 3, 2, 1, 0, 5, 4, 7, 6,
							       8, 9, 10, 11, 12, 13, 14, 15 };
		for (int i = 0; i < 16; i++) {
			int c = stored_from_canonical[i];
			int b = hexval(want[2 * c]) * 16 + hexval(want[2 * c + 1]);
			assert_int_equal(self->pdb_guid[i], b);
		}
		assert_non_null(want_age);
		assert_int_equal(self->pdb_age, strtoul(want_age, NULL, 10));
		print_message("PDB GUID %s age %u checked against objdump\n", want, self->pdb_age);
	} else {
		int nonzero = 0;
		for (int i = 0; i < 16; i++)
			nonzero |= self->pdb_guid[i];
		assert_true(nonzero);
	}
	assert_true(self->nexports >= 2);

	/* ntdll: found by address, and the export symbolizer is exact at an
	 * export's first byte. */
	HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
	assert_non_null(ntdll);
	FARPROC fn = GetProcAddress(ntdll, "RtlLookupFunctionEntry");
	assert_non_null(fn);
	const struct sprobe_win_module *nt = sprobe_win_modules__find(mods, (uint64_t)(uintptr_t)fn);
	assert_non_null(nt);
	assert_int_equal(nt->base, (uint64_t)(uintptr_t)ntdll);
	char name[64];
	uint64_t off = 99;
	assert_int_equal(sprobe_win_modules__symbolize(mods, (uint64_t)(uintptr_t)fn, name,
						       sizeof(name), &off), 0);
	assert_string_equal(name, "RtlLookupFunctionEntry");
	assert_int_equal(off, 0);

	/* Truncation keeps the NUL. */
	char small[4];
	assert_int_equal(sprobe_win_modules__symbolize(mods, (uint64_t)(uintptr_t)fn, small,
						       sizeof(small), NULL), 0);
	assert_string_equal(small, "Rtl");

	/* Bad input. */
	assert_null(sprobe_win_modules__find(mods, 0x10));
	assert_int_equal(errno, ENOENT);
	assert_int_equal(sprobe_win_modules__symbolize(mods, 0x10, name, sizeof(name), NULL),
			 -ENOENT);
	assert_int_equal(sprobe_win_modules__symbolize(mods, (uint64_t)(uintptr_t)fn, NULL, 0,
						       NULL), -EINVAL);
	sprobe_win_modules__free(mods);
	sprobe_win_modules__free(NULL);
}

/* ---- bad input --------------------------------------------------------- */

static void test_bad_input(void **state)
{
	(void)state;
	struct sprobe_capture_opts o = { .sz = sizeof(o), .method = SPROBE_METHOD_SIGNAL };
	errno = 0;
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, ENOTSUP);
	o = (struct sprobe_capture_opts){ .sz = 3 };
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);
	o = (struct sprobe_capture_opts){ .sz = sizeof(o), .max_stack_bytes = SPROBE_MAX_STACK_BYTES + 1 };
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);

	struct sprobe_capturer *c = sprobe_capturer__new(NULL);
	assert_non_null(c);
	assert_int_equal(sprobe_capturer__signo(c), 0);
	assert_int_equal(sprobe_capturer__signo(NULL), -EINVAL);
	assert_int_equal(sprobe_capturer__capture(c, NULL), -EINVAL);
	struct sprobe_snapshot *s = sprobe_snapshot__new(1, 0);
	assert_non_null(s);
	assert_int_equal(sprobe_capturer__capture(NULL, s), -EINVAL);

	assert_int_equal(sprobe_unwind_pe(NULL), -EINVAL);
	assert_int_equal(sprobe_snapshot__unwind_pe(NULL), -EINVAL);
	struct sprobe_thread_sample empty;
	memset(&empty, 0, sizeof(empty));
	assert_int_equal(sprobe_unwind_pe(&empty), -EINVAL);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
	sprobe_capturer__free(NULL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_known_stack_O2),
	cmocka_unit_test(test_known_stack_leaf_without_unwind_entry),
	cmocka_unit_test(test_truncated_copy_is_bounded),
	cmocka_unit_test(test_module_inventory),
	cmocka_unit_test(test_bad_input),
};

SPROBE_TEST_MAIN(tests)
