/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One line of the control channel's text protocol (userspace/agent/
 * control.c serves it, userspace/cli/cmd_record_pid.c asks), read by both
 * ends the same way. The socket is named by a callback because the
 * agent's descriptor can move between two reads (a registry handle,
 * userspace/common/fds.h: got and put around each use); the CLI's is a
 * plain descriptor.
 */
#ifndef SPROBE_COMMON_CTL_LINE_H
#define SPROBE_COMMON_CTL_LINE_H

#include <stddef.h>

struct sprobe_ctl_sock {
	int (*get)(void *ctx);	/* the descriptor now, or -errno */
	void (*put)(void *ctx);	/* after each use of it; NULL: nothing */
	void *ctx;
};

/* Read one line within ms into buf (cap bytes, NUL-terminated, the '\n'
 * removed; what follows it in the same read is dropped: the protocol
 * sends one line and waits for the answer). Reads without blocking and
 * waits in poll(), so a blocking socket is fine too. Returns its length,
 * 0 on end of file, or -errno (-ETIMEDOUT, -E2BIG: no newline in cap - 1
 * bytes). Thread-safe for distinct sockets; not async-signal-safe. */
int sprobe_ctl__read_line(const struct sprobe_ctl_sock *s, char *buf, size_t cap, int ms);

#endif
