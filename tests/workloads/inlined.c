/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A hot static inline function for tests/test_inline.c, built -O2 -g:
 * inner_hot is inlined into outer_fn (the compiler's choice at -O2; the
 * test checks it happened with eu-addr2line/addr2line -i), which main
 * calls. argv[1]: iterations (default 100000000); argv[2], optional: a
 * descriptor to write one byte to once main runs (every library mapped).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile uint64_t sink;

static inline uint64_t inner_hot(uint64_t n)
{
	uint64_t s = 0;

	for (uint64_t i = 0; i < n; i++)
		s = s * 31 + (i ^ sink);
	return s;
}

__attribute__((noinline)) static uint64_t outer_fn(uint64_t n)
{
	uint64_t r = inner_hot(n);

	sink = r;
	return r + 1;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000000;

	if (argc > 2) {
		int fd = atoi(argv[2]);

		if (write(fd, "r", 1) != 1)
			return 1;
		close(fd);
	}

	printf("%llu\n", (unsigned long long)outer_fn(n));
	return 0;
}
