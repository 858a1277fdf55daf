/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target for symbolization of malformed ELF files (modules.c +
 * symbolize.c). Built by mk/hardening.mk with
 *   clang -fsanitize=fuzzer,address,undefined tests/fuzz_elf.c
 *         userspace/symbols/{modules,symbolize,build_id,demangle_rust{,_v0},demangle_out,
 *         perfmap,inline,cfi_names,debuginfod,dwarf_load}.c -ldw -lelf -lz -ldl
 *         (and the inline chain of each pc: the DWARF reader; seed gz-debug.so
 *         has zlib-compressed debug sections, the ones dwarf_load.c inflates itself)
 * and run briefly by `make test` (lane test-fuzz-elf), longer by `make fuzz`.
 *
 * Each input is written to a file in a private temp directory; an inventory
 * made with opts.empty gets one module whose path is that file, and a few
 * pcs are symbolized: the first lookup loads the module's symbol table
 * (.symtab, else a debug file by build-id or .gnu_debuglink, else .dynsym),
 * and a pc no symbol covers reads the .eh_frame FDEs (cfi_names.c; seed
 * stripped-ehframe.so).
 * The debug root is the same temp directory and, when the input carries a
 * GNU build-id note, the input is also placed there under
 * .build-id/xx/yyyy.debug and the module is given that id, so the debug-file
 * path is fuzzed too (it is taken when the input has no .symtab).
 *
 * Properties checked (abort = finding): no crash, no sanitizer report, no
 * hang (-timeout); symbolize returns 0 for a pc inside the module and
 * -ENOENT outside; a name, when returned, is a NUL-terminated string and
 * the symbol covers the pc; snprintf of the result never overflows.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stackprobe/symbolize.h>

/* build_id.c: the build-id note parser (internal, not in a public header). */
uint32_t sprobe__parse_build_id(const uint8_t *p, size_t len, size_t align, uint8_t *out);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char workdir[256];
static char input_path[320];

static void cleanup(void)
{
	char cmd[300];

	if (workdir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", workdir);
		if (system(cmd) != 0)
			fprintf(stderr, "fuzz_elf: could not remove %s\n", workdir);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	snprintf(workdir, sizeof(workdir), "/tmp/sprobe-fuzz-elf.XXXXXX");
	if (!mkdtemp(workdir)) {
		perror("fuzz_elf: mkdtemp");
		abort();
	}
	snprintf(input_path, sizeof(input_path), "%s/.build-id", workdir);
	if (mkdir(input_path, 0700) != 0)
		abort();
	snprintf(input_path, sizeof(input_path), "%s/libfuzz.so", workdir);
	atexit(cleanup);
	if (elf_version(EV_CURRENT) == EV_NONE)
		abort();
	return 0;
}

static int write_file(const char *path, const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	size_t off = 0;
	while (off < size) {
		ssize_t w = write(fd, data + off, size - off);
		if (w <= 0) {
			close(fd);
			return -EIO;
		}
		off += (size_t)w;
	}
	close(fd);
	return 0;
}

/* The build-id of the input as libelf sees its note sections (independent
 * of symbolize.c's reading), or 0. */
static uint32_t input_build_id(const uint8_t *data, size_t size, uint8_t *id)
{
	Elf *e = elf_memory((char *)data, size);
	Elf_Scn *scn = NULL;
	uint32_t n = 0;

	if (!e)
		return 0;
	if (elf_kind(e) == ELF_K_ELF) {
		while (!n && (scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
				continue;
			d = elf_rawdata(scn, NULL);
			if (d && d->d_buf)
				n = sprobe__parse_build_id(d->d_buf, d->d_size, sh.sh_addralign, id);
		}
	}
	elf_end(e);
	return n;
}

static void check_symbol(const struct sprobe_symbol *sym, uint64_t pc)
{
	char small[8], big[512];

	if (sym->name) {
		size_t l = strlen(sym->name); /* ASan: must be terminated */
		(void)l;
		if (!sym->source)
			abort();
		/* The symbol found covers the pc (sized) or starts at it. */
		if (!(pc >= sym->sym_start &&
		      (pc - sym->sym_start < sym->sym_size || pc == sym->sym_start)))
			abort();
	}
	int r1 = sprobe_symbol__snprintf(sym, small, sizeof(small));
	int r2 = sprobe_symbol__snprintf(sym, big, sizeof(big));
	if (r1 < 0 || r1 != r2 || strlen(small) >= sizeof(small))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sprobe_module desc;
	uint8_t id[SPROBE_BUILD_ID_MAX];
	char hex[2 * SPROBE_BUILD_ID_MAX + 1], dbg[600];
	uint32_t idlen;

	if (write_file(input_path, data, size))
		abort();
	memset(&desc, 0, sizeof(desc));
	desc.path = input_path;
	desc.bias = 0x10000000;
	desc.nsegs = 2;
	desc.segs[0] = (struct sprobe_segment){ 0x10000000, 0x10100000, SPROBE_SEG_R | SPROBE_SEG_X, 0, 0 };
	desc.segs[1] = (struct sprobe_segment){ 0x10100000, 0x10200000, SPROBE_SEG_R | SPROBE_SEG_W, 0, 0 };
	idlen = input_build_id(data, size, id);
	if (idlen >= 2) {
		memcpy(desc.build_id, id, idlen);
		desc.build_id_len = idlen;
		sprobe_build_id__hex(id, idlen, hex, sizeof(hex));
		snprintf(dbg, sizeof(dbg), "%s/.build-id/%.2s", workdir, hex);
		mkdir(dbg, 0700);
		snprintf(dbg, sizeof(dbg), "%s/.build-id/%.2s/%s.debug", workdir, hex, hex + 2);
		if (write_file(dbg, data, size))
			abort();
	}

	struct sprobe_modules_opts o = { .sz = sizeof(o), .empty = true, .debug_root = workdir };
	struct sprobe_modules *m = sprobe_modules__new(&o);
	if (!m)
		abort();
	if (sprobe_modules__add(m, &desc) != 0)
		abort();

	/* pcs: fixed spots, and a few the input chooses (its first bytes as
	 * offsets), so a symbol table's addresses are reachable. */
	uint64_t pcs[8] = { 0x10000000, 0x10000400, 0x10001000, 0x100fffff, 0x10150000, 0, 0, 0 };
	for (int i = 0; i < 3; i++) {
		uint32_t off = 0;
		if (size >= (size_t)(i + 1) * 4 + 64)
			memcpy(&off, data + 64 + i * 4, 4);
		pcs[5 + i] = 0x10000000 + (off & 0x1fffff);
	}
	for (int i = 0; i < 8; i++) {
		struct sprobe_symbol sym;
		int r = sprobe_modules__symbolize(m, pcs[i], &sym);
		if (r != 0 || sym.module == NULL)
			abort();
		check_symbol(&sym, pcs[i]);
		/* the DWARF reader (libdw plus inline.c's index) on the same input */
		struct sprobe_src_frame fr[SPROBE_MAX_INLINE];
		int n = sprobe_modules__inline_frames(m, pcs[i], fr, SPROBE_MAX_INLINE);

		if (n == 0 || n > SPROBE_MAX_INLINE || (n > 0 && fr[n - 1].function))
			abort();
		for (int k = 0; k < n; k++)
			if ((fr[k].function && strlen(fr[k].function) > (1u << 20)) ||
			    (fr[k].file && strlen(fr[k].file) > (1u << 20)))
				abort();
	}
	struct sprobe_symbol out;
	if (sprobe_modules__symbolize(m, 0x20000000, &out) != -ENOENT || out.module)
		abort();
	check_symbol(&out, 0x20000000);
	sprobe_modules__free(m);
	if (idlen >= 2)
		unlink(dbg);
	return 0;
}
