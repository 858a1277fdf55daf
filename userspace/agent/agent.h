/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the agent's files share (userspace/agent/): the LD_PRELOAD agent's
 * start/stop and the libc wrappers around it.
 */
#ifndef SPROBE_USERSPACE_AGENT_AGENT_H
#define SPROBE_USERSPACE_AGENT_AGENT_H

/* The capture signal of the sampler the agent runs in this process, 0 when
 * it runs none (never started, stopped, or the signal was yielded to the
 * program). Any thread; async-signal-safe (one relaxed load). */
int sprobe_agent__capture_signo(void);

#endif
