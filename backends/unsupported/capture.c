/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Platforms without a capture backend. Every capture fails with -ENOTSUP:
 * an empty snapshot would read as "this process has no other threads",
 * which is a different and false claim.
 *
 * Built in place of backends/<os>/ where there is none (the
 * test-unsupported lane of mk/capture.mk builds it on Linux to check the
 * contract).
 */
#include <errno.h>

#include "backends/backend.h"

struct sprobe_capturer *sprobe_capturer__new(const struct sprobe_capture_opts *opts)
{
	(void)opts;
	errno = ENOTSUP;
	return NULL;
}

void sprobe_capturer__zp_key(char *buf, size_t len)
{
	if (len)
		buf[0] = '\0'; /* no zero-pause here */
}

int sprobe_capturer__forget(struct sprobe_capturer *c)
{
	(void)c;
	return -ENOTSUP; /* the agent follows fork() children on Linux only */
}

void sprobe_capturer__free(struct sprobe_capturer *c)
{
	(void)c;
}

int sprobe_capturer__signo(const struct sprobe_capturer *c)
{
	(void)c;
	return -ENOTSUP;
}

int sprobe_capturer__exclude_tid(struct sprobe_capturer *c, pid_t tid)
{
	(void)c;
	(void)tid;
	return -ENOTSUP;
}

int sprobe_capturer__include_tid(struct sprobe_capturer *c, pid_t tid)
{
	(void)c;
	(void)tid;
	return -ENOTSUP;
}

int sprobe_capturer__cpu_collect(struct sprobe_capturer *c, struct sprobe_snapshot *s,
				 uint64_t interval_ns)
{
	(void)c;
	(void)s;
	(void)interval_ns;
	return -ENOTSUP;
}

int sprobe_capturer__cpu_stop(struct sprobe_capturer *c)
{
	(void)c;
	return -ENOTSUP;
}

int sprobe_capturer__zero_pause(const struct sprobe_capturer *c, char *why, size_t len)
{
	(void)c;
	if (why && len)
		why[0] = '\0';
	return -ENOTSUP;
}

int sprobe_capturer__zp_carry(struct sprobe_capturer *c, uint32_t min_checks, uint32_t max_rounds)
{
	(void)c;
	(void)min_checks;
	(void)max_rounds;
	return -ENOTSUP;
}

int sprobe_capturer__recapture(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			       const uint32_t *idx, uint32_t n)
{
	(void)c;
	(void)s;
	(void)idx;
	(void)n;
	return -ENOTSUP;
}

int sprobe_backend__capture(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	(void)c;
	(void)s;
	return -ENOTSUP;
}

int sprobe_capturer__cpu_engine(struct sprobe_capturer *c, uint32_t want, char *why, size_t len)
{
	(void)c;
	(void)want;
	if (why && len)
		why[0] = '\0';
	return -ENOTSUP;
}

uint32_t sprobe_capturer__cpu_unsourced(const struct sprobe_capturer *c, int *why)
{
	(void)c;
	if (why)
		*why = 0;
	return 0;
}

uint32_t sprobe_capturer__cpu_on_timer(const struct sprobe_capturer *c)
{
	(void)c;
	return 0;
}

int sprobe_capturer__cpu_usage(struct sprobe_capturer *c, struct sprobe_cpu_usage *out,
			       uint32_t max)
{
	(void)c;
	(void)out;
	(void)max;
	return -ENOTSUP;
}

int sprobe_backend__task_dir(const struct sprobe_capturer *c)
{
	(void)c;
	return -ENOTSUP;
}

int sprobe_capturer__cpu_usage_all(struct sprobe_capturer *c, struct sprobe_cpu_usage *out,
				   uint32_t max)
{
	return sprobe_capturer__cpu_usage(c, out, max);
}
