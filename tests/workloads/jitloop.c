/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A tiny JIT for tests/test_perfmap.c: generates a counting loop into an
 * anonymous executable page at run time, announces it in
 * /tmp/perf-PID.map as a JIT does ("START SIZE NAME", hex), prints its pid
 * (so the test can remove the map afterwards) and runs the loop argv[1]
 * times. With argv[2] "at-exit" the map is written only after the loop,
 * as the JVM's -XX:+DumpPerfMapAtExit does: nothing names the code while
 * it runs. x86-64 only (the code is x86-64 machine code).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
#if defined(__x86_64__)
	/* uint64_t f(uint64_t n): xor rax,rax; 1: add rax,rdi; dec rdi; jnz 1b; ret */
	static const unsigned char code[] = { 0x48, 0x31, 0xc0, 0x48, 0x01, 0xf8, 0x48,
					      0xff, 0xcf, 0x75, 0xf8, 0xc3 };
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char path[64];
	FILE *map;

	if (p == MAP_FAILED)
		return 1;
	/* 64 bytes in: the map's start is not the page's */
	memcpy(p + 64, code, sizeof(code));
	if (mprotect(p, (size_t)page, PROT_READ | PROT_EXEC) != 0)
		return 1;
	bool at_exit = argc > 2 && strcmp(argv[2], "at-exit") == 0;
	uint64_t (*f)(uint64_t) = (uint64_t (*)(uint64_t))(void *)(p + 64);
	volatile uint64_t sink = 0;

	printf("%d\n", (int)getpid());
	fflush(stdout);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == (at_exit ? 1 : 0)) {
			snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
			map = fopen(path, "w");
			if (!map)
				return 1;
			/* a decoy before it, as a JIT's map holds many entries */
			fprintf(map, "%lx 40 jit_stub_before\n", (unsigned long)(uintptr_t)p);
			fprintf(map, "%lx %zx jit_hot_loop\n", (unsigned long)(uintptr_t)(p + 64),
				sizeof(code));
			fclose(map);
		}
		if (pass == 0)
			for (int k = 0; k < 20; k++)
				sink += f(n / 20);
	}
	return sink == 0;
#else
	(void)argc;
	(void)argv;
	return 77;
#endif
}
