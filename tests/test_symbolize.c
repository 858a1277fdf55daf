/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Module inventory and symbolization: names of known functions in this
 * executable and in a test library built four ways (full .symtab, stripped,
 * debug file by build-id, debug file by .gnu_debuglink), another process's
 * symbols through /proc/PID/maps, refusal to guess in a stripped module,
 * and PLT stubs named "<function>@plt".
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stackprobe/symbolize.h>

#include "sprobe_test.h"

volatile int symtest_sink;
int symtest_exe_function(int x);

static const int symtest_exe_function_line = __LINE__ + 2;
__attribute__((noinline)) int symtest_exe_function(int x)
{
	for (int i = 0; i < x; i++)
		symtest_sink += i;
	return symtest_sink;
}

__attribute__((noinline, used)) static int symtest_static_function(int x)
{
	symtest_sink *= x;
	return symtest_sink + 1;
}

/* build/tests/unwind_testlib/<name>, found next to this executable. */
static void lib_path(char *buf, size_t len, const char *name)
{
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(k > 0);
	exe[k] = '\0';
	*strrchr(exe, '/') = '\0';
	if ((size_t)snprintf(buf, len, "%s/unwind_testlib/%s", exe, name) >= len)
		fail_msg("path too long");
}

static void *open_lib(const char *name)
{
	char path[PATH_MAX];
	void *h;

	lib_path(path, sizeof(path), name);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", path, dlerror());
	return h;
}

static uint64_t sym_addr(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p)
		fail_msg("dlsym %s: %s", name, dlerror());
	return (uint64_t)(uintptr_t)p;
}

static uint64_t hidden_addr(void *h)
{
	void *(*get)(void) = (void *(*)(void))(uintptr_t)sym_addr(h, "sprobe_testlib_hidden_addr");

	return (uint64_t)(uintptr_t)get();
}

/* Symbolize pc and check the name (NULL: must have no symbol's name; the
 * function range of the CFI, "module+0xSTART" from source "eh-frame", is
 * not a symbol: test_stripped_module_gives_offset checks it). */
static void expect_name(struct sprobe_modules *m, uint64_t pc, const char *want,
			const char *want_module)
{
	struct sprobe_symbol s;
	char buf[512];

	assert_int_equal(sprobe_modules__symbolize(m, pc, &s), 0);
	assert_non_null(s.module);
	sprobe_symbol__snprintf(&s, buf, sizeof(buf));
	print_message("  %#llx -> %s [%s]\n", (unsigned long long)pc, buf,
		      s.source ? s.source : "-");
	if (want_module)
		assert_string_equal(s.module->name, want_module);
	if (!want) {
		if (s.name)
			assert_string_equal(s.source, "eh-frame");
		return;
	}
	assert_non_null(s.name);
	assert_string_equal(s.name, want);
	assert_true(pc >= s.sym_start && pc - s.sym_start == s.sym_offset);
	assert_int_equal(s.module_offset, pc - s.module->bias);
}

static void test_executable_symbols(void **state)
{
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	uint64_t f = (uint64_t)(uintptr_t)symtest_exe_function;
	struct sprobe_symbol s;
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_non_null(m);
	assert_true(k > 0);
	exe[k] = '\0';
	expect_name(m, f + 3, "symtest_exe_function", NULL);
	expect_name(m, (uint64_t)(uintptr_t)symtest_static_function, "symtest_static_function",
		    NULL);
	assert_int_equal(sprobe_modules__symbolize(m, f + 3, &s), 0);
	assert_string_equal(s.module->path, exe);
	assert_int_equal(s.sym_offset, 3);
	assert_string_equal(s.source, "symtab");
	sprobe_modules__free(m);
}

/* The executable's build-id as readelf (an independent reader) prints it. */
static void test_inventory_build_id_and_eh_frame(void **state)
{
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	const struct sprobe_module *exe, *libc;
	char cmd[PATH_MAX + 64], line[512], want[160] = "", got[2 * SPROBE_BUILD_ID_MAX + 1];
	FILE *p;

	assert_non_null(m);
	exe = sprobe_modules__find(m, (uint64_t)(uintptr_t)symtest_exe_function);
	assert_non_null(exe);
	snprintf(cmd, sizeof(cmd), "readelf -n '%s'", exe->path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, " Build ID: %159s", want) == 1)
			break;
	pclose(p);
	assert_true(strlen(want) > 0);
	assert_true(sprobe_build_id__hex(exe->build_id, exe->build_id_len, got, sizeof(got)) > 0);
	assert_string_equal(got, want);

	libc = sprobe_modules__find(m, (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "nanosleep"));
	assert_non_null(libc);
	assert_non_null(strstr(libc->name, "libc.so"));
	assert_true(libc->eh_frame_hdr >= libc->start && libc->eh_frame_hdr < libc->end);
	assert_true(libc->build_id_len > 0);
	/* Modules come in address order with disjoint spans. */
	for (size_t i = 1; i < sprobe_modules__count(m); i++)
		assert_true(sprobe_modules__get(m, i - 1)->end <= sprobe_modules__get(m, i)->start);
	assert_null(sprobe_modules__get(m, sprobe_modules__count(m)));
	assert_int_equal(errno, ERANGE);

	unsigned long vdso = getauxval(AT_SYSINFO_EHDR);

	if (vdso) {
		const struct sprobe_module *v = sprobe_modules__find(m, vdso);

		assert_non_null(v);
		assert_string_equal(v->path, "[vdso]");
	}
	sprobe_modules__free(m);
}

static void test_shared_library_symbols(void **state)
{
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	uint64_t gen;
	void *h;

	assert_non_null(m);
	gen = sprobe_modules__generation(m);
	assert_int_equal(sprobe_modules__refresh(m), 0);
	h = open_lib("libsprobe_testlib.so");
	/* dlopen moved the loader's counters: the refresh must see it. */
	assert_int_equal(sprobe_modules__refresh(m), 1);
	assert_true(sprobe_modules__generation(m) > gen);
	expect_name(m, sym_addr(h, "sprobe_testlib_alpha") + 1, "sprobe_testlib_alpha",
		    "libsprobe_testlib.so");
	expect_name(m, sym_addr(h, "sprobe_testlib_beta"), "sprobe_testlib_beta",
		    "libsprobe_testlib.so");
	expect_name(m, hidden_addr(h) + 2, "testlib_hidden_worker", "libsprobe_testlib.so");
	expect_name(m, sym_addr(h, "_ZN6sprobe4test5thingEi"), "sprobe::test::thing(int)",
		    "libsprobe_testlib.so");
	dlclose(h);
	sprobe_modules__free(m);
}

/* libc through its debug file (when libc6-dbg is installed) or .dynsym:
 * either way the name comes without a version suffix. */
static void test_libc_name_without_version(void **state)
{
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	uint64_t f = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "clock_nanosleep");
	struct sprobe_symbol s;

	assert_non_null(m);
	assert_true(f != 0);
	expect_name(m, f + 1, "clock_nanosleep", NULL);
	assert_int_equal(sprobe_modules__symbolize(m, f + 1, &s), 0);
	print_message("  libc symbols from: %s\n", s.source);
	assert_non_null(strstr(s.module->name, "libc.so"));
	sprobe_modules__free(m);
}

/* Line numbers from DWARF: this file is built with -g; a stripped library
 * has none; libc has them when its debug file is installed. */
static void test_source_lines(void **state)
{
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	uint64_t f = (uint64_t)(uintptr_t)symtest_exe_function;
	const char *file = NULL;
	int line = 0;
	struct sprobe_symbol s;
	void *h;

	assert_non_null(m);
	assert_int_equal(sprobe_modules__source_line(m, f + 4, &file, &line), 0);
	print_message("  symtest_exe_function+4 at %s:%d\n", file, line);
	assert_non_null(strstr(file, "test_symbolize.c"));
	assert_true(line >= symtest_exe_function_line && line <= symtest_exe_function_line + 5);

	h = open_lib("libsprobe_testlib_stripped.so");
	assert_int_equal(sprobe_modules__refresh(m), 1);
	assert_int_equal(sprobe_modules__source_line(m, hidden_addr(h), &file, &line), -ENOENT);
	assert_int_equal(sprobe_modules__source_line(m, 0, &file, &line), -ENOENT);
	assert_int_equal(sprobe_modules__source_line(m, f, NULL, &line), -EINVAL);

	f = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "clock_nanosleep");
	assert_int_equal(sprobe_modules__symbolize(m, f, &s), 0);
	if (strcmp(s.source, "debug-build-id") == 0) {
		assert_int_equal(sprobe_modules__source_line(m, f + 8, &file, &line), 0);
		print_message("  clock_nanosleep+8 at %s:%d\n", file, line);
		assert_non_null(strstr(file, "clock_nanosleep.c"));
	}
	dlclose(h);
	sprobe_modules__free(m);
}

static void test_no_demangle_option(void **state)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .no_demangle = true };
	void *h = open_lib("libsprobe_testlib.so");
	struct sprobe_modules *m = sprobe_modules__new(&o);

	assert_non_null(m);
	expect_name(m, sym_addr(h, "_ZN6sprobe4test5thingEi"), "_ZN6sprobe4test5thingEi", NULL);
	sprobe_modules__free(m);
	dlclose(h);
}

/* A stripped module keeps exported names (.dynsym) and names everything
 * else after its function's FDE, "module+0xSTART" (the hidden function's
 * own start): never the nearest exported neighbour's name. */
static void test_stripped_module_gives_offset(void **state)
{
	void *h = open_lib("libsprobe_testlib_stripped.so");
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	uint64_t hidden = hidden_addr(h) + 2;
	struct sprobe_symbol s;
	char buf[256], want[256];

	assert_non_null(m);
	expect_name(m, sym_addr(h, "sprobe_testlib_alpha"), "sprobe_testlib_alpha",
		    "libsprobe_testlib_stripped.so");
	expect_name(m, hidden, NULL, "libsprobe_testlib_stripped.so");
	assert_int_equal(sprobe_modules__symbolize(m, hidden, &s), 0);
	assert_non_null(s.name);
	assert_string_equal(s.source, "eh-frame");
	assert_int_equal(s.sym_start, hidden - 2); /* the function's start */
	assert_true(s.sym_size > 2);
	snprintf(want, sizeof(want), "libsprobe_testlib_stripped.so+0x%llx",
		 (unsigned long long)(hidden - 2 - s.module->bias));
	assert_string_equal(s.name, want);
	snprintf(want, sizeof(want), "libsprobe_testlib_stripped.so+0x%llx+0x2",
		 (unsigned long long)(hidden - 2 - s.module->bias));
	sprobe_symbol__snprintf(&s, buf, sizeof(buf));
	assert_string_equal(buf, want);
	sprobe_modules__free(m);
	dlclose(h);
}

/*
 * The PLT stubs of the object at path (mapped at bias in m) against
 * objdump's labels for them, binutils' own synthesis: each "<f@plt>" of
 * .plt, .plt.sec and .plt.got is named "f@plt" (source "plt") at its
 * first and fifth bytes, and the lazy-binding header ".plt". Returns the
 * count of stubs checked in section only (NULL: all).
 */
static int check_plt_names(struct sprobe_modules *m, const char *path, uint64_t bias,
			   const char *only)
{
	char cmd[PATH_MAX + 96], line[1024], name[512], sec[64] = "";
	unsigned long long a;
	int n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "objdump -d -j .plt -j .plt.sec -j .plt.got '%s'", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		if (sscanf(line, "Disassembly of section %63[^:]:", sec) == 1 ||
		    sscanf(line, "%llx <%511[^>]>:", &a, name) != 2)
			continue;
		if (strstr(name, "@plt-0x")) { /* the header, named after the first stub */
			expect_name(m, bias + a + 4, ".plt", NULL);
			continue;
		}
		if (strncmp(name, "*ABS*", 5) == 0 || !strstr(name, "@plt"))
			continue; /* an IRELATIVE stub (objdump names no function), ".plt" */
		for (int k = 0; k < 5; k += 4) {
			struct sprobe_symbol s;

			expect_name(m, bias + a + (uint64_t)k, name, NULL);
			assert_int_equal(sprobe_modules__symbolize(m, bias + a + (uint64_t)k, &s), 0);
			assert_string_equal(s.source, "plt");
			assert_int_equal(s.sym_start, bias + a);
		}
		n += !only || strcmp(sec, only) == 0;
	}
	assert_int_equal(pclose(p), 0);
	return n;
}

/* A stub is "<function>@plt", as perf names it: no symbol table covers the
 * PLT, and its one FDE covers every stub, which made all of them one row
 * named after the PLT's start. */
static void test_plt_stubs_named(void **state)
{
	void *lazy = open_lib("libsprobe_pltlib.so");
	void *ibt = NULL;
	struct sprobe_modules *m;
	const struct sprobe_module *mod;
	char path[PATH_MAX];

#if defined(__x86_64__)
	ibt = open_lib("libsprobe_pltlib_ibt.so");
#endif
	m = sprobe_modules__new(NULL);
	assert_non_null(m);
	/* This program calls libc through its .plt. */
	mod = sprobe_modules__find(m, (uint64_t)(uintptr_t)symtest_exe_function);
	assert_non_null(mod);
	assert_true(check_plt_names(m, mod->path, mod->bias, ".plt") >= 10);
	/* A stripped library: its .plt, and __cxa_finalize in .plt.got. */
	mod = sprobe_modules__find(m, sym_addr(lazy, "sprobe_pltlib_calls"));
	assert_non_null(mod);
	lib_path(path, sizeof(path), "libsprobe_pltlib.so");
	assert_true(check_plt_names(m, path, mod->bias, ".plt") >= 3);
#if defined(__x86_64__)
	assert_true(check_plt_names(m, path, mod->bias, ".plt.got") >= 1);
	/* IBT: calls go to .plt.sec's stubs. */
	mod = sprobe_modules__find(m, sym_addr(ibt, "sprobe_pltlib_calls"));
	assert_non_null(mod);
	lib_path(path, sizeof(path), "libsprobe_pltlib_ibt.so");
	assert_true(check_plt_names(m, path, mod->bias, ".plt.sec") >= 3);
	dlclose(ibt);
#endif
	sprobe_modules__free(m);
	dlclose(lazy);
}

#ifndef SPROBE_TEST_CORPUS
#define SPROBE_TEST_CORPUS "tests/corpus"
#endif

/* aarch64's PLT, read on any host: tests/corpus/elf/a64-pac-plt.so is
 * tests/unwind_testlib/pltlib.c built with PAC stubs (24 bytes after the
 * 32-byte header) by
 *   aarch64-linux-gnu-gcc -O2 -fPIC -shared -nostartfiles
 *     -mbranch-protection=pac-ret -Wl,-z,pac-plt -Wl,-z,max-page-size=4096
 *     -Wl,-z,noseparate-code -Wl,--build-id=none -Wl,-soname,a64-pac-plt.so
 * and strip --strip-all -R .comment; the addresses are
 * aarch64-linux-gnu-objdump's labels. */
static void test_plt_stubs_aarch64(void **state)
{
	static const struct {
		uint64_t addr;
		const char *name;
	} want[] = {
		{ 0x360, ".plt" }, { 0x37c, ".plt" }, { 0x380, "strlen@plt" },
		{ 0x397, "strlen@plt" }, { 0x398, "getpid@plt" }, { 0x3b0, "strtol@plt" },
		{ 0x3c7, "strtol@plt" },
	};
	struct sprobe_modules_opts o = { .sz = sizeof(o), .empty = true };
	struct sprobe_modules *m = sprobe_modules__new(&o);
	struct sprobe_module d = { .path = SPROBE_TEST_CORPUS "/elf/a64-pac-plt.so", .nsegs = 1 };
	struct sprobe_symbol s;

	assert_non_null(m);
	d.segs[0] = (struct sprobe_segment){ .start = 0, .end = 0x2000,
					     .prot = SPROBE_SEG_R | SPROBE_SEG_X };
	assert_int_equal(sprobe_modules__add(m, &d), 0);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		expect_name(m, want[i].addr, want[i].name, "a64-pac-plt.so");
		assert_int_equal(sprobe_modules__symbolize(m, want[i].addr, &s), 0);
		assert_string_equal(s.source, "plt");
		assert_int_equal(s.sym_size, strcmp(want[i].name, ".plt") ? 24 : 32);
	}
	expect_name(m, 0x3c8, NULL, NULL); /* past the last stub */
	sprobe_modules__free(m);
}

static void test_debug_file_by_build_id(void **state)
{
	char root[PATH_MAX];
	void *h = open_lib("libsprobe_testlib_bid.so");
	struct sprobe_modules_opts o = { .sz = sizeof(o), .debug_root = root };
	struct sprobe_modules *m, *plain;
	struct sprobe_symbol s;
	uint64_t hidden = hidden_addr(h) + 2;

	lib_path(root, sizeof(root), "debug");
	m = sprobe_modules__new(&o);
	assert_non_null(m);
	expect_name(m, hidden, "testlib_hidden_worker", "libsprobe_testlib_bid.so");
	assert_int_equal(sprobe_modules__symbolize(m, hidden, &s), 0);
	assert_string_equal(s.source, "debug-build-id");
	assert_true(s.module->build_id_len > 0);

	/* Without the debug root, the same pc has no name (stripped). */
	plain = sprobe_modules__new(NULL);
	assert_non_null(plain);
	expect_name(plain, hidden, NULL, "libsprobe_testlib_bid.so");
	sprobe_modules__free(plain);
	sprobe_modules__free(m);
	dlclose(h);
}

static void test_debug_file_by_debuglink(void **state)
{
	void *h = open_lib("libsprobe_testlib_link.so");
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	uint64_t hidden = hidden_addr(h) + 2;
	struct sprobe_symbol s;

	assert_non_null(m);
	expect_name(m, hidden, "testlib_hidden_worker", "libsprobe_testlib_link.so");
	assert_int_equal(sprobe_modules__symbolize(m, hidden, &s), 0);
	assert_string_equal(s.source, "debug-link");
	assert_int_equal(s.module->build_id_len, 0);
	sprobe_modules__free(m);
	dlclose(h);
}

static void test_refresh_sees_dlclose(void **state)
{
	void *h = open_lib("libsprobe_testlib_link.so");
	uint64_t alpha = sym_addr(h, "sprobe_testlib_alpha");
	struct sprobe_modules *m = sprobe_modules__new(NULL);

	assert_non_null(m);
	assert_non_null(sprobe_modules__find(m, alpha));
	assert_int_equal(dlclose(h), 0);
	assert_int_equal(sprobe_modules__refresh(m), 1);
	assert_null(sprobe_modules__find(m, alpha));
	assert_int_equal(errno, ENOENT);
	assert_int_equal(sprobe_modules__refresh(m), 0);
	sprobe_modules__free(m);
}

struct child_report {
	uint64_t alpha, hidden, cxx, exe_fn;
};

/* Another process (a forked child that loads the library after the fork,
 * so only the child has it): symbols through /proc/PID/maps. */
/*
 * Each segment's file_offset must agree with the kernel's view: the mapping
 * of /proc/self/maps that holds the segment's start maps file offset
 * map_off + (start - map_start). Checked for the dl_iterate_phdr inventory
 * (self) and the /proc/PID/maps + ELF one (pid = getpid()).
 */
static void check_file_offsets(struct sprobe_modules *m)
{
	unsigned checked = 0;

	for (size_t i = 0; i < sprobe_modules__count(m); i++) {
		const struct sprobe_module *mod = sprobe_modules__get(m, i);

		if (mod->path[0] != '/')
			continue;
		for (uint32_t k = 0; k < mod->nsegs; k++) {
			const struct sprobe_segment *sg = &mod->segs[k];
			FILE *f = fopen("/proc/self/maps", "r");
			char line[PATH_MAX + 128];
			bool found = false;

			assert_non_null(f);
			while (fgets(line, sizeof(line), f)) {
				unsigned long lo, hi, off;

				if (sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &off) != 3)
					continue;
				if (sg->start < lo || sg->start >= hi)
					continue;
				/* .bss past the file's end has an anonymous map. */
				if (!strchr(line, '/'))
					break;
				assert_int_equal(sg->file_offset, off + (sg->start - lo));
				found = true;
				checked++;
				break;
			}
			fclose(f);
			(void)found;
		}
	}
	/* The executable and libc have at least two file-backed segments. */
	assert_true(checked >= 4);
}

static void test_segment_file_offsets(void **state)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .pid = getpid() };
	struct sprobe_modules *self = sprobe_modules__new(NULL);
	struct sprobe_modules *bypid = sprobe_modules__new(&o);

	assert_non_null(self);
	assert_non_null(bypid);
	check_file_offsets(self);
	check_file_offsets(bypid);
	sprobe_modules__free(bypid);
	sprobe_modules__free(self);
}

static void test_other_process_symbols(void **state)
{
	int up[2], down[2];
	struct child_report r;
	pid_t pid;
	int st;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char path[PATH_MAX], c;

		close(up[0]);
		close(down[1]);
		lib_path(path, sizeof(path), "libsprobe_testlib.so");
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

		if (!h)
			_exit(3);
		void *(*get)(void) = (void *(*)(void))dlsym(h, "sprobe_testlib_hidden_addr");

		r.alpha = (uint64_t)(uintptr_t)dlsym(h, "sprobe_testlib_alpha");
		r.cxx = (uint64_t)(uintptr_t)dlsym(h, "_ZN6sprobe4test5thingEi");
		r.hidden = (uint64_t)(uintptr_t)get();
		r.exe_fn = (uint64_t)(uintptr_t)symtest_exe_function;
		if (write(up[1], &r, sizeof(r)) != sizeof(r))
			_exit(4);
		/* Stay alive until the parent closes its end. */
		while (read(down[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &r, sizeof(r)), sizeof(r));

	struct sprobe_modules_opts o = { .sz = sizeof(o), .pid = pid };
	struct sprobe_modules *m = sprobe_modules__new(&o);
	struct sprobe_modules *self = sprobe_modules__new(NULL);

	assert_non_null(m);
	assert_non_null(self);
	/* The parent never loaded the library at that address. */
	assert_null(sprobe_modules__find(self, r.alpha));
	expect_name(m, r.alpha + 1, "sprobe_testlib_alpha", "libsprobe_testlib.so");
	expect_name(m, r.hidden, "testlib_hidden_worker", "libsprobe_testlib.so");
	expect_name(m, r.cxx, "sprobe::test::thing(int)", "libsprobe_testlib.so");
	expect_name(m, r.exe_fn, "symtest_exe_function", NULL);

	/* Same executable, same build-id, whichever way it was read. */
	const struct sprobe_module *a = sprobe_modules__find(m, r.exe_fn);
	const struct sprobe_module *b = sprobe_modules__find(self, r.exe_fn);

	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->bias, b->bias);
	assert_int_equal(a->build_id_len, b->build_id_len);
	assert_memory_equal(a->build_id, b->build_id, a->build_id_len);
	assert_int_equal(sprobe_modules__refresh(m), 0);

	sprobe_modules__free(self);
	sprobe_modules__free(m);
	close(down[1]);
	close(up[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A library deleted from disk after it was loaded: still symbolized, from
 * the kernel's handle on the mapped file (/proc/PID/map_files). */
static void test_other_process_deleted_library(void **state)
{
	char src[PATH_MAX], dir[] = "/tmp/sprobe-symtest-XXXXXX", dst[PATH_MAX + 32], cmd[3 * PATH_MAX];
	int up[2], down[2], st;
	struct child_report r;
	pid_t pid;

	lib_path(src, sizeof(src), "libsprobe_testlib.so");
	assert_non_null(mkdtemp(dir));
	snprintf(dst, sizeof(dst), "%s/libsprobe_deleted.so", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, dst);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		void *h = dlopen(dst, RTLD_NOW | RTLD_LOCAL);

		close(up[0]);
		close(down[1]);
		if (!h)
			_exit(3);
		r.alpha = (uint64_t)(uintptr_t)dlsym(h, "sprobe_testlib_alpha");
		if (write(up[1], &r, sizeof(r)) != sizeof(r))
			_exit(4);
		while (read(down[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &r, sizeof(r)), sizeof(r));
	assert_int_equal(unlink(dst), 0);
	assert_int_equal(rmdir(dir), 0);

	struct sprobe_modules_opts o = { .sz = sizeof(o), .pid = pid };
	struct sprobe_modules *m = sprobe_modules__new(&o);
	const struct sprobe_module *mod;

	assert_non_null(m);
	mod = sprobe_modules__find(m, r.alpha);
	assert_non_null(mod);
	assert_non_null(strstr(mod->path, "(deleted)"));
	expect_name(m, r.alpha + 1, "sprobe_testlib_alpha", NULL);
	sprobe_modules__free(m);
	close(down[1]);
	close(up[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_bad_input(void **state)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o) };
	struct sprobe_modules *m;
	struct sprobe_symbol s;
	char buf[64];
	pid_t pid;

	/* A pid that certainly does not exist: a reaped child's. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	o.pid = pid;
	errno = 0;
	assert_null(sprobe_modules__new(&o));
	assert_int_equal(errno, ESRCH);

	o.pid = -5;
	assert_null(sprobe_modules__new(&o));
	assert_int_equal(errno, EINVAL);
	o.pid = 0;
	o.sz = 1;
	assert_null(sprobe_modules__new(&o));
	assert_int_equal(errno, EINVAL);

	m = sprobe_modules__new(NULL);
	assert_non_null(m);
	assert_int_equal(sprobe_modules__symbolize(m, 0, &s), -ENOENT);
	assert_null(s.module);
	sprobe_symbol__snprintf(&s, buf, sizeof(buf));
	assert_string_equal(buf, "0x0");
	assert_int_equal(sprobe_modules__symbolize(m, 16, NULL), -EINVAL);
	assert_int_equal(sprobe_modules__symbolize(NULL, 16, &s), -EINVAL);
	/* add() is for empty inventories only. */
	assert_int_equal(sprobe_modules__add(m, sprobe_modules__get(m, 0)), -EINVAL);
	assert_int_equal(sprobe_build_id__hex((const uint8_t *)"ab", 2, buf, 4), -ENOSPC);
	sprobe_modules__free(m);
	sprobe_modules__free(NULL);
}

/* Offline: module records saved elsewhere (a data file) are enough. */
static void test_offline_inventory(void **state)
{
	struct sprobe_modules *self = sprobe_modules__new(NULL);
	struct sprobe_modules_opts o = { .sz = sizeof(o), .empty = true };
	struct sprobe_modules *m = sprobe_modules__new(&o);
	const struct sprobe_module *exe;
	struct sprobe_module bad;

	assert_non_null(self);
	assert_non_null(m);
	assert_int_equal(sprobe_modules__count(m), 0);
	exe = sprobe_modules__find(self, (uint64_t)(uintptr_t)symtest_exe_function);
	assert_non_null(exe);
	assert_int_equal(sprobe_modules__add(m, exe), 0);
	expect_name(m, (uint64_t)(uintptr_t)symtest_exe_function, "symtest_exe_function", NULL);
	assert_int_equal(sprobe_modules__add(m, exe), -EEXIST);
	bad = *exe;
	bad.nsegs = 0;
	assert_int_equal(sprobe_modules__add(m, &bad), -EINVAL);
	bad = *exe;
	bad.path = NULL;
	assert_int_equal(sprobe_modules__add(m, &bad), -EINVAL);
	assert_int_equal(sprobe_modules__refresh(m), 0);
	sprobe_modules__free(m);

	/* A record whose build-id does not match the file at its path (the
	 * binary was rebuilt since): module+offset, not the new file's names. */
	m = sprobe_modules__new(&o);
	assert_non_null(m);
	bad = *exe;
	assert_true(bad.build_id_len > 0);
	bad.build_id[0] ^= 0xff;
	assert_int_equal(sprobe_modules__add(m, &bad), 0);
	expect_name(m, (uint64_t)(uintptr_t)symtest_exe_function, NULL, NULL);
	sprobe_modules__free(m);
	sprobe_modules__free(self);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_executable_symbols),
	cmocka_unit_test(test_inventory_build_id_and_eh_frame),
	cmocka_unit_test(test_shared_library_symbols),
	cmocka_unit_test(test_libc_name_without_version),
	cmocka_unit_test(test_source_lines),
	cmocka_unit_test(test_no_demangle_option),
	cmocka_unit_test(test_stripped_module_gives_offset),
	cmocka_unit_test(test_plt_stubs_named),
	cmocka_unit_test(test_plt_stubs_aarch64),
	cmocka_unit_test(test_debug_file_by_build_id),
	cmocka_unit_test(test_debug_file_by_debuglink),
	cmocka_unit_test(test_refresh_sees_dlclose),
	cmocka_unit_test(test_segment_file_offsets),
	cmocka_unit_test(test_other_process_symbols),
	cmocka_unit_test(test_other_process_deleted_library),
	cmocka_unit_test(test_bad_input),
	cmocka_unit_test(test_offline_inventory),
};

SPROBE_TEST_MAIN(tests)
