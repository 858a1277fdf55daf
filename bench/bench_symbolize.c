/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Symbolization throughput with and without source lines and inlined
 * frames (docs/PERFORMANCE.md, "Names: lines, inlined frames, JIT maps,
 * Rust"). What the agent pays per new pc at flush:
 *   - a symbol lookup alone (sprobe_modules__symbolize, warm);
 *   - the lookup plus the inline chain (sprobe_modules__inline_frames,
 *     DWARF already open): the srcline record's cost;
 *   - the first inline chain of a module (libdw opens its DWARF), once;
 * and, for the other name sources: a perf-map lookup (warm), a stripped
 * library's FDE names (the first one walks .eh_frame; BENCH_STRIPPED_LIB,
 * default libLLVM-14.so.1: exported names in .dynsym, internal functions
 * by FDE) and Rust demangling (legacy and v0 names of rustc 1.95's std).
 * pcs: 16 libc functions (DWARF from libc6-dbg when installed) and this
 * program's own (built -g).
 *
 *   build/bench/bench_symbolize [seconds-per-case]   (default 0.5)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/symbolize.h>

#include "userspace/symbols/demangle_rust.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

volatile unsigned long bench_sink;

__attribute__((noinline)) static unsigned long own_a(unsigned long x)
{
	return x * 3 + bench_sink;
}

__attribute__((noinline)) static unsigned long own_b(unsigned long x)
{
	return own_a(x) ^ 7;
}

static const char *const libc_names[] = {
	"memcpy", "printf", "malloc", "free", "qsort", "strtod", "fopen", "fread",
	"pthread_mutex_lock", "pthread_cond_wait", "clock_gettime", "nanosleep",
	"epoll_wait", "read", "write", "getenv",
};

static const char *const rust_names[] = {
	"_ZN4core3ops8function6FnOnce40call_once$u7b$$u7b$vtable.shim$u7d$$u7d$17h584dd148505da648E",
	"_ZN71_$LT$core..hash..sip..Hasher$LT$S$GT$$u20$as$u20$core..hash..Hasher$GT$5write17h339f280ee9c5174fE",
	"_RNvMCs81nRMqtTsfS_3hotNtB2_6Worker3run",
	"_RINvMNtNtCsjrHSEGnQ3l9_3std4sync9once_lockINtB3_8OnceLockINtNtB5_14reentrant_lock13ReentrantLock"
	"INtNtCsgEmfK2I1SDS_4core4cell7RefCellINtNtNtNtB7_2io8buffered10linewriter10LineWriterNtNtB2e_5stdio"
	"9StdoutRawEEEE10initializeNCINvB2_11get_or_initNCNvB2V_6stdout0E0zEB7_",
};

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 0.5;
	uint64_t pcs[64];
	size_t npcs = 0;
	struct sprobe_symbol sym;
	struct sprobe_src_frame fr[SPROBE_MAX_INLINE];
	struct sprobe_modules *m;
	double t0, t;
	unsigned long n;

	for (size_t i = 0; i < sizeof(libc_names) / sizeof(libc_names[0]); i++) {
		void *p = dlsym(RTLD_DEFAULT, libc_names[i]);

		if (p)
			pcs[npcs++] = (uint64_t)(uintptr_t)p + 8;
	}
	pcs[npcs++] = (uint64_t)(uintptr_t)own_a + 4;
	pcs[npcs++] = (uint64_t)(uintptr_t)own_b + 4;
	pcs[npcs++] = (uint64_t)(uintptr_t)main + 16;

	/* cold: a new inventory, the first chain of each module */
	t0 = now_s();
	m = sprobe_modules__new(NULL);
	for (size_t i = 0; i < npcs; i++)
		sprobe_modules__symbolize(m, pcs[i], &sym);
	double t_syms = now_s() - t0;
	t0 = now_s();
	int with_dwarf = 0;

	for (size_t i = 0; i < npcs; i++)
		with_dwarf += sprobe_modules__inline_frames(m, pcs[i], fr, SPROBE_MAX_INLINE) > 0;
	double t_dwarf = now_s() - t0;

	printf("%zu pcs (%d with DWARF lines); first symbol tables %.1f ms, first DWARF %.1f ms\n",
	       npcs, with_dwarf, t_syms * 1e3, t_dwarf * 1e3);

	for (int pass = 0; pass < 2; pass++) {
		n = 0;
		t0 = now_s();
		do {
			for (size_t i = 0; i < npcs; i++) {
				sprobe_modules__symbolize(m, pcs[i], &sym);
				if (pass)
					sprobe_modules__inline_frames(m, pcs[i], fr, SPROBE_MAX_INLINE);
			}
			n += npcs;
		} while ((t = now_s() - t0) < secs);
		printf("%-34s %10.0f pcs/s  %8.2f us/pc\n",
		       pass ? "symbol + inline chain (lines)" : "symbol only (STACKPROBE_LINES=0)",
		       (double)n / t, t / (double)n * 1e6);
	}
	sprobe_modules__free(m);

	/* perf map: 10000 entries of an anonymous page, looked up warm */
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *code = mmap(NULL, (size_t)pg * 40, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "w");

	if (code != MAP_FAILED && f) {
		for (int i = 0; i < 10000; i++)
			fprintf(f, "%lx 10 LazyCompile:*fn%d app.js:%d\n",
				(unsigned long)(uintptr_t)(code + 16 * i), i, i);
		fclose(f);
		m = sprobe_modules__new(NULL);
		t0 = now_s();
		sprobe_modules__symbolize(m, (uint64_t)(uintptr_t)code + 5, &sym);
		printf("perf map of 10000 lines: first read %.2f ms\n", (now_s() - t0) * 1e3);
		n = 0;
		t0 = now_s();
		do {
			for (int i = 0; i < 1000; i++)
				sprobe_modules__symbolize(m, (uint64_t)(uintptr_t)code + 16 * (unsigned)(i * 7) + 3, &sym);
			n += 1000;
		} while ((t = now_s() - t0) < secs);
		printf("%-34s %10.0f pcs/s  %8.2f us/pc\n", "perf-map lookup (warm)", (double)n / t,
		       t / (double)n * 1e6);
		sprobe_modules__free(m);
		unlink(path);
	}

	/* A stripped library's internal functions, named by their FDE
	 * (cfi_names.c): the one-time .eh_frame walk of a big module, then
	 * warm lookups at 4096 pcs spread over its code. */
	const char *big = getenv("BENCH_STRIPPED_LIB") ? getenv("BENCH_STRIPPED_LIB")
						      : "libLLVM-14.so.1";
	void *bh = dlopen(big, RTLD_LAZY | RTLD_LOCAL);
	const struct sprobe_module *bm = NULL;

	m = bh ? sprobe_modules__new(NULL) : NULL;
	for (size_t i = 0; m && i < sprobe_modules__count(m); i++)
		if (strncmp(sprobe_modules__get(m, i)->name, big, strlen(big)) == 0)
			bm = sprobe_modules__get(m, i);
	const struct sprobe_segment *xs = NULL;

	for (uint32_t i = 0; bm && i < bm->nsegs; i++)
		if (bm->segs[i].prot & SPROBE_SEG_X)
			xs = &bm->segs[i];
	if (xs) {
		uint64_t step = (xs->end - xs->start) / 4096, first = 0;
		double t_first = 0;
		unsigned cfi = 0;

		/* load the symbol table at an exported function (the first
		 * byte of the code, .init or the PLT, has no symbol: a lookup
		 * there would walk .eh_frame too) */
		const char *exp = getenv("BENCH_STRIPPED_SYM") ? getenv("BENCH_STRIPPED_SYM")
							       : "LLVMContextCreate";
		void *fn = dlsym(bh, exp);

		sprobe_modules__symbolize(m, fn ? (uint64_t)(uintptr_t)fn : xs->start, &sym);
		if (!fn || !sym.name || (sym.source && strcmp(sym.source, "eh-frame") == 0))
			printf("%s: no symbol at %s: the walk is not timed apart\n", big, exp);
		for (uint64_t k = 0; k < 4096 && !first; k++) {
			double t1 = now_s();

			sprobe_modules__symbolize(m, xs->start + k * step, &sym);
			/* no symbol: this lookup walked .eh_frame */
			if (!sym.name || (sym.source && strcmp(sym.source, "eh-frame") == 0)) {
				first = 1;
				t_first = now_s() - t1;
			}
		}
		n = 0;
		t0 = now_s();
		do {
			for (uint64_t k = 0; k < 4096; k++) {
				sprobe_modules__symbolize(m, xs->start + k * step, &sym);
				cfi += sym.source && strcmp(sym.source, "eh-frame") == 0;
			}
			n += 4096;
		} while ((t = now_s() - t0) < secs);
		printf("%s: first FDE name %.2f ms (the .eh_frame walk); %.1f%% of pcs named by FDE\n", big,
		       t_first * 1e3, 100.0 * cfi / (double)n);
		printf("%-34s %10.0f pcs/s  %8.2f us/pc\n", "symbol or FDE lookup (warm)", (double)n / t,
		       t / (double)n * 1e6);
	}
	sprobe_modules__free(m);
	if (bh)
		dlclose(bh);

	n = 0;
	t0 = now_s();
	do {
		for (size_t i = 0; i < sizeof(rust_names) / sizeof(rust_names[0]); i++)
			free(sprobe__rust_demangle(rust_names[i]));
		n += sizeof(rust_names) / sizeof(rust_names[0]);
	} while ((t = now_s() - t0) < secs);
	printf("%-34s %10.0f names/s %8.2f us/name\n", "Rust demangle (legacy + v0)", (double)n / t,
	       t / (double)n * 1e6);
	return 0;
}
