/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Opening a debug file's DWARF for lines and inline chains: libdw's own
 * loading (dwarf_begin_elf on the file: every debug section inflated with
 * zlib) against userspace/symbols/dwarf_load.c (only the sections lookups
 * read, libdeflate, one populated mapping). Per round and path: open, then
 * the line and scopes of LOOKUPS function starts spread over the file, then
 * close; CPU time (process), wall time and minor faults, medians over the
 * rounds, the two paths alternating (docs/PERFORMANCE.md, "The DWARF
 * loader").
 *
 *   build/bench/bench_dwarf_load [debug-file] [rounds] [lookups]
 *   (default: libc's debug file from libc6-dbg, 9 rounds, 400 lookups;
 *   0 lookups: the open and close alone)
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <elfutils/libdw.h>

#include "userspace/symbols/dwarf_load.h"

#define LOOKUPS 400
#define ROUNDS_MAX 64

static double clk(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long minflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* LOOKUPS function starts from path's .symtab, spread evenly. */
static size_t pick_pcs(Elf *e, uint64_t *pcs)
{
	Elf_Scn *scn = NULL;
	uint64_t all[1 << 16];
	size_t n = 0, k = 0;

	while ((scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize && n < sizeof(all) / sizeof(all[0]); i++) {
			GElf_Sym s;

			if (gelf_getsym(d, (int)i, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC && s.st_size)
				all[n++] = s.st_value;
		}
	}
	for (size_t i = 0; i < n && k < LOOKUPS; i += n / LOOKUPS ? n / LOOKUPS : 1)
		pcs[k++] = all[i];
	return k;
}

/* One round: open path's DWARF (fast or libdw), look every pc up, close.
 * Returns the lines found, or -1. */
static long round_once(const char *path, bool fast, const uint64_t *pcs, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
	struct sprobe_dwarf_image *img = NULL;
	Dwarf *dw = NULL;
	long found = 0;

	if (!e)
		return -1;
	if (fast) {
		if (sprobe_dwarf_image__open(e, &img) == 0)
			dw = sprobe_dwarf_image__dwarf(img);
	} else {
		dw = dwarf_begin_elf(e, DWARF_C_READ, NULL);
	}
	for (size_t i = 0; dw && i < n; i++) {
		Dwarf_Die cu, *scopes = NULL;

		if (!dwarf_addrdie(dw, pcs[i], &cu))
			continue;
		found += dwarf_getsrc_die(&cu, pcs[i]) != NULL;
		if (dwarf_getscopes(&cu, pcs[i], &scopes) > 0)
			free(scopes);
	}
	if (img)
		sprobe_dwarf_image__free(img);
	else if (dw)
		dwarf_end(dw);
	elf_end(e);
	close(fd);
	return dw ? found : -1;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 && argv[1][0] ? argv[1]
				    : "/usr/lib/debug/.build-id/93/"
				      "ac61ec5a8eb1396f9fbd350e3169a558528a40.debug";
	int rounds = argc > 2 ? atoi(argv[2]) : 9;
	double cpu[2][ROUNDS_MAX], wall[2][ROUNDS_MAX], flt[2][ROUNDS_MAX];
	uint64_t pcs[LOOKUPS];
	long lines[2] = { 0, 0 };
	size_t n;

	if (rounds < 1 || rounds > ROUNDS_MAX)
		rounds = 9;
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;

	if (!e) {
		fprintf(stderr, "bench_dwarf_load: cannot open %s (libc6-dbg installed?): skipped\n",
			path);
		return 0;
	}
	n = pick_pcs(e, pcs);
	if (argc > 3 && (size_t)atoi(argv[3]) < n)
		n = (size_t)atoi(argv[3]);
	elf_end(e);
	close(fd);
	for (int r = 0; r < rounds; r++) {
		for (int p = 0; p < 2; p++) {
			bool fast = (r + p) % 2 == 0; /* alternate which goes first */
			int k = fast ? 1 : 0;
			double c0 = clk(CLOCK_PROCESS_CPUTIME_ID), w0 = clk(CLOCK_MONOTONIC);
			long f0 = minflt();

			lines[k] = round_once(path, fast, pcs, n);
			cpu[k][r] = clk(CLOCK_PROCESS_CPUTIME_ID) - c0;
			wall[k][r] = clk(CLOCK_MONOTONIC) - w0;
			flt[k][r] = (double)(minflt() - f0);
		}
	}
	printf("%s: %zu pcs, %d rounds (medians)\n", path, n, rounds);
	for (int k = 0; k < 2; k++)
		printf("  %-22s cpu %7.2f ms  wall %7.2f ms  minor faults %6.0f  lines %ld\n",
		       k ? "dwarf_load (fast)" : "libdw dwarf_begin_elf", median(cpu[k], rounds),
		       median(wall[k], rounds), median(flt[k], rounds), lines[k]);
	return lines[0] == lines[1] ? 0 : 1;
}
