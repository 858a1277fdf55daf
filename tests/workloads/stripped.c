/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A hot function in a program built -O2 and then stripped (strip -s), for
 * tests/test_stripped.c: hot_fn's loop body is several instructions, so
 * samples land on several pcs of one function, which the report must show
 * as one row named after the function's FDE. The unstripped copy
 * (build/stripped.full) gives the test hot_fn's bounds (nm -S).
 * argv[1]: iterations (default 100000000); argv[2], optional: a
 * descriptor to write one byte to once main runs (every library mapped).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t hot_fn(uint64_t n)
{
	uint64_t a = 1, b = 2, c = 3;

	for (uint64_t i = 0; i < n; i++) {
		a = a * 6364136223846793005ull + (i ^ sink);
		b ^= a >> 17;
		c += b * 31 + (a << 3);
		a ^= c >> 7;
	}
	return a + b + c;
}

__attribute__((noinline)) static uint64_t outer_fn(uint64_t n)
{
	uint64_t r = hot_fn(n);

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
