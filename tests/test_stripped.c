/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Stripped objects (userspace/symbols/cfi_names.c): a pc no symbol covers
 * is named after the .eh_frame FDE covering it, "<module>+0x<FDE start>".
 * Checked against readelf --debug-dump=frames on a program built -O2 and
 * stripped (tests/workloads/stripped.c), every address of every FDE; a
 * recording of it shows its hot function as one row holding several
 * sampled pcs, and the "symbols:" hint still says the module has none;
 * Debian's gzip (stripped, no gzip-dbgsym in the archive) under gzip -9:
 * every gzip frame is named after an FDE start readelf lists; a damaged
 * .eh_frame (zeroed, random) gives no name rather than a wrong one.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/symbolize.h>

#include "run_helper.h"
#include "prog_helper.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out/stripped"
#define PROG "build/stripped"
#define MAX_FDES 4096

static int setup_dir(void **state)
{
	(void)state;
	mkdir("build", 0755);
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	return 0;
}

struct fde {
	unsigned long start, end;
};

/* The FDEs readelf --debug-dump=frames lists for file ("... FDE cie=...
 * pc=START..END"). Returns their number (0: readelf missing). */
static size_t readelf_fdes(const char *file, struct fde *v, size_t max)
{
	char cmd[1024], *out = NULL, *save = NULL;
	size_t n = 0;

	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames %s 2>/dev/null | grep ' FDE '", file);
	if (sprobe_test_run(cmd, &out) != 0) {
		free(out);
		return 0;
	}
	for (char *l = strtok_r(out, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save)) {
		char *pc = strstr(l, "pc=");

		if (pc && sscanf(pc, "pc=%lx..%lx", &v[n].start, &v[n].end) == 2 && v[n].end > v[n].start)
			n++;
	}
	free(out);
	return n;
}

static bool is_fde_start(const struct fde *v, size_t n, unsigned long a)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].start == a)
			return true;
	return false;
}

/* hot_fn's [start, end) from the unstripped copy's symbol table. */
static void hot_fn_bounds(unsigned long *start, unsigned long *end)
{
	char *out = NULL;
	unsigned long size = 0;

	assert_int_equal(sprobe_test_run("nm -S " PROG ".full | grep ' hot_fn$'", &out), 0);
	assert_int_equal(sscanf(out, "%lx %lx", start, &size), 2);
	free(out);
	assert_true(size > 0);
	*end = *start + size;
}

/* Every address of every FDE of the stripped program is named after that
 * FDE, with its range, but the PLT's: its stubs are named "<f>@plt" from
 * the relocations (test_symbolize.c checks how); addresses between FDEs
 * get no name; hot_fn's FDE is hot_fn's extent in the unstripped symbol
 * table. */
static void test_names_match_readelf(void **state)
{
	static struct fde v[MAX_FDES];
	unsigned long hs, he;
	size_t n = readelf_fdes(PROG, v, MAX_FDES);
	(void)state;

	if (n == 0)
		SPROBE_SKIP("no readelf (binutils, tools/deps.d/names.list)");
	hot_fn_bounds(&hs, &he);
	assert_true(is_fde_start(v, n, hs));

	pid_t pid;
	const struct sprobe_module *mod;
	struct sprobe_modules *m = sprobe_test_prog_start(PROG, "stripped", &pid, &mod);
	unsigned named = 0, gaps = 0, hot = 0, plt = 0;

	for (size_t i = 0; i < n; i++) {
		char want[64];
		struct sprobe_symbol first;

		assert_int_equal(sprobe_modules__symbolize(m, mod->bias + v[i].start, &first), 0);
		if (first.source && strcmp(first.source, "plt") == 0) {
			assert_non_null(strstr(first.name, "plt"));
			plt++;
			continue;
		}
		snprintf(want, sizeof(want), "stripped+0x%lx", v[i].start);
		for (unsigned long a = v[i].start; a < v[i].end; a++) {
			struct sprobe_symbol sym;

			assert_int_equal(sprobe_modules__symbolize(m, mod->bias + a, &sym), 0);
			if (!sym.name)
				fail_msg("%#lx (FDE %#lx..%#lx): no name", a, v[i].start, v[i].end);
			assert_string_equal(sym.name, want);
			assert_string_equal(sym.source, "eh-frame");
			assert_int_equal(sym.sym_start, mod->bias + v[i].start);
			assert_int_equal(sym.sym_size, v[i].end - v[i].start);
			assert_int_equal(sym.sym_offset, a - v[i].start);
			named++;
			if (v[i].start == hs) {
				assert_int_equal(v[i].end, he);
				hot++;
			}
		}
		/* the byte after the FDE: another FDE's, or none */
		struct sprobe_symbol sym;

		assert_int_equal(sprobe_modules__symbolize(m, mod->bias + v[i].end, &sym), 0);
		bool in_next = false;

		for (size_t j = 0; j < n; j++)
			in_next = in_next || (v[j].start <= v[i].end && v[i].end < v[j].end);
		if (sym.source && strcmp(sym.source, "plt") == 0) {
			assert_non_null(strstr(sym.name, "@plt"));
		} else if (!in_next) {
			assert_null(sym.name);
			gaps++;
		} else {
			assert_non_null(sym.name);
		}
	}
	char line[128];
	struct sprobe_symbol sym;

	assert_int_equal(sprobe_modules__symbolize(m, mod->bias + hs + 5, &sym), 0);
	sprobe_symbol__snprintf(&sym, line, sizeof(line));
	char want[64];

	snprintf(want, sizeof(want), "stripped+0x%lx+0x5", hs);
	assert_string_equal(line, want);
	print_message("  %zu FDEs (%u of the PLT), %u addresses named like readelf (%u in hot_fn), "
		      "%u gaps without a name\n", n, plt, named, hot, gaps);
	assert_true(hot == he - hs);
	assert_true(gaps > 0);
	sprobe_test_prog_stop(m, pid);
}

/* Distinct pcs of the recording whose symbol record names name, and the
 * distinct names of module base (SYMBOL records of a one-process file). */
static void symbol_stats(const char *data, const char *name, const char *base, unsigned *pcs_named,
			 unsigned *pcs_mod, unsigned *names_mod)
{
	struct sprobe_datafile_reader *r = sprobe_datafile_reader__open(data);
	struct sprobe_df_record rec;
	uint32_t mi = UINT32_MAX;
	static char seen[4096][64];
	unsigned ns = 0;

	assert_non_null(r);
	*pcs_named = *pcs_mod = *names_mod = 0;
	while (sprobe_datafile_reader__next(r, &rec) == 1) {
		if (rec.type == SPROBE_DF_MODULE) {
			const char *s = memrchr(rec.module.path, '/', rec.module.path_len);
			size_t bl = strlen(base);

			s = s ? s + 1 : rec.module.path;
			if ((size_t)(rec.module.path + rec.module.path_len - s) == bl && memcmp(s, base, bl) == 0)
				mi = rec.module.index;
		}
		if (rec.type != SPROBE_DF_SYMBOL || rec.symbol.module != mi || mi == UINT32_MAX)
			continue;
		(*pcs_mod)++;
		if (rec.symbol.name_len == strlen(name) && memcmp(rec.symbol.name, name, rec.symbol.name_len) == 0)
			(*pcs_named)++;
		bool dup = false;

		for (unsigned i = 0; i < ns && !dup; i++)
			dup = strlen(seen[i]) == rec.symbol.name_len &&
			      memcmp(seen[i], rec.symbol.name, rec.symbol.name_len) == 0;
		if (!dup && ns < 4096 && rec.symbol.name_len < 64) {
			memcpy(seen[ns], rec.symbol.name, rec.symbol.name_len);
			seen[ns++][rec.symbol.name_len] = '\0';
		}
	}
	*names_mod = ns;
	sprobe_datafile_reader__free(r);
}

/* The text report's row for name: its self count, or -1. */
static long self_of(const char *text, const char *name)
{
	const char *t = strstr(text, "Top functions by self samples");
	char pat[128];

	if (!t)
		return -1;
	snprintf(pat, sizeof(pat), "  %s\n", name);
	const char *hit = strstr(t, pat);

	if (!hit)
		return -1;
	while (hit > t && hit[-1] != '\n')
		hit--;
	return strtol(hit, NULL, 10);
}

static void test_recording_one_row(void **state)
{
	static struct fde v[MAX_FDES];
	unsigned long hs, he;
	char hot[64], outer[64], *out = NULL;
	unsigned pcs_hot, pcs_mod, names_mod;
	size_t n = readelf_fdes(PROG, v, MAX_FDES);
	(void)state;

	if (n == 0)
		SPROBE_SKIP("no readelf (binutils, tools/deps.d/names.list)");
	hot_fn_bounds(&hs, &he);
	snprintf(hot, sizeof(hot), "stripped+0x%lx", hs);
	snprintf(outer, sizeof(outer), "stripped+0x%lx", he); /* outer_fn follows hot_fn */
	assert_true(is_fde_start(v, n, he));
	assert_int_equal(sprobe_test_run(CLI " record -q -F 499 -o " OUT "/rec.data -- " PROG
					 " 500000000 >/dev/null", NULL), 0);
	symbol_stats(OUT "/rec.data", hot, "stripped", &pcs_hot, &pcs_mod, &names_mod);
	print_message("  %u distinct pcs named %s; %u pcs of the module under %u names\n", pcs_hot, hot,
		      pcs_mod, names_mod);
	assert_true(pcs_hot >= 2); /* several pcs, one name */
	assert_true(names_mod < pcs_mod);

	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/rec.data", &out), 0);
	long self = self_of(out, hot);
	char *total = strstr(out, "  samples:");

	assert_true(self > 0);
	assert_non_null(total);
	/* the module still has no symbol table: the hint says so */
	assert_non_null(strstr(out, "stripped: no symbols"));
	/* no row for a single address inside hot_fn */
	for (unsigned long a = hs + 1; a < he; a++) {
		char name[64];

		snprintf(name, sizeof(name), "stripped+0x%lx", a);
		assert_int_equal(self_of(out, name), -1);
	}
	print_message("  text: %s is one row, %ld self samples\n", hot, self);
	free(out);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/rec.data --format folded", &out), 0);
	char chain[160];

	snprintf(chain, sizeof(chain), ";%s;%s ", outer, hot);
	assert_non_null(strstr(out, chain));
	free(out);

	/* perf on the same stripped binary: one row per address ("[.]
	 * 0x0000000000001234"), noted for comparison */
	if (sprobe_test_run("command -v perf >/dev/null 2>&1", NULL) != 0 ||
	    sprobe_test_run("perf record -q -F 499 -o " OUT "/perf.data " PROG " 600000000 >/dev/null 2>&1",
			    NULL) != 0) {
		print_message("  perf unavailable here: not compared\n");
		return;
	}
	assert_int_equal(sprobe_test_run("perf report -i " OUT "/perf.data --stdio --sort dso,sym 2>/dev/null | "
					 "grep -c ' stripped  *\\[\\.\\] 0x'", &out), 0);
	print_message("  perf report --sort dso,sym: %ld rows of bare addresses in stripped\n",
		      strtol(out, NULL, 10));
	free(out);
}

/* Debian's gzip (stripped; gzip-dbgsym is not in the archive): every gzip
 * frame of gzip -9 is named after an FDE readelf lists. */
static void test_gzip(void **state)
{
	static struct fde v[MAX_FDES];
	char *gz = NULL, *out = NULL, cmd[1024];
	unsigned pcs, pcs_mod, names_mod, rows = 0, bad = 0;
	(void)state;

	if (sprobe_test_run("command -v gzip", &gz) != 0)
		SPROBE_SKIP("no gzip");
	gz[strcspn(gz, "\n")] = '\0';
	snprintf(cmd, sizeof(cmd), "readelf -SW %s | grep -q ' .symtab '", gz);
	if (sprobe_test_run(cmd, NULL) == 0) {
		free(gz);
		SPROBE_SKIP("this gzip has a symbol table: not a stripped binary");
	}
	size_t n = readelf_fdes(gz, v, MAX_FDES);

	if (n == 0) {
		free(gz);
		SPROBE_SKIP("no readelf, or no .eh_frame in gzip");
	}
	/* a few MB of compressible but not trivial input */
	assert_int_equal(sprobe_test_run("test -s " OUT "/gz.in || (for i in $(seq 1 6); do "
					 "cat build/stackprobe; seq 1 60000; done > " OUT "/gz.in)", NULL), 0);
	snprintf(cmd, sizeof(cmd), CLI " record -q -F 999 -o " OUT "/gz.data -- %s -9 -c " OUT "/gz.in >/dev/null",
		 gz);
	assert_int_equal(sprobe_test_run(cmd, NULL), 0);
	symbol_stats(OUT "/gz.data", "", "gzip", &pcs, &pcs_mod, &names_mod);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/gz.data --format folded", &out), 0);
	/* every "gzip+0xHEX" frame: HEX an FDE start */
	for (char *p = strstr(out, "gzip+0x"); p; p = strstr(p + 1, "gzip+0x")) {
		unsigned long a = strtoul(p + 7, NULL, 16);

		if (p > out && p[-1] != ';' && p[-1] != '\n')
			continue;
		rows++;
		bad += !is_fde_start(v, n, a);
	}
	free(out);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/gz.data", &out), 0);
	print_message("  gzip -9: %u sampled pcs in gzip under %u names (FDEs: %zu); %u frames, %u not an FDE start\n",
		      pcs_mod, names_mod, n, rows, bad);
	assert_true(rows > 0);
	assert_int_equal(bad, 0);
	assert_true(names_mod < pcs_mod);
	assert_non_null(strstr(out, "gzip: no symbols"));
	free(out);
	free(gz);
}

/* .eh_frame zeroed (a terminator at once: no FDE) or random: no crash,
 * and a name only when it is an FDE the parser read, never for the
 * zeroed one. */
static void test_damaged_eh_frame(void **state)
{
	static const char *const how[] = { "zero", "random" };
	char cmd[1024];
	unsigned long hs, he;
	(void)state;

	if (sprobe_test_run("command -v objcopy >/dev/null 2>&1", NULL) != 0)
		SPROBE_SKIP("no objcopy (binutils, tools/deps.d/names.list)");
	hot_fn_bounds(&hs, &he);
	assert_int_equal(sprobe_test_run("objcopy --dump-section .eh_frame=" OUT "/ef.bin " PROG, NULL), 0);
	for (size_t h = 0; h < 2; h++) {
		snprintf(cmd, sizeof(cmd),
			 "head -c $(stat -c %%s " OUT "/ef.bin) %s > " OUT "/ef_bad.bin && "
			 "objcopy --update-section .eh_frame=" OUT "/ef_bad.bin " PROG " " OUT "/stripped_%s",
			 h ? "/dev/urandom" : "/dev/zero", how[h]);
		assert_int_equal(sprobe_test_run(cmd, NULL), 0);
		snprintf(cmd, sizeof(cmd), OUT "/stripped_%s", how[h]);

		pid_t pid;
		const struct sprobe_module *mod;
		struct sprobe_modules *m = sprobe_test_prog_start(cmd, cmd + strlen(OUT) + 1, &pid, &mod);
		unsigned named = 0;

		for (unsigned long a = hs; a < he; a++) {
			struct sprobe_symbol sym;

			assert_int_equal(sprobe_modules__symbolize(m, mod->bias + a, &sym), 0);
			if (!sym.name)
				continue;
			named++;
			assert_string_equal(sym.source, "eh-frame");
			assert_true(sym.sym_start <= mod->bias + a && mod->bias + a < sym.sym_start + sym.sym_size);
		}
		print_message("  .eh_frame %s: %u of %lu addresses named\n", how[h], named, he - hs);
		if (h == 0)
			assert_int_equal(named, 0);
		sprobe_test_prog_stop(m, pid);
	}
}

/* Run script with sh inside a new network namespace (only its own
 * loopback: the debuginfod server is reachable from nowhere else); its
 * output into *out. Returns sh's status, or -2 when no namespace can be
 * made here. */
static int run_in_netns(const char *script, char **out)
{
	char cmd[256];
	FILE *f = fopen(OUT "/netns.sh", "w");

	assert_non_null(f);
	fprintf(f, "ip link set lo up || exit 99\n%s", script);
	assert_int_equal(fclose(f), 0);
	if (sprobe_test_run("unshare -n true 2>/dev/null", NULL) != 0)
		return -2;
	snprintf(cmd, sizeof(cmd), "unshare -n sh " OUT "/netns.sh 2>&1");
	return sprobe_test_run(cmd, out);
}

/* The stripped -g program's frames get their real names from a real
 * debuginfod (elfutils') serving a directory holding only its debug file,
 * on the loopback of a namespace of its own: names in the report, the
 * file in DEBUGINFOD_CACHE_PATH, and a second report with the server gone
 * named from that cache, and a file of another build-id planted there
 * refused. A closed port: one line saying so, and the FDE
 * names as recorded. A server that accepts and never answers: the same,
 * within DEBUGINFOD_MAXTIME (the report's one try). */
static void test_debuginfod(void **state)
{
	char *out = NULL, *bid = NULL, script[4096];
	(void)state;

	if (sprobe_test_run("command -v debuginfod >/dev/null && command -v debuginfod-find >/dev/null", NULL) != 0)
		SPROBE_SKIP("no debuginfod (debuginfod, tools/deps.d/names.list)");
	if (sprobe_test_run("test -e /usr/lib/x86_64-linux-gnu/libdebuginfod.so.1 || "
			    "ldconfig -p | grep -q libdebuginfod.so.1", NULL) != 0)
		SPROBE_SKIP("no libdebuginfod.so.1 (libdebuginfod1)");
	assert_int_equal(sprobe_test_run("readelf -n build/stripped_g | awk '/Build ID/{print $3}'", &bid), 0);
	bid[strcspn(bid, "\n")] = '\0';
	assert_true(strlen(bid) == 40);
	assert_int_equal(sprobe_test_run(CLI " record -q -F 499 -o " OUT "/g.data -- build/stripped_g 300000000 >/dev/null",
					 NULL), 0);
	/* without debuginfod: FDE names only */
	assert_int_equal(sprobe_test_run("env -u DEBUGINFOD_URLS " CLI " report -i " OUT "/g.data --format folded", &out), 0);
	assert_null(strstr(out, "hot_fn"));
	assert_non_null(strstr(out, "stripped_g+0x"));
	free(out);

	/* The server scans its directory in the background: the test waits
	 * until a lookup (from a throw-away cache: libdebuginfod caches a
	 * miss) finds the file, then reports from a cache of its own. */
	snprintf(script, sizeof(script),
		 "D=" OUT "; rm -rf $D/dic $D/dic2 $D/dic3 $D/pollc $D/di.sqlite\n"
		 "debuginfod -F -p 8123 -d $D/di.sqlite build/debuginfod-src > $D/di.log 2>&1 &\n"
		 "S=$!\n"
		 "i=0; until rm -rf $D/pollc; DEBUGINFOD_URLS=http://127.0.0.1:8123 DEBUGINFOD_CACHE_PATH=$D/pollc "
		 "debuginfod-find debuginfo %s >/dev/null 2>&1; do i=$((i+1)); "
		 "if [ $i -gt 600 ]; then echo SERVER-NEVER-READY; kill $S; exit 1; fi; sleep 0.1; done\n"
		 "echo '--- served'\n"
		 "DEBUGINFOD_URLS=http://127.0.0.1:8123 DEBUGINFOD_CACHE_PATH=$D/dic " CLI " report -i $D/g.data --format folded\n"
		 "kill $S; wait $S\n"
		 "echo '--- cached'; ls $D/dic/%s/\n"
		 "DEBUGINFOD_URLS=http://127.0.0.1:8123 DEBUGINFOD_CACHE_PATH=$D/dic " CLI " report -i $D/g.data --format folded\n"
		 "echo '--- closed'\n"
		 "DEBUGINFOD_URLS=http://127.0.0.1:8123 DEBUGINFOD_CACHE_PATH=$D/dic2 " CLI " report -i $D/g.data --format folded\n"
		 "echo '--- wrong'\n"
		 "cp build/stripped.full $D/dic/%s/debuginfo\n"
		 "DEBUGINFOD_URLS=http://127.0.0.1:8123 DEBUGINFOD_CACHE_PATH=$D/dic " CLI " report -i $D/g.data --format folded\n"
		 "echo '--- silent'\n"
		 "python3 -c 'import socket,sys,time; s=socket.socket(); s.bind((\"127.0.0.1\",8124)); s.listen(1); "
		 "print(\"listening\", flush=True); time.sleep(120)' & L=$!\n"
		 "until [ -n \"$(ss -Hltn 'sport = :8124' 2>/dev/null)\" ]; do sleep 0.05; done\n"
		 "t0=$(date +%%s)\n"
		 "DEBUGINFOD_MAXTIME=2 DEBUGINFOD_URLS=http://127.0.0.1:8124 DEBUGINFOD_CACHE_PATH=$D/dic3 " CLI
		 " report -i $D/g.data --format folded\n"
		 "echo \"took $(( $(date +%%s) - t0 ))\"\n"
		 "kill $L 2>/dev/null; true\n",
		 bid, bid, bid);
	int rc = run_in_netns(script, &out);

	if (rc == -2)
		SPROBE_SKIP("cannot make a network namespace here (unshare -n): the server would listen on every interface");
	print_message("%s", out);
	assert_int_equal(rc, 0);
	char *served = strstr(out, "--- served\n"), *cached = strstr(out, "--- cached\n"),
	     *closed = strstr(out, "--- closed\n"), *wrong = strstr(out, "--- wrong\n"),
	     *silent = strstr(out, "--- silent\n");

	assert_non_null(served);
	assert_non_null(cached);
	assert_non_null(closed);
	assert_non_null(wrong);
	assert_non_null(silent);
	/* served: the real names, no line about the server */
	cached[0] = closed[0] = wrong[0] = silent[0] = '\0';
	/* a cached file of another build-id (stripped.full: the same code
	 * built without -g, so taking it would print hot_fn): refused, the
	 * recorded names stay */
	assert_null(strstr(wrong + 1, "hot_fn"));
	assert_non_null(strstr(wrong + 1, "stripped_g+0x"));
	assert_non_null(strstr(served, ";main;outer_fn;hot_fn "));
	assert_null(strstr(served, "debuginfod:"));
	assert_null(strstr(served, "stripped_g+0x"));
	/* cached: the file is in the cache, named from it with the server gone */
	assert_non_null(strstr(cached + 1, "debuginfo\n"));
	assert_non_null(strstr(cached + 1, ";main;outer_fn;hot_fn "));
	assert_null(strstr(cached + 1, "debuginfod:"));
	/* closed port: one line, the recorded names */
	char *line = strstr(closed + 1, "stackprobe report: debuginfod: cannot reach http://127.0.0.1:8123");

	assert_non_null(line);
	assert_null(strstr(line + 20, "debuginfod: cannot reach")); /* one line */
	assert_null(strstr(closed + 1, "hot_fn"));
	assert_non_null(strstr(closed + 1, "stripped_g+0x"));
	/* silent server: bounded by DEBUGINFOD_TIMEOUT, the same line */
	line = strstr(silent + 1, "stackprobe report: debuginfod: cannot reach http://127.0.0.1:8124");
	assert_non_null(line);
	assert_null(strstr(silent + 1, "hot_fn"));
	char *took = strstr(silent + 1, "took ");

	assert_non_null(took);
	print_message("  silent server: the report ended after %ld s (DEBUGINFOD_MAXTIME=2, one try)\n",
		      strtol(took + 5, NULL, 10));
	assert_true(strtol(took + 5, NULL, 10) < 60);
	free(out);
	free(bid);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_teardown(test_names_match_readelf, sprobe_test_prog_teardown),
	cmocka_unit_test(test_recording_one_row),
	cmocka_unit_test(test_gzip),
	cmocka_unit_test_teardown(test_damaged_eh_frame, sprobe_test_prog_teardown),
	cmocka_unit_test(test_debuginfod),
};

int main(int argc, char **argv)
{
	const char *filter = argc > 1 ? argv[1] : getenv("SPROBE_TEST_FILTER");

	if (filter && *filter)
		cmocka_set_test_filter(filter);
	return cmocka_run_group_tests(tests, setup_dir, NULL);
}
