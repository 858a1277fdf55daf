/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The line-and-inline DWARF loader (userspace/symbols/dwarf_load.c): for
 * thousands of pcs of libc (its debug file, zlib-compressed sections) and
 * every pc of a -g -gz=zlib program, source lines and inline chains are
 * the same as through libdw's own loading (STACKPROBE_DWARF_LOADER=libdw);
 * it keeps fewer bytes than the sections libdw would inflate; it declines
 * files it does not handle; a damaged or truncated compressed section is
 * -EILSEQ from the loader and, through an inventory, no crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/symbolize.h>

#include "prog_helper.h"
#include "sprobe_test.h"
#include "userspace/symbols/dwarf_cache.h"
#include "userspace/symbols/dwarf_load.h"

#define GZPROG "build/inlined-gz"
#define PLAINPROG "build/inlined"
#define MAXPCS 6000

/* libc's module in inventory m and its debug file's path, or skip. */
static const struct sprobe_module *libc_of(struct sprobe_modules *m, char *dbg, size_t len)
{
	for (size_t i = 0; i < sprobe_modules__count(m); i++) {
		const struct sprobe_module *mod = sprobe_modules__get(m, i);
		char hex[2 * SPROBE_BUILD_ID_MAX + 1];

		if (strncmp(mod->name, "libc.so", 7) != 0 || mod->build_id_len < 2 ||
		    sprobe_build_id__hex(mod->build_id, mod->build_id_len, hex, sizeof(hex)) < 0)
			continue;
		snprintf(dbg, len, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
		if (access(dbg, R_OK) == 0)
			return mod;
	}
	return NULL;
}

static Elf *elf_open_path(const char *path, int *fd)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return NULL;
	return elf_begin(*fd, ELF_C_READ_MMAP, NULL);
}

static void elf_close(Elf *e, int fd)
{
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
}

/* pcs (runtime, + bias) in path's STT_FUNC symbols: every byte of each
 * (all) or its first, middle and last byte, then thinned to MAXPCS. */
static size_t func_pcs(const char *path, uint64_t bias, bool all, uint64_t *pcs)
{
	int fd;
	Elf *e = elf_open_path(path, &fd);
	Elf_Scn *scn = NULL;
	size_t n = 0, cap = 1u << 20;
	uint64_t *v = malloc(cap * sizeof(*v));

	assert_non_null(e);
	assert_non_null(v);
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    !s.st_size || s.st_shndx == SHN_UNDEF)
				continue;
			if (all) {
				for (uint64_t o = 0; o < s.st_size && n < cap; o++)
					v[n++] = s.st_value + o + bias;
			} else if (n + 3 <= cap) {
				v[n++] = s.st_value + bias;
				v[n++] = s.st_value + s.st_size / 2 + bias;
				v[n++] = s.st_value + s.st_size - 1 + bias;
			}
		}
	}
	elf_close(e, fd);
	size_t stride = n > MAXPCS ? (n + MAXPCS - 1) / MAXPCS : 1, k = 0;

	for (size_t i = 0; i < n && k < MAXPCS; i += stride)
		pcs[k++] = v[i];
	free(v);
	return k;
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

struct match_stats {
	size_t lines, inlined;
};

/* ref (libdw's loading) and fast (dwarf_load.c) agree on every pc. */
static void compare_inventories(struct sprobe_modules *ref, struct sprobe_modules *fast,
				const uint64_t *pcs, size_t n, struct match_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < n; i++) {
		const char *fa = NULL, *fb = NULL;
		int la = 0, lb = 0;
		int ra = sprobe_modules__source_line(ref, pcs[i], &fa, &la);
		int rb = sprobe_modules__source_line(fast, pcs[i], &fb, &lb);
		struct sprobe_src_frame A[SPROBE_MAX_INLINE], B[SPROBE_MAX_INLINE];

		if (ra != rb || (ra == 0 && (la != lb || !same_str(fa, fb))))
			fail_msg("pc 0x%lx: line %d %s:%d against %d %s:%d", (unsigned long)pcs[i], ra,
				 fa ? fa : "-", la, rb, fb ? fb : "-", lb);
		st->lines += ra == 0;
		int na = sprobe_modules__inline_frames(ref, pcs[i], A, SPROBE_MAX_INLINE);
		int nb = sprobe_modules__inline_frames(fast, pcs[i], B, SPROBE_MAX_INLINE);

		if (na != nb)
			fail_msg("pc 0x%lx: %d inline frames against %d", (unsigned long)pcs[i], na, nb);
		for (int k = 0; k < na; k++)
			if (!same_str(A[k].function, B[k].function) || !same_str(A[k].file, B[k].file) ||
			    A[k].line != B[k].line)
				fail_msg("pc 0x%lx frame %d: %s %s:%u against %s %s:%u",
					 (unsigned long)pcs[i], k, A[k].function ? A[k].function : "-",
					 A[k].file ? A[k].file : "-", A[k].line,
					 B[k].function ? B[k].function : "-", B[k].file ? B[k].file : "-",
					 B[k].line);
		st->inlined += na > 1;
	}
}

/* Open ref's DWARF with libdw's loading (the first lookup opens it). */
static void open_with_libdw(struct sprobe_modules *ref, uint64_t pc)
{
	const char *f;
	int l;

	assert_int_equal(setenv("STACKPROBE_DWARF_LOADER", "libdw", 1), 0);
	(void)sprobe_modules__source_line(ref, pc, &f, &l);
	assert_int_equal(unsetenv("STACKPROBE_DWARF_LOADER"), 0);
}

static void test_libc_matches_libdw(void **state)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .no_perf_map = true };
	struct sprobe_modules *ref = sprobe_modules__new(&o), *fast = sprobe_modules__new(&o);
	uint64_t *pcs = calloc(MAXPCS, sizeof(*pcs));
	struct match_stats st;
	char dbg[512];
	(void)state;

	assert_non_null(ref);
	assert_non_null(fast);
	assert_non_null(pcs);
	const struct sprobe_module *mod = libc_of(ref, dbg, sizeof(dbg));

	if (!mod)
		SPROBE_SKIP("no debug file for libc here (libc6-dbg, tools/deps.d/names.list)");
	size_t n = func_pcs(dbg, mod->bias, false, pcs);

	assert_true(n > 1000);
	open_with_libdw(ref, pcs[0]);
	compare_inventories(ref, fast, pcs, n, &st);
	print_message("libc: %zu pcs, %zu with a line, %zu with inlined frames\n", n, st.lines,
		      st.inlined);
	/* Not a comparison of two empty answers. */
	assert_true(st.lines > n / 2);
	assert_true(st.inlined > n / 20);
	sprobe_modules__free(ref);
	sprobe_modules__free(fast);
	free(pcs);
}

static void test_gz_program_matches_libdw(void **state)
{
	const struct sprobe_module *mod;
	pid_t pid;
	struct sprobe_modules *fast = sprobe_test_prog_start(GZPROG, "inlined-gz", &pid, &mod);
	struct sprobe_modules_opts o = { .sz = sizeof(o), .pid = pid, .no_perf_map = true };
	struct sprobe_modules *ref = sprobe_modules__new(&o);
	struct sprobe_dwarf_image *img = NULL;
	uint64_t *pcs = calloc(MAXPCS, sizeof(*pcs));
	struct match_stats st;
	int fd;
	(void)state;

	assert_non_null(ref);
	assert_non_null(pcs);
	/* The program's own sections are the compressed ones: the fast path. */
	Elf *e = elf_open_path(GZPROG, &fd);

	assert_non_null(e);
	assert_int_equal(sprobe_dwarf_image__open(e, &img), 0);
	sprobe_dwarf_image__free(img);
	elf_close(e, fd);
	size_t n = func_pcs(GZPROG, mod->bias, true, pcs);

	assert_true(n > 100);
	open_with_libdw(ref, pcs[0]);
	compare_inventories(ref, fast, pcs, n, &st);
	print_message("inlined-gz: %zu pcs, %zu with a line, %zu with inlined frames\n", n,
		      st.lines, st.inlined);
	assert_true(st.lines > n / 2);
	assert_true(st.inlined > 0);
	sprobe_modules__free(ref);
	sprobe_test_prog_stop(fast, pid);
	free(pcs);
}

/* Total inflated size of the compressed debug sections: what libdw keeps. */
static uint64_t inflated_debug_bytes(Elf *e)
{
	Elf_Scn *scn = NULL;
	uint64_t t = 0;

	while ((scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		GElf_Chdr ch;

		if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch))
			t += ch.ch_size;
	}
	return t;
}

static void test_image_keeps_less_and_declines_others(void **state)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .no_perf_map = true };
	struct sprobe_modules *m = sprobe_modules__new(&o);
	struct sprobe_dwarf_image *img = NULL;
	char dbg[512];
	int fd;
	(void)state;

	assert_non_null(m);
	if (!libc_of(m, dbg, sizeof(dbg)))
		SPROBE_SKIP("no debug file for libc here (libc6-dbg)");
	Elf *e = elf_open_path(dbg, &fd);

	assert_non_null(e);
	assert_int_equal(sprobe_dwarf_image__open(e, &img), 0);
	assert_non_null(sprobe_dwarf_image__dwarf(img));
	/* libc's debug file has .debug_loclists, which lookups never read. */
	assert_true(sprobe_dwarf_image__bytes(img) < inflated_debug_bytes(e));
	sprobe_dwarf_image__free(img);
	/* The file is left as it was: still compressed, so a second image. */
	assert_int_equal(sprobe_dwarf_image__open(e, &img), 0);
	sprobe_dwarf_image__free(img);
	elf_close(e, fd);

	/* Nothing compressed (-g, no -gz): libdw reads it in place. */
	e = elf_open_path(PLAINPROG, &fd);
	assert_non_null(e);
	assert_int_equal(sprobe_dwarf_image__open(e, &img), -ENOTSUP);
	assert_null(img);
	elf_close(e, fd);
	assert_int_equal(sprobe_dwarf_image__open(NULL, &img), -EINVAL);
	sprobe_modules__free(m);
}

/* A copy of libc's debug file under root/.build-id/, for damaging. */
static void copy_file(const char *from, const char *to)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'", to, from, to);
	assert_int_equal(system(cmd), 0);
}

/* The file offset of section name's header and its header. */
static long shdr_of_opt(const char *path, const char *name, GElf_Shdr *out);

static long shdr_of(const char *path, const char *name, GElf_Shdr *out)
{
	long off = shdr_of_opt(path, name, out);

	assert_true(off > 0);
	return off;
}

/* The inflated size a compressed section's header gives. */
static uint64_t chdr_size(const char *path, const GElf_Shdr *sh)
{
	Elf64_Chdr ch;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &ch, sizeof(ch), (off_t)sh->sh_offset), (ssize_t)sizeof(ch));
	close(fd);
	return ch.ch_size;
}

/* Where name's section header is in the file (-1: no such section). */
static long shdr_of_opt(const char *path, const char *name, GElf_Shdr *out)
{
	int fd;
	Elf *e = elf_open_path(path, &fd);
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	long off = -1;
	GElf_Ehdr eh;

	assert_non_null(e);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	assert_non_null(gelf_getehdr(e, &eh));
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		const char *n;

		if (gelf_getshdr(scn, out) && (n = elf_strptr(e, shstrndx, out->sh_name)) &&
		    strcmp(n, name) == 0) {
			off = (long)(eh.e_shoff + elf_ndxscn(scn) * eh.e_shentsize);
			break;
		}
	}
	elf_close(e, fd);
	return off;
}

static void pwrite_all(const char *path, const void *buf, size_t len, long off)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static int loader_result(const char *path)
{
	struct sprobe_dwarf_image *img = NULL;
	int fd, rc;
	Elf *e = elf_open_path(path, &fd);

	if (!e) {
		elf_close(e, fd);
		return -EILSEQ; /* libelf already refuses it */
	}
	rc = sprobe_dwarf_image__open(e, &img);
	sprobe_dwarf_image__free(img);
	elf_close(e, fd);
	return rc;
}

/* Lookups through an inventory whose debug root holds the damaged copy:
 * answers or -ENOENT, never a crash (the ASan lane runs this too). */
static void lookups_survive(const char *root, const char *dbg)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .no_perf_map = true, .debug_root = root };
	struct sprobe_modules *m = sprobe_modules__new(&o);
	uint64_t *pcs = calloc(MAXPCS, sizeof(*pcs));
	char real[512];

	assert_non_null(m);
	assert_non_null(pcs);
	const struct sprobe_module *mod = libc_of(m, real, sizeof(real));

	assert_non_null(mod);
	size_t n = func_pcs(dbg, mod->bias, false, pcs);

	for (size_t i = 0; i < n; i += 7) {
		struct sprobe_src_frame fr[SPROBE_MAX_INLINE];
		const char *f;
		int l, rc = sprobe_modules__source_line(m, pcs[i], &f, &l);

		assert_true(rc == 0 || rc == -ENOENT);
		rc = sprobe_modules__inline_frames(m, pcs[i], fr, SPROBE_MAX_INLINE);
		assert_true(rc >= 0 || rc == -ENOENT);
	}
	sprobe_modules__free(m);
	free(pcs);
}

static void test_damaged_sections(void **state)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .no_perf_map = true };
	struct sprobe_modules *m = sprobe_modules__new(&o);
	char dbg[512], root[] = "/tmp/sprobe-dwarf-load-XXXXXX", copy[1024];
	GElf_Shdr info;
	(void)state;

	assert_non_null(m);
	if (!libc_of(m, dbg, sizeof(dbg)))
		SPROBE_SKIP("no debug file for libc here (libc6-dbg)");
	sprobe_modules__free(m);
	assert_non_null(mkdtemp(root));
	snprintf(copy, sizeof(copy), "%s%s", root, dbg + strlen("/usr/lib/debug"));
	long hoff = shdr_of(dbg, ".debug_info", &info);

	assert_true(info.sh_flags & SHF_COMPRESSED);
	assert_true(info.sh_size > 65536);

	/* Garbage in the middle of the deflate stream (its Adler-32 fails). */
	uint8_t junk[4096];

	memset(junk, 0x5a, sizeof(junk));
	copy_file(dbg, copy);
	pwrite_all(copy, junk, sizeof(junk), (long)(info.sh_offset + info.sh_size / 2));
	assert_int_equal(loader_result(copy), -EILSEQ);
	lookups_survive(root, dbg);

	/* The stream cut short: the section header says half its size. */
	copy_file(dbg, copy);
	GElf_Shdr cut = info;
	Elf64_Shdr raw = { .sh_name = (Elf64_Word)cut.sh_name, .sh_type = cut.sh_type,
			   .sh_flags = cut.sh_flags, .sh_addr = cut.sh_addr,
			   .sh_offset = cut.sh_offset, .sh_size = cut.sh_size / 2,
			   .sh_link = cut.sh_link, .sh_info = cut.sh_info,
			   .sh_addralign = cut.sh_addralign, .sh_entsize = cut.sh_entsize };

	pwrite_all(copy, &raw, sizeof(raw), hoff);
	assert_int_equal(loader_result(copy), -EILSEQ);
	lookups_survive(root, dbg);

	/* A compression header claiming 1 TiB: refused, not mapped. */
	copy_file(dbg, copy);
	Elf64_Chdr ch = { .ch_type = ELFCOMPRESS_ZLIB, .ch_size = 1ull << 40, .ch_addralign = 8 };

	pwrite_all(copy, &ch, sizeof(ch), (long)info.sh_offset);
	assert_int_equal(loader_result(copy), -EILSEQ);
	lookups_survive(root, dbg);

	/* A section claimed uncompressed with a size that wraps the image's
	 * layout to a page (the loader sums the kept sections' sizes in
	 * dwarf_load.c's order, 16-aligned after the ELF header): refused
	 * before anything is copied (the earlier sections would be inflated
	 * past the end of a one-page mapping). */
	static const char *const order[] = { ".debug_info",	".debug_abbrev",
					     ".debug_aranges",	".debug_line",
					     ".debug_line_str", ".debug_str",
					     ".debug_str_offsets", ".debug_addr",
					     ".debug_ranges",	".debug_rnglists",
					     ".debug_types" };
	uint64_t sum = 64;
	long woff = -1;
	GElf_Shdr wsh = { 0 };

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		GElf_Shdr sh;
		long so = shdr_of_opt(dbg, order[i], &sh);

		if (so < 0)
			continue;
		sum = (sum + 15) & ~15ull;
		if (strcmp(order[i], ".debug_line_str") == 0) {
			woff = so;
			wsh = sh;
			continue;
		}
		sum += (sh.sh_flags & SHF_COMPRESSED) ? chdr_size(dbg, &sh) : sh.sh_size;
	}
	assert_true(woff > 0);
	copy_file(dbg, copy);
	Elf64_Shdr wrap = { .sh_name = (Elf64_Word)wsh.sh_name, .sh_type = wsh.sh_type,
			    .sh_flags = wsh.sh_flags & ~(uint64_t)SHF_COMPRESSED,
			    .sh_offset = wsh.sh_offset, .sh_size = 0 - sum + 4096,
			    .sh_link = wsh.sh_link, .sh_info = wsh.sh_info,
			    .sh_addralign = wsh.sh_addralign, .sh_entsize = wsh.sh_entsize };

	pwrite_all(copy, &wrap, sizeof(wrap), woff);
	assert_int_equal(loader_result(copy), -EILSEQ);
	lookups_survive(root, dbg);

	/* The file cut in the middle of .debug_info's bytes. */
	copy_file(dbg, copy);
	assert_int_equal(truncate(copy, (off_t)(info.sh_offset + info.sh_size / 2)), 0);
	assert_int_not_equal(loader_result(copy), 0);
	lookups_survive(root, dbg);

	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

/* The one cache file in dir (path into out), or how many there are. */
static int cache_files(const char *dir, char *out, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".img")) {
			snprintf(out, len, "%s/%s", dir, de->d_name);
			n++;
		}
	closedir(d);
	return n;
}

/* Open libc's debug file's image once: 1 from the cache, 0 built. */
static int open_cached(const char *dbg)
{
	struct sprobe_dwarf_image *img = NULL;
	int fd, cached;
	Elf *e = elf_open_path(dbg, &fd);

	assert_non_null(e);
	assert_int_equal(sprobe_dwarf_image__open(e, &img), 0);
	assert_non_null(sprobe_dwarf_image__dwarf(img));
	cached = sprobe_dwarf_image__cached(img);
	sprobe_dwarf_image__free(img);
	elf_close(e, fd);
	return cached;
}

/* The image cache (dwarf_cache.h): a built image is stored; the next
 * open maps it and answers exactly as libdw's own loading does; a damaged
 * file (bad header, cut short) is not used and is replaced; no cache or
 * an unusable directory only means building every time. */
static void test_image_cache(void **state)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .no_perf_map = true };
	struct sprobe_modules *ref = sprobe_modules__new(&o), *fast;
	uint64_t *pcs = calloc(MAXPCS, sizeof(*pcs));
	char dir[] = "/tmp/sprobe-dwc-XXXXXX", file[4400], bad[4400];
	struct match_stats st;
	struct stat sb;
	char dbg[512];
	(void)state;

	assert_non_null(ref);
	assert_non_null(pcs);
	const struct sprobe_module *mod = libc_of(ref, dbg, sizeof(dbg));

	if (!mod)
		SPROBE_SKIP("no debug file for libc here (libc6-dbg)");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(sprobe_dwarf_cache__set_dir(dir), 0);
	assert_int_equal(open_cached(dbg), 0); /* built, and stored */
	assert_int_equal(cache_files(dir, file, sizeof(file)), 1);
	assert_int_equal(stat(file, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(open_cached(dbg), 1);
	/* Stored and found: nothing for record to say (it prints a problem). */
	assert_int_equal(sprobe_dwarf_cache__problem(NULL), 0);

	/* Through an inventory (the cached image under sprobe__module_dwarf):
	 * the same answers as libdw's loading of the file. */
	size_t n = func_pcs(dbg, mod->bias, false, pcs);

	assert_true(n > 1000);
	fast = sprobe_modules__new(&o);
	assert_non_null(fast);
	open_with_libdw(ref, pcs[0]);
	compare_inventories(ref, fast, pcs, n, &st);
	assert_true(st.lines > n / 2);
	assert_true(st.inlined > n / 20);
	sprobe_modules__free(fast);

	/* A bad magic, then a file one byte short: built again, replaced. */
	pwrite_all(file, "X", 1, 0);
	assert_int_equal(open_cached(dbg), 0);
	assert_int_equal(open_cached(dbg), 1);
	assert_int_equal(stat(file, &sb), 0);
	assert_int_equal(truncate(file, sb.st_size - 1), 0);
	assert_int_equal(open_cached(dbg), 0);
	assert_int_equal(open_cached(dbg), 1);

	/* A temporary file of a writer that died is removed by the next
	 * writer (a child that has exited: its pid is not alive). */
	pid_t dead = fork();

	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, NULL, 0), dead);
	char stale[4500];

	snprintf(stale, sizeof(stale), "%s/.tmp-%d-%d-0", dir, (int)dead, (int)dead);
	FILE *sf = fopen(stale, "w");

	assert_non_null(sf);
	fclose(sf);
	assert_int_equal(unlink(file), 0);
	assert_int_equal(open_cached(dbg), 0); /* stores again, and sweeps */
	assert_int_not_equal(access(stale, F_OK), 0);
	assert_int_equal(open_cached(dbg), 1);

	/* A directory others may write is not used (nor written). */
	assert_int_equal(sprobe_dwarf_cache__problem(NULL), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(open_cached(dbg), 0);
	assert_int_equal(sprobe_dwarf_cache__problem(NULL), -EPERM);
	assert_int_equal(chmod(dir, 0700), 0);
	assert_int_equal(sprobe_dwarf_cache__set_dir(dir), 0); /* forgets it */
	assert_int_equal(sprobe_dwarf_cache__problem(NULL), 0);
	assert_int_equal(open_cached(dbg), 1);

	/* Another user's home (root run with HOME kept, sudo -E): nothing is
	 * made in it. Only as root can the test make such a directory. */
	if (geteuid() == 0) {
		char home[4400], sub[4500], probe[4600];

		snprintf(home, sizeof(home), "%s/home", dir);
		assert_int_equal(mkdir(home, 0755), 0);
		assert_int_equal(chown(home, 65534, 65534), 0);
		snprintf(sub, sizeof(sub), "%s/.cache/stackprobe/dwarf", home);
		assert_int_equal(sprobe_dwarf_cache__set_dir(sub), 0);
		assert_int_equal(open_cached(dbg), 0);
		snprintf(probe, sizeof(probe), "%s/.cache", home);
		assert_int_not_equal(access(probe, F_OK), 0);
		assert_int_equal(rmdir(home), 0);
		assert_int_equal(sprobe_dwarf_cache__set_dir(dir), 0);
	}

	/* "0" and relative paths turn it off, as "off" does. */
	assert_int_equal(sprobe_dwarf_cache__set_dir("0"), 0);
	assert_false(sprobe_dwarf_cache__enabled());
	assert_int_equal(sprobe_dwarf_cache__set_dir("rel/dir"), 0);
	assert_false(sprobe_dwarf_cache__enabled());
	assert_int_equal(sprobe_dwarf_cache__set_dir(dir), 0);

	/* No cache: built, nothing written. */
	assert_int_equal(unlink(file), 0);
	assert_int_equal(sprobe_dwarf_cache__set_dir("off"), 0);
	assert_false(sprobe_dwarf_cache__enabled());
	assert_int_equal(open_cached(dbg), 0);
	assert_int_equal(cache_files(dir, file, sizeof(file)), 0);

	/* A directory that cannot be made (under a regular file): built. */
	snprintf(bad, sizeof(bad), "%s/plain", dir);
	FILE *pf = fopen(bad, "w");

	assert_non_null(pf);
	fclose(pf);
	strncat(bad, "/sub", sizeof(bad) - strlen(bad) - 1);
	assert_int_equal(sprobe_dwarf_cache__set_dir(bad), 0);
	assert_int_equal(open_cached(dbg), 0);
	assert_int_equal(open_cached(dbg), 0);
	assert_int_equal(sprobe_dwarf_cache__set_dir(NULL), 0);

	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	sprobe_modules__free(ref);
	free(pcs);
}

/* The cache is bounded: each store removes the least recently used images
 * (a get marks its file) until the images fit, never the one just stored. */
static void test_cache_evicts_least_recently_used(void **state)
{
	char dir[] = "/tmp/sprobe-dwe-XXXXXX", file[4400];
	static uint8_t img[64 << 10];
	uint8_t id[4][20];
	void *map;
	size_t len, off;
	(void)state;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(sprobe_dwarf_cache__set_dir(dir), 0);
	/* room for two images and a half (each is a 4 KiB header + 64 KiB) */
	sprobe_dwarf_cache__set_max_total(5 * (sizeof(img) + 4096) / 2);
	memset(img, 0x5a, sizeof(img));
	for (int k = 0; k < 4; k++)
		memset(id[k], 0x10 + k, sizeof(id[k]));
	assert_int_equal(sprobe_dwarf_cache__put(id[0], 20, 1000, 1, img, sizeof(img)), 0);
	assert_int_equal(sprobe_dwarf_cache__put(id[1], 20, 1000, 1, img, sizeof(img)), 0);
	assert_int_equal(cache_files(dir, file, sizeof(file)), 2);
	/* stored 100 and 50 s ago (file times are coarse: two stores in a
	 * row can have the same) */
	for (int k = 0; k < 2; k++) {
		char path[4500], hex[41];
		struct timespec t[2];

		clock_gettime(CLOCK_REALTIME, &t[0]);
		t[0].tv_sec -= 100 - 50 * k;
		t[1] = t[0];
		for (int b = 0; b < 20; b++)
			snprintf(hex + 2 * b, 3, "%02x", id[k][b]);
		snprintf(path, sizeof(path), "%s/%s-1000-v1.img", dir, hex);
		assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
	}
	/* the first is used again: the second is now the least recent */
	assert_int_equal(sprobe_dwarf_cache__get(id[0], 20, 1000, 1, &map, &len, &off), 0);
	munmap(map, len);
	assert_int_equal(sprobe_dwarf_cache__put(id[2], 20, 1000, 1, img, sizeof(img)), 0);
	assert_int_equal(cache_files(dir, file, sizeof(file)), 2);
	assert_int_equal(sprobe_dwarf_cache__get(id[1], 20, 1000, 1, &map, &len, &off), -ENOENT);
	assert_int_equal(sprobe_dwarf_cache__get(id[0], 20, 1000, 1, &map, &len, &off), 0);
	munmap(map, len);
	assert_int_equal(sprobe_dwarf_cache__get(id[2], 20, 1000, 1, &map, &len, &off), 0);
	munmap(map, len);
	/* a bound smaller than one image: the one just stored stays */
	sprobe_dwarf_cache__set_max_total(1);
	assert_int_equal(sprobe_dwarf_cache__put(id[3], 20, 1000, 1, img, sizeof(img)), 0);
	assert_int_equal(cache_files(dir, file, sizeof(file)), 1);
	assert_int_equal(sprobe_dwarf_cache__get(id[3], 20, 1000, 1, &map, &len, &off), 0);
	munmap(map, len);
	sprobe_dwarf_cache__set_max_total(SPROBE_DWARF_CACHE_MAX_TOTAL);
	assert_int_equal(unlink(file), 0);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(sprobe_dwarf_cache__set_dir("off"), 0);
}

static int setup(void **state)
{
	(void)state;
	elf_version(EV_CURRENT);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_image_keeps_less_and_declines_others, setup),
		cmocka_unit_test_setup(test_libc_matches_libdw, setup),
		cmocka_unit_test_setup_teardown(test_gz_program_matches_libdw, setup,
						sprobe_test_prog_teardown),
		cmocka_unit_test_setup(test_damaged_sections, setup),
		cmocka_unit_test_setup(test_image_cache, setup),
		cmocka_unit_test_setup(test_cache_evicts_least_recently_used, setup),
	};
	const char *filter = argc > 1 ? argv[1] : getenv("SPROBE_TEST_FILTER");

	if (filter && *filter)
		cmocka_set_test_filter(filter);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
