/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Capture + unwind, orchestrated: the one place where the capturer and the
 * unwinder meet. The data flows one way (capture -> unwind): the unwinder
 * walks copies and says which zero-pause walks came up short
 * (sprobe_unwinder__short_walks()); the policy "re-capture those with a
 * signal" is the orchestrator's, here. The sampler's rounds and the public
 * conveniences sprobe_unwinder__resolve() / sprobe_capture_and_resolve()
 * (declared in <stackprobe/unwind.h>) share it.
 */
#include <errno.h>

#include <stackprobe/capture.h>
#include <stackprobe/unwind.h>

int sprobe_unwinder__resolve(struct sprobe_unwinder *u, struct sprobe_capturer *c,
			     struct sprobe_snapshot *snap)
{
	const uint32_t *idx;
	uint32_t nshort;
	int ret, done;

	if (!u || !c || !snap)
		return -EINVAL;
	done = sprobe_unwinder__unwind_snapshot(u, snap);
	if (done < 0)
		return done;
	nshort = sprobe_unwinder__short_walks(u, &idx);
	if (!nshort)
		return done;
	/* The threads run again since the capture; a signal now gives their
	 * whole register set (the register gap, docs/capture.md). */
	ret = sprobe_capturer__recapture(c, snap, idx, nshort);
	if (ret < 0)
		return ret;
	for (uint32_t k = 0; k < nshort; k++) {
		struct sprobe_thread_sample *t = sprobe_snapshot__thread(snap, idx[k]);

		if (t && t->stage != SPROBE_STAGE_EMPTY)
			sprobe_unwinder__unwind(u, t, NULL);
	}
	return done;
}

int sprobe_capture_and_resolve(struct sprobe_capturer *c, struct sprobe_snapshot *snap,
			       struct sprobe_unwinder *u)
{
	int ret;

	if (!c || !snap || !u)
		return -EINVAL;
	ret = sprobe_capturer__capture(c, snap);
	if (ret < 0)
		return ret;
	/* Every window is closed when capture returns: all threads run. */
	ret = sprobe_unwinder__resolve(u, c, snap);
	return ret < 0 ? ret : 0;
}
