/* SPDX-License-Identifier: BSD-2-Clause */
/* One line of the control protocol (contract in ctl_line.h). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "userspace/common/clock.h"
#include "userspace/common/ctl_line.h"

int sprobe_ctl__read_line(const struct sprobe_ctl_sock *s, char *buf, size_t cap, int ms)
{
	size_t n = 0;
	uint64_t end = sprobe_mono_ns() + (uint64_t)ms * 1000000ull;

	if (cap < 2)
		return -E2BIG;
	for (;;) {
		int fd = s->get(s->ctx);
		if (fd < 0)
			return fd;
		ssize_t r = recv(fd, buf + n, cap - 1 - n, MSG_DONTWAIT);
		int e = errno;
		if (s->put)
			s->put(s->ctx);
		if (r == 0)
			return 0;
		if (r > 0) {
			n += (size_t)r;
			char *nl = memchr(buf, '\n', n);
			if (nl) {
				*nl = '\0';
				return (int)(nl - buf);
			}
			if (n >= cap - 1)
				return -E2BIG;
			continue;
		}
		if (e != EAGAIN && e != EINTR)
			return -e;
		uint64_t now = sprobe_mono_ns();
		if (now >= end)
			return -ETIMEDOUT;
		/* The number may have moved since (the agent's): a wake-up on
		 * a stale one costs one more EAGAIN. */
		struct pollfd p = { .fd = fd, .events = POLLIN };
		poll(&p, 1, (int)((end - now) / 1000000ull) + 1);
	}
}
