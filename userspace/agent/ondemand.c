/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Samplers started and stopped after the constructor (docs/AGENT.md "On
 * demand"): by the control channel (control.c, `stackprobe record -p`)
 * and by continuous profiling (continuous.c), with the options the
 * constructor kept in sprobe_ag.base. One sampler per process image:
 * the STACKPROBE_AGENT=1 table sampler makes way while a recording runs
 * and starts again after it. sprobe_ag.od_lock serialises these starts
 * and stops with each other and with sprobe_agent__stop() (exit, exec),
 * so a recording's part is finished once, by whoever stops it first.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include <stackprobe/sampler.h>

#include "userspace/agent/agent_internal.h"

/* Pick the capture signal for a sampler started on demand: the one
 * STACKPROBE_SIGNAL named, else the highest real-time signal that is
 * still free now (the program may have taken the one the constructor saw
 * free). Under sprobe_ag.od_lock. */
static int ondemand_signo(void)
{
	if (sprobe_ag.signo_fixed)
		return sprobe_ag.base.signo;
	for (int sg = SIGRTMAX; sg >= SIGRTMIN; sg--) {
		struct sigaction cur;
		if (sigaction(sg, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
		    cur.sa_handler == SIG_DFL)
			return sg;
	}
	return 0;
}

/* Under sprobe_ag.od_lock: start a sampler from o, publishing it. */
static int ondemand_run(struct sprobe_sampler_opts *o)
{
	o->signo = ondemand_signo();
	if (!o->signo)
		return -EBUSY;
	__atomic_store_n(&sprobe_ag.signo, o->signo, __ATOMIC_RELAXED);
	struct sprobe_sampler *s = sprobe_sampler__start(o);
	if (!s) {
		int err = -errno;
		__atomic_store_n(&sprobe_ag.signo, 0, __ATOMIC_RELAXED);
		return err;
	}
	/* Zero-pause's self-test passed here: later starts skip it. */
	if (sprobe_sampler__zero_pause(s, NULL, 0) == 1)
		sprobe_ag.base.zero_pause_pretested = true;
	/* Release; pairs with the acquire exchange in sprobe_agent__stop(). */
	__atomic_store_n(&sprobe_ag.sampler, s, __ATOMIC_RELEASE);
	sprobe_agent__at_exit_once();
	return 0;
}

bool sprobe_agent__ondemand_ready(void)
{
	return __atomic_load_n(&sprobe_ag.base_ready, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&sprobe_ag.ctor_done, __ATOMIC_ACQUIRE);
}

int sprobe_agent__ondemand_start(const char *dir, double freq, uint32_t mode, unsigned *exec_index)
{
	char path[PATH_MAX];
	int err;

	if (!__atomic_load_n(&sprobe_ag.base_ready, __ATOMIC_ACQUIRE))
		return -ECANCELED; /* the constructor found a bad setting */
	if (freq <= 0) { /* the environment's (continuous.c) */
		freq = sprobe_ag.base.freq_hz > 0 ? sprobe_ag.base.freq_hz : 99;
		mode = sprobe_ag.base.mode;
	}

	if ((size_t)snprintf(path, sizeof(path), "%s/%d.%u.part", dir, (int)getpid(),
			     sprobe_ag.exec_index) >= sizeof(path))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&sprobe_ag.od_lock);
	/* STACKPROBE_AGENT=1: the table sampler makes way (one sampler per
	 * process); the recording's sampler publishes the table meanwhile. */
	struct sprobe_sampler *table = __atomic_exchange_n(&sprobe_ag.sampler, NULL, __ATOMIC_ACQ_REL);
	if (table)
		sprobe_sampler__stop(table);
	struct sprobe_sampler_opts o = sprobe_ag.base;
	o.output = path;
	o.freq_hz = freq;
	o.mode = mode;
	/* What a recording keeps if the service is killed meanwhile. */
	o.flush_interval_ns = 20000000ull;
	err = ondemand_run(&o);
	if (err && !sprobe_ag.idle) {
		struct sprobe_sampler_opts t = sprobe_ag.base;
		ondemand_run(&t);
	}
	pthread_mutex_unlock(&sprobe_ag.od_lock);
	*exec_index = sprobe_ag.exec_index;
	return err;
}

int sprobe_agent__ondemand_stop(void)
{
	int err = 0;

	pthread_mutex_lock(&sprobe_ag.od_lock);
	struct sprobe_sampler *s = __atomic_exchange_n(&sprobe_ag.sampler, NULL, __ATOMIC_ACQ_REL);
	if (s)
		err = sprobe_sampler__stop(s);
	else
		err = -ESRCH; /* stopped already: exit, exec, or the signal taken */
	__atomic_store_n(&sprobe_ag.signo, 0, __ATOMIC_RELAXED);
	if (!sprobe_ag.idle) {
		struct sprobe_sampler_opts t = sprobe_ag.base;
		ondemand_run(&t);
	}
	pthread_mutex_unlock(&sprobe_ag.od_lock);
	return err;
}
