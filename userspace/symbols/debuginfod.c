/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libdebuginfod through dlopen (see debuginfod.h for the contract and why
 * it is dlopen'd and not linked).
 */
#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "userspace/common/dl_table.h"
#include "userspace/symbols/debuginfod.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int state;		/* 0 not tried, 1 ready, -errno unusable */
static int down;		/* -errno that stopped lookups, or 0 */
static void *dl;
static debuginfod_client *client;
static int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);

static int init(void)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	debuginfod_client *(*begin)(void);

	if (!urls || !urls[strspn(urls, " ")])
		return -ENOSYS;
	dl = sprobe__dl_open("libdebuginfod.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!dl)
		return -ENOSYS;
	begin = (debuginfod_client * (*)(void)) dlsym(dl, "debuginfod_begin");
	find_debuginfo = (int (*)(debuginfod_client *, const unsigned char *, int, char **))dlsym(
		dl, "debuginfod_find_debuginfo");
	if (!begin || !find_debuginfo || !(client = begin())) {
		dlclose(dl);
		dl = NULL;
		return -ENOSYS;
	}
	return 1;
}

int sprobe__debuginfod_find(const uint8_t *id, size_t len, char **path)
{
	int ret, fd;

	*path = NULL;
	if (len == 0 || len > 64)
		return -ENOENT;
	pthread_mutex_lock(&lock);
	if (state == 0)
		state = init();
	if (state != 1) {
		ret = state;
	} else if (down) {
		ret = down;
	} else {
		fd = find_debuginfo(client, id, (int)len, path);
		if (fd >= 0) {
			close(fd);
			ret = 0;
		} else {
			free(*path);
			*path = NULL;
			/* "not there" from a server that answered: the next
			 * build-id may be; anything else: the servers are
			 * unreachable, stop asking */
			ret = fd == -ENOENT ? -ENOENT : fd;
			if (ret != -ENOENT)
				down = ret ? ret : -EIO;
		}
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

int sprobe__debuginfod_down(void)
{
	int d;

	pthread_mutex_lock(&lock);
	d = down;
	pthread_mutex_unlock(&lock);
	return d;
}
