/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Workload threads for tests/test_zero_pause.c and bench/bench_zero_pause.c:
 * a thread parked in a known call chain (a -> b -> c -> the blocking call),
 * and a poll/select loop that counts EINTR. tests/zeropause/chain.c is
 * compiled twice (mk/zeropause.mk): with frame pointers (names ending _fp)
 * and without (_nofp), so the same chain exists in both builds.
 */
#ifndef SPROBE_TESTS_ZP_CHAIN_H
#define SPROBE_TESTS_ZP_CHAIN_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

enum zp_block {
	ZP_READ = 0,	/* read(2) on a pipe */
	ZP_FUTEX,	/* FUTEX_WAIT on park.word */
	ZP_POLL,	/* poll(2) on a pipe, 10 s timeout */
	ZP_NANOSLEEP,	/* nanosleep(2), 10 s */
	ZP_SELECT,	/* select(2) on a pipe, 10 s timeout */
	ZP__COUNT
};

struct zp_park {
	int kind;		/* enum zp_block */
	int rfd;		/* read end (READ, POLL, SELECT) */
	_Atomic uint32_t word;	/* FUTEX: 0 waits; the stopper sets 1 */
	_Atomic int stop;	/* set by the test, then wake the thread */
	_Atomic pid_t tid;	/* published by the thread (release) */
	_Atomic unsigned eintr;	/* EINTR returns seen by the blocking loop */
	_Atomic unsigned wakes;	/* blocking calls that returned */
};

/* Thread entry points: arg is a struct zp_park. */
void *zp_park_main_fp(void *arg);
void *zp_park_main_nofp(void *arg);

/* Addresses of the chain functions, for symbol checks. */
extern const char *const zp_chain_names_fp[3];
extern const char *const zp_chain_names_nofp[3];

#endif
