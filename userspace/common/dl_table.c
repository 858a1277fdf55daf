/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Tables of a library's functions by dlopen (dl_table.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "userspace/common/dl_table.h"

static _Atomic int in_dlopen;

void *sprobe__dl_open(const char *name, int flags)
{
	void *h;

	atomic_fetch_add(&in_dlopen, 1);
	h = dlopen(name, flags);
	atomic_fetch_sub(&in_dlopen, 1);
	return h;
}

bool sprobe__dl_busy(void)
{
	return atomic_load(&in_dlopen) > 0;
}

static int fill(struct sprobe_dl *d)
{
	void *dl = sprobe__dl_open(d->soname, RTLD_NOW | RTLD_LOCAL);
	void *slot[64];

	if (!dl) {
		snprintf(d->why, sizeof(d->why), "%s", dlerror());
		return -ENOSYS;
	}
	if (d->n > sizeof(slot) / sizeof(slot[0])) {
		snprintf(d->why, sizeof(d->why), "%s: table too large", d->soname);
		return -ENOSYS;
	}
	for (size_t i = 0; i < d->n; i++) {
		slot[i] = dlsym(dl, d->names[i]);
		if (!slot[i]) {
			snprintf(d->why, sizeof(d->why), "%s: no %s", d->soname, d->names[i]);
			return -ENOSYS;
		}
	}
	/* POSIX: dlsym's object pointers convert to function pointers; the
	 * table is exactly n of them (each user checks its size). */
	memcpy(d->table, slot, d->n * sizeof(void *));
	return d->post ? d->post() : 0;
}

int sprobe__dl_load(struct sprobe_dl *d, const char **why)
{
	int st = atomic_load_explicit(&d->state, memory_order_acquire);

	if (!st) {
		pthread_mutex_lock(&d->lock);
		st = atomic_load_explicit(&d->state, memory_order_relaxed);
		if (!st) {
			int err = fill(d);

			st = err ? err : 1;
			/* Release: the table's writes before any reader's use. */
			atomic_store_explicit(&d->state, st, memory_order_release);
		}
		pthread_mutex_unlock(&d->lock);
	}
	if (why)
		*why = st == 1 ? NULL : d->why;
	return st == 1 ? 0 : st;
}

bool sprobe__dl_failed(struct sprobe_dl *d)
{
	int st = atomic_load_explicit(&d->state, memory_order_acquire);

	return st < 0;
}
