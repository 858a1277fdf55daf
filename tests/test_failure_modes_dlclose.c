/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Failure modes: dlclose() racing the unwinder, in this process: a thread
 * parked inside build/tests/unwind_testlib/libsprobe_testlib.so, the
 * library closed before (cold) or after (warm) the unwinder saw it, and
 * closed and opened again while captures run.
 */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "sprobe_test.h"
#include "failure_modes_fixture.h"

/* ---- dlclose() racing the unwinder (in this process) ----------------------
 *
 * The unwinder reads code and .eh_frame of the modules in its inventory from
 * live memory. A library another thread dlclose()s after the inventory was
 * refreshed must never be read once unmapped: each round pins what it reads
 * (docs/LIMITATIONS.md, "dlclose while unwinding").
 */
/* The test library next to this executable (build/tests/unwind_testlib/,
 * or the sanitizer build's own copy). */
static const char *testlib(void)
{
	static char path[4200];
	char exe[4096];
	if (!path[0]) {
		ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		assert_true(k > 0);
		exe[k] = '\0';
		*strrchr(exe, '/') = '\0';
		snprintf(path, sizeof(path), "%s/unwind_testlib/libsprobe_testlib.so", exe);
	}
	return path;
}
#define TESTLIB testlib()

/* One capturer per process (its signal handler is process-wide). */
static struct sprobe_capturer *g_cap;

static struct sprobe_capturer *capturer(void)
{
	if (!g_cap) {
		g_cap = sprobe_capturer__new(NULL);
		if (!g_cap && errno == ENOTSUP)
			SPROBE_SKIP("no capture backend on this platform");
		assert_non_null(g_cap);
	}
	return g_cap;
}

/* A thread parked inside the library: thread main -> sprobe_testlib_call
 * -> testlib_inner -> inlib_cb (spinning until told to leave). */
struct inlib {
	pthread_t th;
	int (*call)(int (*)(void *), void *);
	_Atomic int state;	/* 0 starting, 1 inside, 2 leave */
	_Atomic pid_t tid;
	_Atomic long spins;	/* stress: iterations inside before leaving */
	_Atomic int quit;
	_Atomic long cycles;	/* stress: dlopen/call/dlclose cycles done */
};

static int inlib_cb(void *arg)
{
	struct inlib *p = arg;
	long n = atomic_load(&p->spins);
	atomic_store(&p->tid, (pid_t)syscall(SYS_gettid));
	/* Release; pairs with the acquire load in inlib_start(). */
	atomic_store_explicit(&p->state, 1, memory_order_release);
	if (n > 0) {
		for (long i = 0; i < n; i++)
			__asm__ __volatile__("" ::: "memory");
		return 1;
	}
	uint64_t end = mono_ns() + (uint64_t)DEADLINE_S * 1000000000ull;
	while (atomic_load_explicit(&p->state, memory_order_acquire) != 2 && mono_ns() < end)
		sched_yield();
	return 1;
}

static void *inlib_main(void *arg)
{
	struct inlib *p = arg;
	p->call(inlib_cb, p);
	return NULL;
}

static void *open_testlib(int (**call)(int (*)(void *), void *))
{
	void *h = dlopen(TESTLIB, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", TESTLIB, dlerror());
	*call = (int (*)(int (*)(void *), void *))dlsym(h, "sprobe_testlib_call");
	assert_non_null(*call);
	return h;
}

/* True if the library is no longer loaded (its pages unmapped). */
static bool testlib_gone(void)
{
	void *h = dlopen(TESTLIB, RTLD_NOW | RTLD_NOLOAD);
	if (h)
		dlclose(h);
	return h == NULL;
}

static void inlib_start(struct inlib *p)
{
	uint64_t end = mono_ns() + (uint64_t)DEADLINE_S * 1000000000ull;
	assert_int_equal(pthread_create(&p->th, NULL, inlib_main, p), 0);
	while (atomic_load_explicit(&p->state, memory_order_acquire) != 1) {
		if (mono_ns() > end)
			fail_msg("thread never entered the library");
		sched_yield();
	}
}

/* Capture snap until p's thread is in it (a thread still leaving the
 * previous capture's handler is dropped as blocked: retry). */
static struct sprobe_thread_sample *capture_inlib(struct sprobe_snapshot *snap, struct inlib *p)
{
	uint64_t end = mono_ns() + (uint64_t)DEADLINE_S * 1000000000ull;
	pid_t tid = atomic_load(&p->tid);
	do {
		assert_int_equal(sprobe_capturer__capture(capturer(), snap), 0);
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(snap); i++) {
			struct sprobe_thread_sample *t = sprobe_snapshot__thread(snap, i);
			if (t->tid == tid && t->stage == SPROBE_STAGE_RAW)
				return t;
		}
	} while (mono_ns() < end);
	fail_msg("thread %d never captured", (int)tid);
	return NULL;
}

/*
 * The sample was captured inside the library; the inventory was refreshed
 * while it was loaded; then the library is dlclose()d (unmapped) and the
 * sample unwound without a refresh. cold: nothing of the library was read
 * before (its .eh_frame_hdr would be read now); warm: the same sample was
 * unwound before the dlclose (rows cached: the walk must give the same
 * frames without reading the unmapped code).
 */
static void check_unwind_after_dlclose(bool warm)
{
	struct sprobe_snapshot *snap = sprobe_snapshot__new(64, 0);
	struct inlib p = { 0 };
	void *h = open_testlib(&p.call);
	struct sprobe_unwinder *u = sprobe_unwinder__new(NULL);
	struct sprobe_unwinder_stats st;
	struct sprobe_frame before[SPROBE_MAX_FRAMES];
	enum sprobe_unwind_stop why;
	uint32_t nbefore = 0;
	int n;

	assert_non_null(snap);
	assert_non_null(u);
	inlib_start(&p);
	struct sprobe_thread_sample *t = capture_inlib(snap, &p);
	/* The inventory knows the library (refreshed while it is loaded). */
	assert_true(sprobe_modules__refresh(sprobe_unwinder__modules(u)) >= 0);
	const struct sprobe_module *m =
		sprobe_modules__find(sprobe_unwinder__modules(u), (uint64_t)(uintptr_t)p.call);
	assert_non_null(m);
	if (warm) {
		n = sprobe_unwinder__unwind(u, t, &why);
		assert_true(n >= 4); /* cb, testlib_inner, sprobe_testlib_call, ... */
		nbefore = t->nframes;
		memcpy(before, t->frames, nbefore * sizeof(before[0]));
		bool in_lib = false;
		for (uint32_t i = 0; i < nbefore; i++)
			in_lib |= before[i].pc >= m->start && before[i].pc < m->end;
		assert_true(in_lib);
	}
	atomic_store_explicit(&p.state, 2, memory_order_release);
	assert_int_equal(pthread_join(p.th, NULL), 0);
	assert_int_equal(dlclose(h), 0);
	/* Unloaded: the round's pins were all released. */
	assert_true(testlib_gone());

	t->stage = SPROBE_STAGE_RAW;
	n = sprobe_unwinder__unwind(u, t, &why);
	print_message("%s unwind after dlclose: %d frames, stop %s\n", warm ? "warm" : "cold", n,
		      sprobe_unwind_stop__str(why));
	assert_true(n >= 1);
	assert_int_equal(sprobe_unwinder__stats(u, &st), 0);
	print_message("  pins %llu, pin failures %llu\n", (unsigned long long)st.pins,
		      (unsigned long long)st.pin_failures);
	if (warm) {
		/* Cached rows: the same frames, nothing of the library read. */
		assert_int_equal(t->nframes, nbefore);
		for (uint32_t i = 0; i < nbefore; i++)
			assert_int_equal(t->frames[i].pc, before[i].pc);
	} else {
		/* The library's CFI was needed and could not be pinned. */
		assert_true(st.pin_failures >= 1);
	}
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(snap);
}

static void test_unwind_after_dlclose_cold(void **state)
{
	check_unwind_after_dlclose(false);
}

static void test_unwind_after_dlclose_warm(void **state)
{
	check_unwind_after_dlclose(true);
}

static void *dl_cycler(void *arg)
{
	struct inlib *p = arg;
	uint32_t x = 12345;
	while (!atomic_load(&p->quit)) {
		int (*call)(int (*)(void *), void *);
		/* Time inside the library varies (1k..200k iterations) so the
		 * unload lands at every point of the capture-unwind round. */
		x = x * 1103515245u + 12345u;
		atomic_store(&p->spins, 1000 + (long)((x >> 8) % 200000));
		void *h = dlopen(TESTLIB, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			return (void *)1;
		call = (int (*)(int (*)(void *), void *))dlsym(h, "sprobe_testlib_call");
		call(inlib_cb, p);
		dlclose(h);
		atomic_fetch_add(&p->cycles, 1);
	}
	return NULL;
}

/*
 * A thread dlopen()s the library, runs in it and dlclose()s it in a loop
 * while this thread captures and unwinds it (the sampler's order: capture,
 * refresh, unwind), caches flushed every other round so the cold path
 * (.eh_frame_hdr, .eh_frame) races the unload too.
 */
static void test_unwind_races_dlclose(void **state)
{
	const char *s = getenv("SPROBE_DLCLOSE_ROUNDS");
	long rounds = s && *s ? atol(s) : 3000;
	struct sprobe_snapshot *snap = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder *u = sprobe_unwinder__new(NULL);
	struct sprobe_unwinder_stats st;
	struct inlib p = { 0 };
	void *ret = NULL;
	long unwound = 0;

	assert_non_null(snap);
	assert_non_null(u);
	capturer();
	assert_int_equal(pthread_create(&p.th, NULL, dl_cycler, &p), 0);
	for (long r = 0; r < rounds; r++) {
		if (r & 1)
			sprobe_unwinder__flush(u);
		assert_int_equal(sprobe_capturer__capture(capturer(), snap), 0);
		/* 0 when the one other thread was dropped (still leaving the
		 * previous capture's handler, the signal blocked). */
		int k = sprobe_unwinder__unwind_snapshot(u, snap);
		assert_true(k >= 0);
		unwound += k;
	}
	atomic_store(&p.quit, 1);
	assert_int_equal(pthread_join(p.th, &ret), 0);
	assert_null(ret);
	assert_int_equal(sprobe_unwinder__stats(u, &st), 0);
	print_message("%ld rounds, %ld samples unwound, %ld dlopen/dlclose cycles; pins %llu, "
		      "pin failures %llu, refreshes that changed the set %llu\n",
		      rounds, unwound, atomic_load(&p.cycles), (unsigned long long)st.pins,
		      (unsigned long long)st.pin_failures,
		      (unsigned long long)st.module_refreshes);
	assert_true(atomic_load(&p.cycles) > 0);
	assert_true(unwound > rounds / 2);
	/* Every pin was released: the library is unloaded. */
	assert_true(testlib_gone());
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(snap);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_unwind_after_dlclose_cold, setup),
	cmocka_unit_test_setup(test_unwind_after_dlclose_warm, setup),
	cmocka_unit_test_setup(test_unwind_races_dlclose, setup),
};

SPROBE_TEST_MAIN(tests)
