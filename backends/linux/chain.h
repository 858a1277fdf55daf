/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The capture signal shared with the program (backends/linux/chain.c):
 * what the LD_PRELOAD agent's signal wrappers (userspace/agent/) and the
 * tests call. Hidden: inside libstackprobe only.
 *
 * While a capturer runs, the kernel holds the capture handler for its
 * signal and the program's disposition of that signal is kept here; every
 * delivery that is not one of the probe's captures is given to it with its
 * flags and mask, as the kernel would (backends/linux/handler.c).
 */
#ifndef SPROBE_BACKENDS_LINUX_CHAIN_H
#define SPROBE_BACKENDS_LINUX_CHAIN_H

#include <signal.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Nonzero when sig is the capture signal of a running capturer (the
 * program's disposition of sig is then sprobe_lx_chain_sigaction()'s).
 * Any thread; async-signal-safe (one relaxed load). */
int sprobe_lx_chain_owns(int sig);

/* sigaction() on the shared capture signal: old gets the program's
 * disposition (what the kernel would return: glibc's flags, SA_RESTORER
 * included), act (if not NULL) becomes it; the kernel keeps the capture
 * handler (with the SA_RESTART of act's handler). Returns 0, -ENOENT if sig
 * is not shared (then call the real sigaction), -EAGAIN if the record
 * could not be read (writers lapping the ring). Any thread,
 * async-signal-safe (atomics and raw rt_sigaction calls): a handler may
 * re-install itself. */
int sprobe_lx_chain_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* Deliveries given to the program's disposition, and raw rt_sigaction
 * installs of the program moved behind the capture handler, since the
 * process started. Either pointer may be NULL. Any thread. */
void sprobe_lx_chain_stats(uint64_t *forwarded, uint64_t *absorbed);

#pragma GCC visibility pop

#endif
