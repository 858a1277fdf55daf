/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Debug files by build-id from debuginfod servers (elfutils' libdebuginfod,
 * as perf, gdb and eu-stack use it), for inventories made with
 * opts.debuginfod: stackprobe report, never the agent (a lookup is network
 * access, up to DEBUGINFOD_TIMEOUT seconds, from inside someone else's
 * process at flush).
 *
 * libdebuginfod is opened with dlopen("libdebuginfod.so.1") on the first
 * lookup, so neither the agent nor the CLI links it (it pulls libcurl in)
 * and a machine without it just has no lookups. The servers are
 * DEBUGINFOD_URLS (space-separated); downloads go to libdebuginfod's cache
 * (DEBUGINFOD_CACHE_PATH, default $XDG_CACHE_HOME/debuginfod_client), where
 * a second lookup finds them without the network. libdebuginfod's own
 * environment applies (DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXTIME, ...).
 *
 * One client for the process, behind a mutex: thread-safe, not
 * async-signal-safe. After a failure that is not "this server has no such
 * file" (connection refused, timeout, DNS), no more lookups are made: a
 * server that is down costs one timeout, not one per module.
 */
#ifndef SPROBE_SYMBOLS_DEBUGINFOD_H
#define SPROBE_SYMBOLS_DEBUGINFOD_H

#include <stddef.h>
#include <stdint.h>

/* Fetch (or find in the cache) the debug file of build-id id[len]. Returns
 * 0 and *path (malloc'd, the caller frees: a file in the cache), -ENOENT
 * (no server has it), -ENOSYS (DEBUGINFOD_URLS unset or empty, or no
 * libdebuginfod), or the -errno that made lookups stop (-ECONNREFUSED,
 * -ETIMEDOUT, ...; also returned by every later call). */
int sprobe__debuginfod_find(const uint8_t *id, size_t len, char **path);

/* 0, or the -errno that stopped lookups (see above). */
int sprobe__debuginfod_down(void);

#endif
