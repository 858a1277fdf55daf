/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Deferred unwinding of real captures (the capture backend's signal
 * capturer), built -O2 -fomit-frame-pointer so callers can only be found
 * through DWARF CFI:
 *   - the known stack: marker <- caller <- grandcaller <- thread start;
 *   - threads blocked in Debian's libc (read, futex wait, nanosleep) unwind
 *     through libc up to the thread's start;
 *   - a stack running through a dlopen'ed library, and through assembly
 *     without CFI (frame-pointer fallback, recorded per frame);
 *   - an unwinder on another process's inventory (a forked child, exited)
 *     reads the module files and gives the live unwinder's frames.
 * Truncated copies, random bytes, the frame limit and the warm cache are in
 * test_unwind_limits.c; the workers and helpers in unwind_fixture.h.
 */

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ucontext.h>

#include <stackprobe/capture.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "sprobe_test.h"
#include "unwind_fixture.h"

/* ---- tests ---- */

/* The seed's acceptance test, DWARF edition: -fomit-frame-pointer code, so
 * the marker's caller and grandcaller can only come from CFI. */
static void test_known_stack_dwarf(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	enum sprobe_unwind_stop why;
	int c, g, start;

	env_open(&e, 0);
	park_start(&p, PARK_KNOWN);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 0);
	print_stack(e.mods, t, why);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_int_equal(frame_named(e.mods, t, 0, "unw_marker"), 0);
	c = frame_named(e.mods, t, 1, "unw_caller");
	g = frame_named(e.mods, t, 1, "unw_grandcaller");
	start = frame_named(e.mods, t, 1, "park_main");
	assert_int_equal(c, 1);
	assert_int_equal(g, 2);
	assert_int_equal(start, 3);
	assert_int_equal(t->frames[c].method, SPROBE_FRAME_DWARF);
	assert_int_equal(t->frames[g].method, SPROBE_FRAME_DWARF);
	/* ... and on to the thread's start, through libc, by CFI alone. */
	assert_int_equal(why, SPROBE_UNWIND_END);
	for (uint32_t i = 1; i < t->nframes; i++)
		assert_int_equal(t->frames[i].method, SPROBE_FRAME_DWARF);
	park_stop(&p);
	env_close(&e);
}

static void check_blocked_in_libc(enum park mode, const char *fn)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	enum sprobe_unwind_stop why;
	int at;

	env_open(&e, 0);
	park_start(&p, mode);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 0);
	print_stack(e.mods, t, why);
	/* Stopped inside libc, in the system call. */
	assert_non_null(strstr(frame_module(e.mods, &t->frames[0]), "libc.so"));
	at = frame_named(e.mods, t, 1, fn);
	assert_true(at > 0);
	assert_int_equal(frame_named(e.mods, t, (uint32_t)at, "park_main"), at + 1);
	/* The walk reached the thread's start (clone3's CFI ends it) in libc. */
	assert_int_equal(why, SPROBE_UNWIND_END);
	assert_non_null(strstr(frame_module(e.mods, &t->frames[t->nframes - 1]), "libc.so"));
	for (uint32_t i = 1; i < t->nframes; i++)
		assert_int_equal(t->frames[i].method, SPROBE_FRAME_DWARF);
	park_stop(&p);
	env_close(&e);
}

static void test_blocked_in_libc_read(void **state)
{
	check_blocked_in_libc(PARK_READ, "unw_blocked_read");
}

static void test_blocked_in_libc_futex(void **state)
{
	check_blocked_in_libc(PARK_FUTEX, "unw_blocked_futex");
}

static void test_blocked_in_libc_nanosleep(void **state)
{
	check_blocked_in_libc(PARK_SLEEP, "unw_blocked_sleep");
}

/* build/tests/unwind_testlib/<name>, next to this executable. */
static void *open_testlib(const char *name)
{
	char exe[PATH_MAX], path[PATH_MAX + 64];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *h;

	assert_true(k > 0);
	exe[k] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(path, sizeof(path), "%s/unwind_testlib/%s", exe, name);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", path, dlerror());
	return h;
}

/* Through a library loaded after the unwinder was made: the snapshot
 * unwind refreshes the inventory, then finds the library's CFI. */
static void test_stack_through_dlopened_library(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	void *h;
	int i, j;

	env_open(&e, 0);
	h = open_testlib("libsprobe_testlib_stripped.so");
	park_start(&p, PARK_LIB);
	p.lib_call = (int (*)(int (*)(void *), void *))dlsym(h, "sprobe_testlib_call");
	assert_non_null(p.lib_call);
	park_go(&p);
	assert_int_equal(sprobe_capturer__capture(e.cap, e.snap), 0);
	assert_false(sprobe_snapshot__frames_resolved(e.snap));
	assert_true(sprobe_unwinder__unwind_snapshot(e.u, e.snap) >= 1);
	assert_true(sprobe_snapshot__frames_resolved(e.snap));
	t = find_tid(e.snap, p.tid);
	print_stack(e.mods, t, SPROBE_UNWIND_END);
	i = frame_named(e.mods, t, 1, "unw_lib_callback");
	assert_int_equal(i, 1);
	/* The stripped library's internal frame: module+offset, by CFI. */
	assert_string_equal(frame_module(e.mods, &t->frames[2]), "libsprobe_testlib_stripped.so");
	assert_int_equal(t->frames[2].method, SPROBE_FRAME_DWARF);
	j = frame_named(e.mods, t, 2, "sprobe_testlib_call");
	assert_int_equal(j, 3);
	assert_int_equal(t->frames[j].method, SPROBE_FRAME_DWARF);
	assert_int_equal(frame_named(e.mods, t, 3, "park_main"), 4);
	park_stop(&p);
	dlclose(h);
	env_close(&e);
}

/* Another process's inventory (the external tier's case): a forked child
 * maps what we map, at the same addresses, so a sample of ours unwound
 * with an unwinder on the child's inventory, which reads code and
 * .eh_frame from the module files by segment offset, must give the very
 * frames the live unwinder gives: through the executable, libc and a
 * stripped dlopen'ed library, after the child has exited and been
 * reaped (its files were opened while it lived). */
static void test_other_process_from_files(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	struct sprobe_frame live[SPROBE_MAX_FRAMES];
	enum sprobe_unwind_stop why_live, why_files;
	uint32_t nlive;
	int fds[2];
	void *h;
	const char *qemu = getenv("SPROBE_TEST_QEMU");

	(void)state;
	if (qemu && *qemu == '1')
		SPROBE_SKIP("qemu-user shows another process's /proc/PID/maps as the host maps "
			    "it (the emulator's own mappings), not the guest's");
	env_open(&e, 0);
	h = open_testlib("libsprobe_testlib_stripped.so");
	park_start(&p, PARK_LIB);
	p.lib_call = (int (*)(int (*)(void *), void *))dlsym(h, "sprobe_testlib_call");
	assert_non_null(p.lib_call);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_modules__refresh(e.mods) >= 0); /* the library is new */
	assert_true(sprobe_unwinder__unwind(e.u, t, &why_live) >= 4);
	nlive = t->nframes;
	memcpy(live, t->frames, nlive * sizeof(*live));

	assert_int_equal(pipe(fds), 0);
	pid_t child = fork();

	assert_true(child >= 0);
	if (child == 0) {
		char c;

		close(fds[1]);
		while (read(fds[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(fds[0]);
	struct sprobe_modules_opts mo = { .sz = sizeof(mo), .pid = child };
	struct sprobe_modules *other = sprobe_modules__new(&mo);

	assert_non_null(other);
	/* As the external tier does while the process lives: open each
	 * module's file (with its symbol table). */
	for (size_t i = 0; i < sprobe_modules__count(other); i++) {
		struct sprobe_symbol sym;

		sprobe_modules__symbolize(other, sprobe_modules__get(other, i)->start, &sym);
	}
	close(fds[1]);
	assert_int_equal(waitpid(child, NULL, 0), child);

	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo), .modules = other };
	struct sprobe_unwinder *fu = sprobe_unwinder__new(&uo);

	assert_non_null(fu);
	t->stage = SPROBE_STAGE_RAW;
	assert_int_equal(sprobe_unwinder__unwind(fu, t, &why_files), (int)nlive);
	print_stack(other, t, why_files);
	assert_int_equal(why_files, why_live);
	for (uint32_t i = 0; i < nlive; i++) {
		assert_int_equal(t->frames[i].pc, live[i].pc);
		assert_int_equal(t->frames[i].method, live[i].method);
	}
	/* Names from the files too, through the stripped library's CFI. */
	assert_int_equal(frame_named(other, t, 1, "unw_lib_callback"), 1);
	assert_true(frame_named(other, t, 2, "park_main") > 2);
	struct sprobe_unwinder_stats st;

	assert_int_equal(sprobe_unwinder__stats(fu, &st), 0);
	assert_true(st.frames_by_method[SPROBE_FRAME_DWARF] >= 3);
	assert_int_equal(st.pins, 0); /* files need no pin */
	sprobe_unwinder__free(fu);
	sprobe_modules__free(other);
	park_stop(&p);
	dlclose(h);
	env_close(&e);
}

/* No CFI in the trampoline: frame pointers take over there, and the frames
 * say so. */
static void test_fp_fallback_without_cfi(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	struct sprobe_unwinder_stats st;
	enum sprobe_unwind_stop why;
	int k;

	env_open(&e, 0);
	park_start(&p, PARK_NOCFI);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 0);
	print_stack(e.mods, t, why);
	assert_int_equal(frame_named(e.mods, t, 0, "unw_marker"), 0);
	assert_int_equal(frame_named(e.mods, t, 1, "unw_nocfi_trampoline"), 1);
	assert_int_equal(t->frames[1].method, SPROBE_FRAME_DWARF);
	k = frame_named(e.mods, t, 2, "unw_nocfi_caller");
	assert_int_equal(k, 2);
	assert_int_equal(t->frames[k].method, SPROBE_FRAME_FP);
	assert_int_equal(why, SPROBE_UNWIND_FP_END);
	assert_int_equal(sprobe_unwinder__stats(e.u, &st), 0);
	assert_true(st.table_failures >= 1);
	assert_true(st.frames_by_method[SPROBE_FRAME_FP] >= 1);

	/* With the fallback off, the walk stops at the trampoline instead. */
	struct sprobe_unwinder_opts o = { .sz = sizeof(o), .no_fp_fallback = true };
	struct sprobe_unwinder *u2 = sprobe_unwinder__new(&o);

	assert_non_null(u2);
	assert_int_equal(sprobe_unwinder__unwind(u2, t, &why), 2);
	assert_int_equal(why, SPROBE_UNWIND_BAD);
	sprobe_unwinder__free(u2);
	park_stop(&p);
	env_close(&e);
}

/* Through a signal frame: the handler, libc's sigreturn trampoline, then
 * the interrupted function, whose pc is exact (not a return address). */
static void test_through_signal_handler(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	enum sprobe_unwind_stop why;
	struct sigaction sa, old;
	int h, v;
	const char *qemu = getenv("SPROBE_TEST_QEMU");

	if (qemu && *qemu == '1')
		SPROBE_SKIP("qemu-user's sigreturn trampoline lives in a page of its own "
			    "with no CFI (a real kernel's vDSO has it)");
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = unw_sig_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
	env_open(&e, 0);
	park_start(&p, PARK_SIGNAL);
	sig_parked = &p;
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 0);
	print_stack(e.mods, t, why);
	assert_int_equal(frame_named(e.mods, t, 0, "unw_marker"), 0);
	h = frame_named(e.mods, t, 1, "unw_sig_handler");
	assert_int_equal(h, 1);
	/* h + 1 is the trampoline in libc; then the interrupted loop. */
	v = frame_named(e.mods, t, 2, "unw_sig_victim");
	assert_int_equal(v, h + 2);
	assert_non_null(strstr(frame_module(e.mods, &t->frames[h + 1]), "libc.so"));
	assert_int_equal(frame_named(e.mods, t, (uint32_t)v, "park_main"), v + 1);
	/* The interrupted loop is named at the pc the signal interrupted, not
	 * one byte before it: it was not calling anything. */
	assert_int_equal(sprobe_frame_lookup_pc(&t->frames[v]), sig_interrupted_pc);
#if defined(__x86_64__)
	{
		/* The trampoline is named at its first instruction, where the
		 * handler returns (glibc's sa_restorer, as the kernel holds
		 * it), not at the padding before it. */
		struct {
			uint64_t handler, flags, restorer, mask;
		} ksa;
		struct sprobe_symbol sym;

		assert_int_equal(syscall(SYS_rt_sigaction, SIGUSR2, NULL, &ksa, 8), 0);
		assert_int_equal(sprobe_frame_lookup_pc(&t->frames[h + 1]), ksa.restorer);
		/* Named when libc's symbols (its debug file) have it, as perf
		 * shows it. */
		if (sprobe_modules__symbolize(e.mods, ksa.restorer, &sym) == 0 && sym.name)
			assert_string_equal(sym.name, "__restore_rt");
	}
#endif
	assert_int_equal(why, SPROBE_UNWIND_END);
	park_stop(&p);
	sig_parked = NULL;
	sigaction(SIGUSR2, &old, NULL);
	env_close(&e);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_known_stack_dwarf),
	cmocka_unit_test(test_blocked_in_libc_read),
	cmocka_unit_test(test_blocked_in_libc_futex),
	cmocka_unit_test(test_blocked_in_libc_nanosleep),
	cmocka_unit_test(test_stack_through_dlopened_library),
	cmocka_unit_test(test_other_process_from_files),
	cmocka_unit_test(test_fp_fallback_without_cfi),
	cmocka_unit_test(test_through_signal_handler),
};

SPROBE_TEST_MAIN(tests)
