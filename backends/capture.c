/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The capturer's portable entry point: argument checks, the snapshot's
 * reset, timing and totals around the platform backend's capture. It
 * orchestrates, so the snapshot code (snapshot.c) never calls a backend and
 * a backend never calls back here (backend.h).
 */
#include <errno.h>

#include "backend.h"

int sprobe_capturer__capture(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	uint64_t t0;
	int err;

	if (!s) /* the backend says -EINVAL, or -ENOTSUP where there is none */
		return sprobe_backend__capture(c, NULL);
	if (atomic_load(&s->inflight))
		return -EBUSY; /* a started capture owns it: do not reset it */
	sprobe_snapshot__reset(s);
	t0 = sprobe_now_ns();
	err = sprobe_backend__capture(c, s);
	if (err)
		return err;
	s->stats.capture_ns = sprobe_now_ns() - t0;
	return sprobe_snapshot__finish(s);
}
