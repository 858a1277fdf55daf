/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Inlined frames and source lines (userspace/symbols/inline.c, srcline
 * records, userspace/report/inline.c): the inline chain of every address
 * of a function against binutils' addr2line -i; a recording of a hot
 * static inline function (tests/workloads/inlined.c, -O2 -g) shown as
 * "inner_hot (inlined)" under its caller in the text, folded, JSON and
 * speedscope reports, as perf report --call-graph dwarf shows it; its
 * pprof read back by the real pprof (go tool pprof -lines, -traces); the
 * off switch; and srcline records that do not hold together refused.
 */
#include <errno.h>
#include <fcntl.h>
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
#include "userspace/cli/cli.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out/inline"
#define PROG "build/inlined"

static int setup_dir(void **state)
{
	(void)state;
	mkdir("build", 0755);
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	return 0;
}

static const char *base(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* Every address of outer_fn (inner_hot is inlined into it) in a running
 * copy of the program: our chain equals addr2line -i -f's, function by
 * function and line by line. */
static void test_chain_matches_addr2line(void **state)
{
	char *nmout = NULL, *a2l = NULL;
	unsigned long start = 0, size = 0;
	int inlined_seen = 0;
	(void)state;

	if (sprobe_test_run("command -v addr2line >/dev/null 2>&1", NULL) != 0)
		SPROBE_SKIP("no addr2line (binutils, tools/deps.d/outputs.list)");
	assert_int_equal(sprobe_test_run("nm -S " PROG " | grep ' outer_fn$'", &nmout), 0);
	assert_int_equal(sscanf(nmout, "%lx %lx", &start, &size), 2);
	free(nmout);
	assert_true(size > 0 && size < 4096);

	pid_t pid;
	const struct sprobe_module *mod;
	struct sprobe_modules *m = sprobe_test_prog_start(PROG, "inlined", &pid, &mod);

	/* addr2line, once, for every address: "-a" prints each address
	 * before its chain of "function\nfile:line" pairs */
	char *big = malloc(64 + size * 20);

	assert_non_null(big);
	strcpy(big, "addr2line -a -i -f -e " PROG);
	for (unsigned long a = start; a < start + size; a++)
		sprintf(big + strlen(big), " %lx", a);
	assert_int_equal(sprobe_test_run(big, &a2l), 0);
	free(big);

	char *save = NULL, *tok = strtok_r(a2l, "\n", &save);
	unsigned compared = 0;

	while (tok) {
		assert_true(strncmp(tok, "0x", 2) == 0);
		unsigned long a = strtoul(tok, NULL, 16);
		struct sprobe_src_frame fr[SPROBE_MAX_INLINE];
		struct sprobe_symbol sym;
		int n = sprobe_modules__inline_frames(m, mod->bias + a, fr, SPROBE_MAX_INLINE);

		assert_int_equal(sprobe_modules__symbolize(m, mod->bias + a, &sym), 0);
		if (n < 1)
			fail_msg("%#lx: no chain (%d)", a, n);
		int k = 0;

		for (tok = strtok_r(NULL, "\n", &save); tok && strncmp(tok, "0x", 2) != 0;
		     tok = strtok_r(NULL, "\n", &save), k++) {
			const char *fn = tok;
			char *where = strtok_r(NULL, "\n", &save);

			assert_non_null(where);
			if (k >= n)
				fail_msg("%#lx: addr2line has more than our %d frames (%s)", a, n, fn);
			const char *ours = fr[k].function ? fr[k].function : sym.name;
			char want[512], got[512];

			snprintf(want, sizeof(want), "%s %s", fn, base(where));
			/* addr2line appends " (discriminator N)" */
			char *disc = strstr(want, " (discriminator");

			if (disc)
				*disc = '\0';
			snprintf(got, sizeof(got), "%s %s:%u", ours, fr[k].file ? base(fr[k].file) : "??",
				 fr[k].line);
			if (strcmp(want, got) != 0)
				fail_msg("%#lx frame %d: ours \"%s\", addr2line \"%s\"", a, k, got, want);
			tok = where;
		}
		if (k != n)
			fail_msg("%#lx: addr2line has %d frames, we have %d", a, k, n);
		if (n > 1 && strcmp(fr[0].function, "inner_hot") == 0)
			inlined_seen++;
		compared++;
	}
	print_message("  outer_fn: %u addresses equal to addr2line -i, %d inside inner_hot\n", compared,
		      inlined_seen);
	assert_int_equal(compared, size);
	assert_true(inlined_seen > 0); /* the compiler did inline it */
	free(a2l);
	sprobe_test_prog_stop(m, pid);
}

/* Our chain for the module address a against addr2line's lines for it,
 * starting at *tok (the line after "0x..."). Returns 1 compared, 0 skipped
 * (addr2line knows nothing there), and fails the test on a difference. The
 * outermost function's name is not compared: ours is the symbol table's
 * choice among aliases (__memcpy_avx_unaligned_erms and its twins), the
 * lines are. */
static int compare_a2l(struct sprobe_modules *m, const struct sprobe_module *mod, unsigned long a,
		       char **tok, char **save)
{
	struct sprobe_src_frame fr[SPROBE_MAX_INLINE];
	int n = sprobe_modules__inline_frames(m, mod->bias + a, fr, SPROBE_MAX_INLINE);
	char fn[64][256], where[64][512];
	int k = 0;

	for (*tok = strtok_r(NULL, "\n", save); *tok && strncmp(*tok, "0x", 2) != 0;
	     *tok = strtok_r(NULL, "\n", save)) {
		char *w = strtok_r(NULL, "\n", save);

		assert_non_null(w);
		if (k < 64) {
			snprintf(fn[k], sizeof(fn[k]), "%s", *tok);
			snprintf(where[k], sizeof(where[k]), "%s", base(w));
			char *disc = strstr(where[k], " (discriminator");

			if (disc)
				*disc = '\0';
		}
		k++;
	}
	bool unknown = true;

	for (int i = 0; i < k && i < 64; i++)
		unknown = unknown && strcmp(where[i], "??:0") == 0;
	if (unknown)
		return 0;
	if (n != k)
		fail_msg("%#lx: addr2line has %d frames, we have %d (%s %s)", a, k, n, fn[0], where[0]);
	for (int i = 0; i < n; i++) {
		char got[512];

		snprintf(got, sizeof(got), "%s:%u", fr[i].file ? base(fr[i].file) : "??", fr[i].line);
		if (strcmp(got, where[i]) != 0 || (fr[i].function && strcmp(fr[i].function, fn[i]) != 0))
			fail_msg("%#lx frame %d: ours %s %s, addr2line %s %s", a, i,
				 fr[i].function ? fr[i].function : "(outer)", got, fn[i], where[i]);
	}
	return 1;
}

/* The same over libc, where glibc's -O2 inlines a lot: 2000 addresses
 * spread over its code, against llvm-symbolizer on its debug file
 * (libc6-dbg). Not binutils 2.40's addr2line here: for code of an
 * #included .c file it names the including file (s_ldexpl.c:25 where the
 * line table, readelf --debug-dump=decodedline and llvm-symbolizer say
 * s_ldexp_template.c:25). */
static void test_libc_chains_match_addr2line(void **state)
{
	char hex[2 * SPROBE_BUILD_ID_MAX + 1], dbg[512], *a2l = NULL;
	pid_t pid;
	const struct sprobe_module *mod = NULL;
	(void)state;

	struct sprobe_modules *m = sprobe_test_prog_start(PROG, "inlined", &pid, &mod);

	mod = NULL;
	for (size_t i = 0; i < sprobe_modules__count(m); i++)
		if (strncmp(sprobe_modules__get(m, i)->name, "libc.so", 7) == 0)
			mod = sprobe_modules__get(m, i);
	assert_non_null(mod);
	assert_true(sprobe_build_id__hex(mod->build_id, mod->build_id_len, hex, sizeof(hex)) > 2);
	snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	if (access(dbg, R_OK) != 0) {
		sprobe_test_prog_stop(m, pid);
		SPROBE_SKIP("no debug file for libc (%s): apt-get install libc6-dbg", dbg);
	}
	const struct sprobe_segment *x = NULL;

	for (uint32_t i = 0; i < mod->nsegs; i++)
		if (mod->segs[i].prot & SPROBE_SEG_X)
			x = &mod->segs[i];
	assert_non_null(x);
	unsigned long lo = x->start - mod->bias, len = x->end - x->start, step = len / 2000 + 1;
	char *cmd = malloc(600 + 2000 * 20);

	assert_non_null(cmd);
	if (sprobe_test_run("command -v llvm-symbolizer >/dev/null 2>&1", NULL) != 0) {
		free(cmd);
		sprobe_test_prog_stop(m, pid);
		SPROBE_SKIP("no llvm-symbolizer (llvm, tools/deps.d/bpf.list)");
	}
	/* GNU style: addr2line's layout, without columns */
	snprintf(cmd, 600, "llvm-symbolizer --obj=%s --inlining --output-style=GNU -a --functions=short", dbg);
	for (unsigned long a = lo; a < lo + len; a += step)
		sprintf(cmd + strlen(cmd), " 0x%lx", a); /* llvm-symbolizer: no 0x is decimal */
	assert_int_equal(sprobe_test_run(cmd, &a2l), 0);
	free(cmd);

	char *save = NULL, *tok = strtok_r(a2l, "\n", &save);
	unsigned compared = 0, skipped = 0, deep = 0;

	while (tok) {
		unsigned long a = strtoul(tok, NULL, 16);
		int r = compare_a2l(m, mod, a, &tok, &save);

		compared += r == 1;
		skipped += r == 0;
		struct sprobe_src_frame fr[SPROBE_MAX_INLINE];

		deep += r == 1 && sprobe_modules__inline_frames(m, mod->bias + a, fr, SPROBE_MAX_INLINE) > 1;
	}
	print_message("  libc: %u addresses equal to llvm-symbolizer (%u with inlined frames), %u unknown to both\n",
		      compared, deep, skipped);
	assert_true(compared > 1000);
	assert_true(deep > 100);
	free(a2l);
	sprobe_test_prog_stop(m, pid);
}

/* Damaged DWARF (a .debug_info cut in half, cut to 40 bytes, or random
 * bytes): no crash, and no frame named wrong: the chain holds at most
 * inner_hot and the symbol's own function, or is refused. */
static void test_damaged_dwarf(void **state)
{
	static const char *const how[] = { "half", "tiny", "random" };
	char cmd[1024], *nmout = NULL;
	unsigned long start = 0, size = 0;
	(void)state;

	if (sprobe_test_run("command -v objcopy >/dev/null 2>&1", NULL) != 0)
		SPROBE_SKIP("no objcopy (binutils, tools/deps.d/outputs.list)");
	assert_int_equal(sprobe_test_run("nm -S " PROG " | grep ' outer_fn$'", &nmout), 0);
	assert_int_equal(sscanf(nmout, "%lx %lx", &start, &size), 2);
	free(nmout);
	assert_int_equal(sprobe_test_run("objcopy --dump-section .debug_info=" OUT "/di.bin " PROG, NULL), 0);
	for (size_t h = 0; h < sizeof(how) / sizeof(how[0]); h++) {
		const char *make_part =
			h == 0 ? "head -c $(( $(stat -c %s " OUT "/di.bin) / 2 )) " OUT "/di.bin" :
			h == 1 ? "head -c 40 " OUT "/di.bin" :
				 "head -c $(stat -c %s " OUT "/di.bin) /dev/urandom";
		snprintf(cmd, sizeof(cmd), "%s > " OUT "/di_bad.bin && objcopy --update-section .debug_info="
			 OUT "/di_bad.bin " PROG " " OUT "/inlined_%s", make_part, how[h]);
		assert_int_equal(sprobe_test_run(cmd, NULL), 0);
		snprintf(cmd, sizeof(cmd), OUT "/inlined_%s", how[h]);

		pid_t pid;
		const struct sprobe_module *mod;
		struct sprobe_modules *m = sprobe_test_prog_start(cmd, cmd + strlen(OUT) + 1, &pid, &mod);
		unsigned chains = 0, refused = 0;

		for (unsigned long a = start; a < start + size; a++) {
			struct sprobe_src_frame fr[SPROBE_MAX_INLINE];
			struct sprobe_symbol sym;
			int n = sprobe_modules__inline_frames(m, mod->bias + a, fr, SPROBE_MAX_INLINE);

			assert_int_equal(sprobe_modules__symbolize(m, mod->bias + a, &sym), 0);
			assert_string_equal(sym.name, "outer_fn"); /* .symtab is intact */
			if (n < 0) {
				refused++;
				continue;
			}
			chains++;
			assert_true(n <= 2);
			assert_null(fr[n - 1].function);
			if (n == 2)
				assert_string_equal(fr[0].function, "inner_hot");
		}
		print_message("  .debug_info %s: %u chains, %u refused\n", how[h], chains, refused);
		sprobe_test_prog_stop(m, pid);
	}
}

/* Counts of folded lines of the program's thread that end in leaf. */
static unsigned long folded_leaf(const char *folded, const char *leaf)
{
	unsigned long total = 0;
	const char *line = folded;

	while (*line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char tmp[8192];

		if (len < sizeof(tmp) && strncmp(line, "inlined-", 8) == 0) {
			memcpy(tmp, line, len);
			tmp[len] = '\0';
			char *sp = strrchr(tmp, ' ');

			if (sp) {
				*sp = '\0';
				size_t ll = leaf ? strlen(leaf) : 0;

				if (!leaf || (strlen(tmp) >= ll && strcmp(tmp + strlen(tmp) - ll, leaf) == 0))
					total += strtoul(sp + 1, NULL, 10);
			}
		}
		line += len + (eol ? 1 : 0);
	}
	return total;
}

static void test_recording_shows_inlined(void **state)
{
	char *out = NULL;
	(void)state;

	assert_int_equal(sprobe_test_run(CLI " record -q -F 499 -o " OUT "/inl.data -- " PROG " 2000000000 >/dev/null",
					 NULL), 0);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/inl.data --format folded", &out), 0);
	unsigned long all = folded_leaf(out, NULL);
	unsigned long hot = folded_leaf(out, ";main;outer_fn;inner_hot (inlined)");

	print_message("  folded: %lu of %lu samples in main;outer_fn;inner_hot (inlined)\n", hot, all);
	assert_true(all > 0);
	assert_true(hot * 2 > all); /* the loop is nearly all the program does */
	free(out);

	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/inl.data", &out), 0);
	assert_non_null(strstr(out, "inner_hot (inlined)"));
	/* the per-line view: the hottest line is in inner_hot */
	char *lines = strstr(out, "Top source lines by self samples");
	unsigned hot_line = 0;

	assert_non_null(lines);
	lines = strstr(lines, "inlined.c:");
	assert_non_null(lines);
	assert_int_equal(sscanf(lines, "inlined.c:%u", &hot_line), 1);
	assert_true(strncmp(strchr(lines, ' '), "  inner_hot (inlined)\n", 22) == 0);
	print_message("  text: hottest line inlined.c:%u\n", hot_line);
	free(out);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/inl.data --format json | "
					 "python3 -c 'import json,sys; d=json.load(sys.stdin); "
					 "print(\"\\n\".join(f[\"name\"] + (\" INLINED\" if f.get(\"inlined\") else \"\") "
					 "for f in d[\"functions\"]))'",
					 &out), 0);
	assert_non_null(strstr(out, "inner_hot (inlined) INLINED\n"));
	assert_null(strstr(out, "outer_fn INLINED"));
	free(out);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/inl.data --format speedscope", &out), 0);
	assert_non_null(strstr(out, "{\"name\": \"inner_hot (inlined)\", \"file\": \"tests/workloads/inlined.c\", \"line\": "));
	free(out);

	/* STACKPROBE_LINES=0: names only, as before */
	assert_int_equal(sprobe_test_run("STACKPROBE_LINES=0 " CLI " record -q -F 199 -o " OUT "/nolines.data -- " PROG
					 " 300000000 >/dev/null", NULL), 0);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/nolines.data --format folded", &out), 0);
	assert_null(strstr(out, "(inlined)"));
	assert_true(folded_leaf(out, ";main;outer_fn") > 0);
	free(out);

	/* perf with DWARF unwinding shows the same frame under the same caller */
	if (sprobe_test_run("command -v perf >/dev/null 2>&1", NULL) != 0 ||
	    sprobe_test_run("perf record -q -F 199 --call-graph dwarf -o " OUT "/perf.data " PROG
			    " 600000000 >/dev/null 2>&1", NULL) != 0) {
		print_message("  perf unavailable here: not compared\n");
		return;
	}
	assert_int_equal(sprobe_test_run("perf report -i " OUT "/perf.data --stdio --no-children -G 2>/dev/null | "
					 "grep -A1 -m1 -- '  outer_fn$'", &out), 0);
	print_message("  perf: %s", out);
	assert_non_null(strstr(out, "inner_hot (inlined)"));
	free(out);
	/* and perf's hottest source line is ours */
	assert_int_equal(sprobe_test_run("perf report -i " OUT "/perf.data --stdio --no-children --sort srcline "
					 "-g none 2>/dev/null | grep -m1 -o 'inlined.c:[0-9]*'", &out), 0);
	unsigned perf_line = 0;

	assert_int_equal(sscanf(out, "inlined.c:%u", &perf_line), 1);
	print_message("  perf --sort srcline: hottest inlined.c:%u\n", perf_line);
	assert_int_equal(perf_line, hot_line);
	free(out);
}

/* Copy src to dst without its srcline records (each part's trailer
 * counting the records left) and with the names of module files' pcs
 * taken out, as an agent run with STACKPROBE_NAMES=record writes them
 * (module and offset from its bias), its headers saying so (flags);
 * returns the srcline records removed. */
static long strip_lines_and_names(const char *src, const char *dst)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(src);
	int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	struct sprobe_datafile_writer *w = fd >= 0 ? sprobe_datafile_writer__new(fd, NULL) : NULL;
	struct sprobe_df_record rec;
	long removed = 0, in_part = 0, unnamed = 0;
	uint64_t bias[256];
	bool file[256];

	assert_non_null(rd);
	assert_non_null(w);
	while (sprobe_datafile_reader__next(rd, &rec) == 1) {
		if (rec.type == SPROBE_DF_HEADER) {
			in_part = 0;
			rec.header.flags |= SPROBE_DF_HEADER_LINES_BY_READER | SPROBE_DF_HEADER_NAMES_BY_READER;
		}
		if (rec.type == SPROBE_DF_SRCLINE) {
			removed++;
			in_part++;
			continue;
		}
		if (rec.type == SPROBE_DF_MODULE && rec.module.index < 256) {
			bias[rec.module.index] = rec.module.load_bias;
			file[rec.module.index] = rec.module.path_len && rec.module.path[0] == '/' &&
						 rec.module.build_id_len;
		}
		if (rec.type == SPROBE_DF_SYMBOL && rec.symbol.module < 256 && file[rec.symbol.module] &&
		    rec.symbol.name_len) {
			rec.symbol.name = NULL;
			rec.symbol.name_len = 0;
			rec.symbol.offset = rec.symbol.pc - bias[rec.symbol.module];
			unnamed++;
		}
		if (rec.type == SPROBE_DF_TRAILER)
			rec.trailer.records -= (uint64_t)in_part;
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	assert_true(unnamed > 0);
	assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
	assert_int_equal(sprobe_datafile_writer__flush(w), 0);
	sprobe_datafile_writer__free(w);
	sprobe_datafile_reader__free(rd);
	close(fd);
	return removed;
}

/* "pc module offset name" of every symbol record of path, one per line. */
static char *symbols_of(const char *path)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(path);
	struct sprobe_df_record rec;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(rd);
	assert_non_null(f);
	while (sprobe_datafile_reader__next(rd, &rec) == 1)
		if (rec.type == SPROBE_DF_SYMBOL)
			fprintf(f, "%llx %u %llx %.*s\n", (unsigned long long)rec.symbol.pc,
				rec.symbol.module, (unsigned long long)rec.symbol.offset,
				(int)rec.symbol.name_len, rec.symbol.name ? rec.symbol.name : "");
	sprobe_datafile_reader__free(rd);
	fclose(f);
	return buf;
}

/* "pc text lines" of every srcline record of path, one per line, and the
 * reader's final status in *status. */
static char *srclines_of(const char *path, int *status)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(path);
	struct sprobe_df_record rec;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(rd);
	assert_non_null(f);
	while (sprobe_datafile_reader__next(rd, &rec) == 1) {
		if (rec.type != SPROBE_DF_SRCLINE)
			continue;
		fprintf(f, "%llx", (unsigned long long)rec.srcline.pc);
		for (uint32_t i = 0; i < rec.srcline.text_len; i++)
			fputc(rec.srcline.text[i] ? rec.srcline.text[i] : '|', f);
		for (uint32_t i = 0; i < rec.srcline.n; i++)
			fprintf(f, " %u", rec.srcline.lines[i]);
		fputc('\n', f);
	}
	*status = sprobe_datafile_reader__status(rd);
	sprobe_datafile_reader__free(rd);
	fclose(f);
	return buf;
}

/* Under `record` the agent writes no srcline records and names no pc of a
 * module file, and record adds them after the merge
 * (userspace/cli/record_lines.c): the records it makes from the files are
 * the ones the agent makes in the process. A recording whose agent wrote
 * its own (STACKPROBE_LINES=1 STACKPROBE_NAMES=1), stripped of them and
 * given to the pass, comes back with the same symbol and srcline records,
 * and reads complete (each part's trailer counts what was added). */
static void test_record_adds_the_agents_lines(void **state)
{
	int st_agent, st_pass;
	(void)state;

	assert_int_equal(sprobe_test_run("STACKPROBE_LINES=1 STACKPROBE_NAMES=1 " CLI " record -q -F 499 -o " OUT
					 "/agent.data -- " PROG " 600000000 >/dev/null", NULL), 0);
	char *agent = srclines_of(OUT "/agent.data", &st_agent);
	char *agent_syms = symbols_of(OUT "/agent.data");
	long removed = strip_lines_and_names(OUT "/agent.data", OUT "/stripped.data");
	char *none = srclines_of(OUT "/stripped.data", &st_pass);

	assert_int_equal(st_agent, SPROBE_DF_COMPLETE);
	assert_true(removed > 0);
	assert_string_equal(none, "");
	free(none);
	char msg[256];
	long added = cli_record_lines(OUT "/stripped.data", NULL, msg, sizeof(msg));

	print_message("  agent wrote %ld srcline records, record's pass %ld\n", removed, added);
	assert_int_equal(added, removed);
	char *pass = srclines_of(OUT "/stripped.data", &st_pass);

	assert_int_equal(st_pass, SPROBE_DF_COMPLETE);
	assert_string_equal(pass, agent);
	free(pass);
	free(agent);
	char *pass_syms = symbols_of(OUT "/stripped.data");

	assert_string_equal(pass_syms, agent_syms);
	free(pass_syms);
	free(agent_syms);

	/* A file that is not a recording is left as it was. */
	assert_int_equal(sprobe_test_run("echo not-a-recording > " OUT "/junk.data", NULL), 0);
	assert_true(cli_record_lines(OUT "/junk.data", NULL, msg, sizeof(msg)) < 0);
	char *junk = NULL;

	assert_int_equal(sprobe_test_run("cat " OUT "/junk.data", &junk), 0);
	assert_string_equal(junk, "not-a-recording\n");
	free(junk);
}

/* The real pprof reads the lines and the inline frames. */
static void test_pprof_lines(void **state)
{
	char *out = NULL;
	(void)state;

	if (sprobe_test_run("command -v go >/dev/null 2>&1", NULL) != 0)
		SPROBE_SKIP("no go (golang-go, tools/deps.d/viewers.list)");
	assert_int_equal(sprobe_test_run(CLI " record -q -F 499 -o " OUT "/pp.data -- " PROG " 1000000000 >/dev/null",
					 NULL), 0);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/pp.data --format pprof -o " OUT "/pp.pb.gz", NULL), 0);
	assert_int_equal(sprobe_test_run("HOME=${HOME:-/tmp} go tool pprof -lines -top " OUT "/pp.pb.gz 2>&1", &out), 0);
	print_message("%s", strstr(out, "flat%") ? strstr(out, "flat%") : out);
	/* "inner_hot tests/workloads/inlined.c:19 (inline)" */
	assert_non_null(strstr(out, "inner_hot tests/workloads/inlined.c:"));
	assert_non_null(strstr(out, "(inline)"));
	free(out);
	assert_int_equal(sprobe_test_run("HOME=${HOME:-/tmp} go tool pprof -traces " OUT "/pp.pb.gz 2>&1", &out), 0);
	char *t = strstr(out, "inner_hot (inline)");

	assert_non_null(t);
	t = strchr(t, '\n');
	assert_non_null(t);
	while (*t == '\n' || *t == ' ')
		t++;
	assert_true(strncmp(t, "outer_fn", 8) == 0);
	free(out);
}

/* A srcline record whose strings do not match its entry count is refused
 * by the encoder (and so never written). */
static void test_bad_srcline_refused(void **state)
{
	uint8_t buf[256];
	uint32_t lines[2] = { 10, 20 };
	struct sprobe_df_record rec = { .type = SPROBE_DF_SRCLINE };
	(void)state;

	rec.srcline.pc = 0x1000;
	rec.srcline.n = 2;
	rec.srcline.lines = lines;
	rec.srcline.text = "f\0a.c\0\0b.c"; /* 3 NULs + the literal's own: 4 with len 11 */
	rec.srcline.text_len = 11;
	assert_true(sprobe_df__encode(&rec, buf, sizeof(buf)) > 0);
	rec.srcline.text_len = 10; /* last byte not a NUL */
	assert_int_equal(sprobe_df__encode(&rec, buf, sizeof(buf)), -EINVAL);
	rec.srcline.text = "f\0a.c\0";
	rec.srcline.text_len = 6; /* 2 strings for 2 entries */
	assert_int_equal(sprobe_df__encode(&rec, buf, sizeof(buf)), -EINVAL);
	rec.srcline.n = 0;
	assert_int_equal(sprobe_df__encode(&rec, buf, sizeof(buf)), -EINVAL);
	rec.srcline.n = SPROBE_DF_MAX_INLINE + 1;
	assert_int_equal(sprobe_df__encode(&rec, buf, sizeof(buf)), -EINVAL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_teardown(test_chain_matches_addr2line, sprobe_test_prog_teardown),
	cmocka_unit_test_teardown(test_libc_chains_match_addr2line, sprobe_test_prog_teardown),
	cmocka_unit_test_teardown(test_damaged_dwarf, sprobe_test_prog_teardown),
	cmocka_unit_test(test_recording_shows_inlined),
	cmocka_unit_test(test_record_adds_the_agents_lines),
	cmocka_unit_test(test_pprof_lines),
	cmocka_unit_test(test_bad_srcline_refused),
};

int main(int argc, char **argv)
{
	const char *filter = argc > 1 ? argv[1] : getenv("SPROBE_TEST_FILTER");

	if (filter && *filter)
		cmocka_set_test_filter(filter);
	return cmocka_run_group_tests(tests, setup_dir, NULL);
}
