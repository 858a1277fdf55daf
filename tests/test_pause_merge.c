/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The eBPF companion's matcher on synthetic windows (pairs, percentiles,
 * unmatched reasons, slack) and the trace written from them. No BPF needed.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include <bpf/bpf.h>

#include <stackprobe/pause.h>
#include <stackprobe/trace.h>

#include "sprobe_test.h"
#include "userspace/pause/pause_internal.h"
#include "pause_fixture.h"

/* ------------------------------------------------------------------ */
/* Matcher on synthetic windows                                        */

static struct sprobe_pause_kwindow kwin(pid_t tid, uint64_t gen, uint64_t del, uint64_t ret,
					uint64_t off)
{
	return (struct sprobe_pause_kwindow){
		.tid = tid, .signo = TEST_SIGNO, .generate_ns = gen, .deliver_ns = del,
		.sigreturn_ns = ret, .offcpu_ns = off,
		.flags = (gen ? 0 : SPROBE_PAUSE_KW_NO_GENERATE) |
			 (ret ? 0 : SPROBE_PAUSE_KW_INCOMPLETE),
	};
}

static struct sprobe_pause_swindow swin(pid_t tid, uint64_t sig, uint64_t entry, uint64_t exit_)
{
	return (struct sprobe_pause_swindow){
		.tid = tid, .signal_ns = sig, .entry_ns = entry, .exit_ns = exit_,
	};
}

static const struct sprobe_pause_unmatched *find_unmatched(const struct sprobe_pause_merge *m,
							    uint32_t side, uint32_t idx)
{
	size_t n;
	const struct sprobe_pause_unmatched *u = sprobe_pause_merge__unmatched(m, &n);

	for (size_t i = 0; i < n; i++)
		if (u[i].side == side && u[i].idx == idx)
			return &u[i];
	return NULL;
}

/* Two threads, inputs shuffled: every window pairs with its container and
 * the statistics follow the documented definitions. */
static void test_merge_pairs_and_stats(void **state)
{
	/* Thread 7: pauses 100, 200, 300, 400 ns (kernel), handler inside
	 * each, 40 ns shorter; thread 9: one window. Index order shuffled. */
	struct sprobe_pause_kwindow kw[] = {
		kwin(7, 2900, 3000, 3300, 0),	/* pause 300 */
		kwin(9, 1000, 1500, 2500, 50),	/* pause 1000 */
		kwin(7, 900, 1000, 1100, 0),	/* pause 100 */
		kwin(7, 4950, 5000, 5400, 30),	/* pause 400 */
		kwin(7, 1800, 2000, 2200, 10),	/* pause 200 */
	};
	struct sprobe_pause_swindow sw[] = {
		swin(7, 4900, 5020, 5380),	/* in kw[3] */
		swin(7, 850, 1020, 1080),	/* in kw[2] */
		swin(9, 990, 1600, 2400),	/* in kw[1] */
		swin(7, 1700, 2020, 2180),	/* in kw[4] */
		swin(7, 2800, 3020, 3280),	/* in kw[0] */
	};
	const uint32_t expect_k_for_s[] = { 3, 2, 1, 4, 0 };
	struct sprobe_pause_merge_opts o = { .sz = sizeof(o), .wall_ns = 10000 };
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, 5, sw, 5, &o);
	size_t np, nu, nt;

	assert_non_null(m);
	const struct sprobe_pause_pair *pp = sprobe_pause_merge__pairs(m, &np);
	sprobe_pause_merge__unmatched(m, &nu);
	const struct sprobe_pause_summary *th = sprobe_pause_merge__threads(m, &nt);
	assert_int_equal(np, 5);
	assert_int_equal(nu, 0);
	for (size_t i = 0; i < np; i++)
		assert_int_equal(pp[i].kernel_idx, expect_k_for_s[pp[i].self_idx]);
	assert_int_equal(nt, 2);
	assert_int_equal(th[0].tid, 7);
	assert_int_equal(th[1].tid, 9);
	assert_int_equal(th[0].matched, 4);

	/* Thread 7 kernel pauses {100,200,300,400}: nearest-rank median is
	 * the 2nd value, p99 the 4th. */
	assert_int_equal(th[0].kernel_pause.count, 4);
	assert_int_equal(th[0].kernel_pause.median, 200);
	assert_int_equal(th[0].kernel_pause.p99, 400);
	assert_int_equal(th[0].kernel_pause.max, 400);
	assert_int_equal(th[0].kernel_pause.total, 1000);
	/* Self pauses {60,160,260,360}; difference {40,40,40,40}. */
	assert_int_equal(th[0].self_pause.total, 840);
	assert_int_equal(th[0].difference.median, 40);
	assert_int_equal(th[0].difference.total, 160);
	/* Delivery {100,200,100,50} -> sorted {50,100,100,200}. */
	assert_int_equal(th[0].delivery.median, 100);
	assert_int_equal(th[0].delivery.max, 200);
	assert_int_equal(th[0].offcpu.total, 40);
	assert_true(th[0].pause_share > 0.0999 && th[0].pause_share < 0.1001);

	const struct sprobe_pause_summary *all = sprobe_pause_merge__overall(m);
	assert_int_equal(all->tid, 0);
	assert_int_equal(all->matched, 5);
	assert_int_equal(all->kernel_pause.total, 2000);
	assert_int_equal(all->kernel_pause.max, 1000);
	/* {100,200,300,400,1000}: median 3rd = 300. */
	assert_int_equal(all->kernel_pause.median, 300);
	assert_int_equal(all->difference.total, 160 + 200);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(sprobe_pause_merge__print(m, f), 0);
	fclose(f);
	assert_non_null(strstr(buf, "thread 7: 4 matched"));
	assert_non_null(strstr(buf, "all threads: 5 matched"));
	free(buf);
	sprobe_pause_merge__free(m);
}

/* Percentiles by nearest rank on 1..100 and on a single value. */
static void test_merge_percentiles(void **state)
{
	struct sprobe_pause_kwindow kw[100];
	for (int i = 0; i < 100; i++)	/* pauses 100..1 ns, reversed on purpose */
		kw[i] = kwin(1, 0, 1000 * (uint64_t)(i + 1), 1000 * (uint64_t)(i + 1) + 100 - i, 0);
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, 100, NULL, 0, NULL);
	assert_non_null(m);
	const struct sprobe_pause_summary *all = sprobe_pause_merge__overall(m);
	assert_int_equal(all->kernel_pause.count, 100);
	assert_int_equal(all->kernel_pause.median, 50);
	assert_int_equal(all->kernel_pause.p99, 99);
	assert_int_equal(all->kernel_pause.max, 100);
	assert_int_equal(all->kernel_pause.total, 5050);
	assert_int_equal(all->delivery.count, 0);	/* no generations */
	assert_int_equal(all->kernel_only, 100);
	assert_int_equal(all->unmatched_by_reason[SPROBE_PAUSE_R_NO_SELF], 100);
	sprobe_pause_merge__free(m);

	kw[0] = kwin(1, 10, 20, 37, 0);
	m = sprobe_pause_merge__new(kw, 1, NULL, 0, NULL);
	assert_non_null(m);
	all = sprobe_pause_merge__overall(m);
	assert_int_equal(all->kernel_pause.median, 17);
	assert_int_equal(all->kernel_pause.p99, 17);
	assert_int_equal(all->delivery.median, 10);
	sprobe_pause_merge__free(m);
}

/* Every reason, each from the situation that causes it. */
static void test_merge_unmatched_reasons(void **state)
{
	struct sprobe_pause_kwindow kw[] = {
		kwin(5, 100, 200, 300, 0),	/* 0: before any self window */
		kwin(5, 900, 1000, 1100, 0),	/* 1: matched with sw[1] */
		kwin(5, 1900, 2000, 2100, 0),	/* 2: no self window: dropped */
		kwin(5, 2900, 3000, 0, 0),	/* 3: incomplete */
		kwin(5, 3900, 4000, 4100, 0),	/* 4: overlaps sw[3] */
		kwin(5, 5900, 6000, 6100, 0),	/* 5: matched with sw[5] */
		kwin(5, 9900, 9950, 9990, 0),	/* 6: after every self window */
	};
	struct sprobe_pause_swindow sw[] = {
		swin(5, 0, 50, 60),		/* 0: before the companion */
		swin(5, 0, 1010, 1090),		/* 1: matched */
		swin(5, 0, 1500, 1400),		/* 2: exit < entry */
		swin(5, 0, 4050, 4200),		/* 3: ends after kw[4]: clocks? */
		swin(5, 0, 5000, 5100),		/* 4: inside the range, no kernel */
		swin(5, 0, 6010, 6090),		/* 5: matched */
		swin(6, 0, 7000, 7100),		/* 6: other thread, no kernel */
		swin(5, 0, 9000, 9100),		/* 7: last self window */
		swin(5, 1950, 0, 0),		/* 8: capturer gave up on it */
	};
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, 7, sw, 9, NULL);
	size_t np, nu;

	assert_non_null(m);
	sprobe_pause_merge__pairs(m, &np);
	sprobe_pause_merge__unmatched(m, &nu);
	assert_int_equal(np, 2);
	assert_int_equal(nu, 7 + 9 - 2 * 2);
	struct { uint32_t side, idx, reason; } want[] = {
		{ SPROBE_PAUSE_KERNEL, 0, SPROBE_PAUSE_R_NO_SELF },
		{ SPROBE_PAUSE_KERNEL, 2, SPROBE_PAUSE_R_NO_SELF },
		{ SPROBE_PAUSE_KERNEL, 3, SPROBE_PAUSE_R_INCOMPLETE },
		{ SPROBE_PAUSE_KERNEL, 4, SPROBE_PAUSE_R_NO_SELF },
		{ SPROBE_PAUSE_KERNEL, 6, SPROBE_PAUSE_R_OUTSIDE_SELF },
		{ SPROBE_PAUSE_SELF, 0, SPROBE_PAUSE_R_OUTSIDE_KERNEL },
		{ SPROBE_PAUSE_SELF, 2, SPROBE_PAUSE_R_BAD },
		{ SPROBE_PAUSE_SELF, 3, SPROBE_PAUSE_R_NOT_CONTAINED },
		{ SPROBE_PAUSE_SELF, 4, SPROBE_PAUSE_R_NO_KERNEL },
		{ SPROBE_PAUSE_SELF, 6, SPROBE_PAUSE_R_NO_KERNEL },
		{ SPROBE_PAUSE_SELF, 7, SPROBE_PAUSE_R_NO_KERNEL },
		{ SPROBE_PAUSE_SELF, 8, SPROBE_PAUSE_R_SELF_DROPPED },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct sprobe_pause_unmatched *u = find_unmatched(m, want[i].side, want[i].idx);
		assert_non_null(u);
		if (u->reason != want[i].reason)
			fail_msg("side %u idx %u: reason %s, want %s", want[i].side, want[i].idx,
				 sprobe_pause_reason__str(u->reason),
				 sprobe_pause_reason__str(want[i].reason));
	}
	sprobe_pause_merge__free(m);

	/* With events lost by the companion, "no kernel window" says so. */
	struct sprobe_pause_merge_opts o = { .sz = sizeof(o), .kernel_lost = 3 };
	m = sprobe_pause_merge__new(kw, 7, sw, 9, &o);
	assert_non_null(m);
	assert_int_equal(find_unmatched(m, SPROBE_PAUSE_SELF, 4)->reason,
			 SPROBE_PAUSE_R_KERNEL_LOST);
	sprobe_pause_merge__free(m);
}

/* Slack: a self window 5 ns outside its kernel window matches with 10 ns of
 * slack, not with 0 (then it is "not contained": the clocks disagree). */
static void test_merge_slack(void **state)
{
	struct sprobe_pause_kwindow kw[] = { kwin(3, 100, 200, 300, 0) };
	struct sprobe_pause_swindow sw[] = { swin(3, 50, 195, 305) };
	struct sprobe_pause_merge_opts o = { .sz = sizeof(o) };
	size_t np;

	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, 1, sw, 1, &o);
	assert_non_null(m);
	sprobe_pause_merge__pairs(m, &np);
	assert_int_equal(np, 0);
	assert_int_equal(find_unmatched(m, SPROBE_PAUSE_SELF, 0)->reason,
			 SPROBE_PAUSE_R_NOT_CONTAINED);
	sprobe_pause_merge__free(m);

	o.slack_ns = 10;
	m = sprobe_pause_merge__new(kw, 1, sw, 1, &o);
	assert_non_null(m);
	sprobe_pause_merge__pairs(m, &np);
	assert_int_equal(np, 1);
	/* self 110 > kernel 100: the difference is clamped at 0. */
	assert_int_equal(sprobe_pause_merge__overall(m)->difference.max, 0);
	sprobe_pause_merge__free(m);
}

/* From the capture backend's sample to a self window. */
static void test_swindow_from_sample(void **state)
{
	struct sprobe_thread_sample *smp = calloc(1, sizeof(*smp));
	struct sprobe_pause_swindow w;

	assert_non_null(smp);
	smp->tid = 77;
	assert_int_equal(sprobe_pause_swindow__from_sample(&w, smp), -ENOENT);
	smp->signal_ns = 10;
	smp->entry_ns = 20;
	smp->exit_ns = 30;
	assert_int_equal(sprobe_pause_swindow__from_sample(&w, smp), 0);
	assert_int_equal(w.tid, 77);
	assert_int_equal(w.signal_ns, 10);
	assert_int_equal(w.entry_ns, 20);
	assert_int_equal(w.exit_ns, 30);
	/* Dropped after the signal was sent: kept, so the reason shows. */
	smp->entry_ns = 0;
	smp->drop_reason = SPROBE_DROP_TIMEOUT;
	assert_int_equal(sprobe_pause_swindow__from_sample(&w, smp), 0);
	assert_int_equal(w.entry_ns, 0);
	assert_int_equal(w.exit_ns, 0);
	assert_int_equal(sprobe_pause_swindow__from_sample(NULL, smp), -EINVAL);
	free(smp);
}

static void test_merge_bad_input(void **state)
{
	struct sprobe_pause_swindow sw = swin(1, 0, 1, 2);

	errno = 0;
	assert_null(sprobe_pause_merge__new(NULL, 1, NULL, 0, NULL));
	assert_int_equal(errno, EINVAL);
	assert_null(sprobe_pause_merge__new(NULL, 0, NULL, 2, NULL));
	assert_int_equal(errno, EINVAL);
	struct sprobe_pause_merge_opts o = { .sz = 1 };
	assert_null(sprobe_pause_merge__new(NULL, 0, &sw, 1, &o));
	assert_int_equal(errno, EINVAL);

	/* Empty is valid: no threads, zero statistics. */
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(NULL, 0, NULL, 0, NULL);
	size_t n = 1;
	assert_non_null(m);
	sprobe_pause_merge__threads(m, &n);
	assert_int_equal(n, 0);
	assert_int_equal(sprobe_pause_merge__overall(m)->kernel_pause.count, 0);
	sprobe_pause_merge__free(m);
	sprobe_pause_merge__free(NULL);
	assert_int_equal(sprobe_pause_merge__print(NULL, stdout), -EINVAL);
	assert_string_equal(sprobe_pause_reason__str(999), "unknown");
}


static void test_trace_json_synthetic(void **state)
{
	char path[] = "/tmp/sprobe-trace-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	assert_non_null(f);

	struct sprobe_trace_opts o = { .sz = sizeof(o), .pid = 42, .process_name = "demo \"q\"" };
	struct sprobe_trace *t = sprobe_trace__new(f, &o);
	assert_non_null(t);
	/* Awkward names: quotes, backslash, control, invalid UTF-8, UTF-8. */
	assert_int_equal(sprobe_trace__thread_name(t, 43, "wor\"ker\\1\n\x01"), 0);
	assert_int_equal(sprobe_trace__thread_name(t, 43, "second name ignored"), 0);
	assert_int_equal(sprobe_trace__thread_name(t, 44, "bad \xff\xfe utf8 \xc3\xa9"), 0);
	struct sprobe_pause_kwindow k1 = kwin(43, 1000, 2000, 5000, 100);
	struct sprobe_pause_kwindow k2 = kwin(44, 0, 7000, 0, 0);	/* incomplete */
	struct sprobe_pause_kwindow k3 = kwin(44, 8000, 9000, 9500, 0);
	struct sprobe_pause_swindow s1 = swin(43, 900, 2500, 4500);
	struct sprobe_pause_swindow s3 = swin(44, 0, 9100, 9400);
	assert_int_equal(sprobe_trace__kernel_window(t, &k1), 0);
	assert_int_equal(sprobe_trace__kernel_window(t, &k2), 0);
	assert_int_equal(sprobe_trace__kernel_window(t, &k3), 0);
	assert_int_equal(sprobe_trace__self_window(t, &s1), 0);
	assert_int_equal(sprobe_trace__self_window(t, &s3), 0);
	const char *frames[] = { "leaf", NULL, "main" };
	assert_int_equal(sprobe_trace__sample(t, 43, 2600, frames, 3, 3), 0);	/* weight 3 */
	assert_int_equal(sprobe_trace__sample(t, 45, 3000, frames, 0, 0), 0);	/* unnamed, 1 */
	/* Bad input is refused, not written. */
	struct sprobe_pause_swindow bad = swin(43, 0, 10, 5);
	assert_int_equal(sprobe_trace__self_window(t, &bad), -EINVAL);
	assert_int_equal(sprobe_trace__sample(t, 0, 1, NULL, 0, 1), -EINVAL);
	assert_int_equal(sprobe_trace__sample(t, 43, 1, NULL, 2, 1), -EINVAL);
	assert_int_equal(sprobe_trace__finish(t), 0);
	assert_int_equal(sprobe_trace__finish(t), -EINVAL);
	assert_int_equal(sprobe_trace__sample(t, 43, 1, NULL, 0, 1), -EINVAL);
	sprobe_trace__free(t);
	fclose(f);

	check_trace(path, 3, 2, 2, 4);	/* samples counted by weight: 3 + 1 */
	unlink(path);

	errno = 0;
	assert_null(sprobe_trace__new(NULL, &o));
	assert_int_equal(errno, EINVAL);
	o.pid = 0;
	assert_null(sprobe_trace__new(stdout, &o));
	sprobe_trace__free(NULL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_merge_pairs_and_stats),
	cmocka_unit_test(test_merge_percentiles),
	cmocka_unit_test(test_merge_unmatched_reasons),
	cmocka_unit_test(test_merge_slack),
	cmocka_unit_test(test_merge_bad_input),
	cmocka_unit_test(test_swindow_from_sample),
	cmocka_unit_test(test_trace_json_synthetic),
};

SPROBE_TEST_MAIN(tests)
