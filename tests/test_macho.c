/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Mach-O image parser of backends/macos/macho.c, run on Linux against
 * real dylibs (arm64 and x86_64) that ld64.lld linked from
 * tests/macho_fixture.c. Each image is laid out in memory the way dyld maps
 * it (every segment at its vmaddr plus a slide), then parsed. Expected
 * values come from llvm-nm and llvm-objdump run on the same files by
 * mk/macos.mk, never from numbers written here.
 *
 * What this does not cover: the dyld inventory (macOS only) and anything
 * about a live macOS process; see tests/macos/test_capture.c and the CI
 * workflow for those.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sprobe_test.h"
#include "backends/macos/modules.h"

#ifndef MACHO_FIXTURE_DIR
#error "MACHO_FIXTURE_DIR is set by mk/macos.mk"
#endif

#define CPU_TYPE_X86_64 0x01000007u	/* <mach/machine.h> */
#define CPU_TYPE_ARM64 0x0100000cu

static const char *const archs[] = { "arm64", "x86_64" };

struct nm_sym {
	uint64_t addr;
	char type;
	char name[64];
};

/* An image "loaded" into a heap buffer: segment bytes at vmaddr - base. */
struct loaded {
	uint8_t *mem;
	size_t size;
	uint64_t base;		/* lowest vmaddr */
	int64_t slide;
	size_t span;		/* __TEXT vmsize: bytes readable from the header */
	struct nm_sym syms[16];
	int nsyms;
	uint8_t uuid[16];
	uint64_t text_vmaddr, text_vmsize;
};

static void fixture_path(char *buf, size_t len, const char *arch, const char *suffix)
{
	snprintf(buf, len, "%s/libfx-%s%s", MACHO_FIXTURE_DIR, arch, suffix);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	buf = malloc((size_t)n);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* The test's own minimal loader: trusts the linker's output, as dyld does
 * after validating it. */
static void load(const char *arch, const char *suffix, struct loaded *l)
{
	char path[512];
	size_t flen, off;
	uint8_t *file;
	uint32_t ncmds;
	uint64_t lo = UINT64_MAX, hi = 0;

	memset(l, 0, sizeof(*l));
	fixture_path(path, sizeof(path), arch, suffix);
	file = read_file(path, &flen);
	memcpy(&ncmds, file + 16, 4);
	for (int pass = 0; pass < 2; pass++) {
		off = 32;
		for (uint32_t i = 0; i < ncmds; i++) {
			uint32_t cmd, cmdsize;
			uint64_t vmaddr, vmsize, fileoff, filesize;

			memcpy(&cmd, file + off, 4);
			memcpy(&cmdsize, file + off + 4, 4);
			if (cmd == 0x19) {	/* LC_SEGMENT_64 */
				memcpy(&vmaddr, file + off + 24, 8);
				memcpy(&vmsize, file + off + 32, 8);
				memcpy(&fileoff, file + off + 40, 8);
				memcpy(&filesize, file + off + 48, 8);
				if (pass == 0) {
					lo = vmaddr < lo ? vmaddr : lo;
					hi = vmaddr + vmsize > hi ? vmaddr + vmsize : hi;
				} else {
					assert_true(fileoff + filesize <= flen);
					memcpy(l->mem + (vmaddr - lo), file + fileoff, filesize);
					if (!strncmp((char *)file + off + 8, "__TEXT", 16))
						l->span = vmsize;
				}
			}
			off += cmdsize;
		}
		if (pass == 0) {
			assert_true(hi > lo);
			l->size = hi - lo;
			l->mem = calloc(1, l->size);
			assert_non_null(l->mem);
			l->base = lo;
			l->slide = (int64_t)((uintptr_t)l->mem - lo);
		}
	}
	free(file);
}

/* llvm-nm, llvm-objdump's uuid and __TEXT readings of the unstripped image. */
static void load_expectations(const char *arch, struct loaded *l)
{
	char path[512], line[256];
	unsigned b[16];
	FILE *f;

	fixture_path(path, sizeof(path), arch, ".nm");
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f) && l->nsyms < 16) {
		struct nm_sym *s = &l->syms[l->nsyms];
		unsigned long long a;

		if (sscanf(line, "%llx %c %63s", &a, &s->type, s->name) == 3) {
			s->addr = a;
			l->nsyms++;
		}
	}
	fclose(f);
	assert_true(l->nsyms >= 4);	/* the fixture defines four functions */

	fixture_path(path, sizeof(path), arch, ".uuid");
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%2x%2x%2x%2x-%2x%2x-%2x%2x-%2x%2x-%2x%2x%2x%2x%2x%2x",
				&b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &b[8],
				&b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &b[15]), 16);
	fclose(f);
	for (int i = 0; i < 16; i++)
		l->uuid[i] = (uint8_t)b[i];

	fixture_path(path, sizeof(path), arch, ".text");
	f = fopen(path, "r");
	assert_non_null(f);
	{
		unsigned long long a, s;

		assert_int_equal(fscanf(f, "%llx %llx", &a, &s), 2);
		l->text_vmaddr = a;
		l->text_vmsize = s;
	}
	fclose(f);
}

static const void *header_of(const struct loaded *l)
{
	return l->mem + (l->text_vmaddr - l->base);
}

static void test_parse_matches_llvm_readings(void **state)
{
	for (size_t a = 0; a < 2; a++) {
		struct loaded l;
		struct sprobe_macho_image img;

		load(archs[a], ".dylib", &l);
		load_expectations(archs[a], &l);
		assert_int_equal(sprobe_macho_image__parse(header_of(&l), l.span, l.slide, &img), 0);
		assert_int_equal(img.text_start, l.text_vmaddr + (uint64_t)l.slide);
		assert_int_equal(img.text_end - img.text_start, l.text_vmsize);
		assert_true(img.has_uuid);
		assert_memory_equal(img.uuid, l.uuid, 16);
		assert_int_equal(img.cputype, a == 0 ? CPU_TYPE_ARM64 : CPU_TYPE_X86_64);
		assert_int_equal(img.filetype, 6);	/* MH_DYLIB */
		assert_true(img.nsyms >= (uint32_t)l.nsyms);
		assert_non_null(img.fstarts);
		sprobe_macho_image__clear(&img);
		free(l.mem);
	}
}

static void test_symbolize_every_function(void **state)
{
	for (size_t a = 0; a < 2; a++) {
		struct loaded l;
		struct sprobe_macho_image img;

		load(archs[a], ".dylib", &l);
		load_expectations(archs[a], &l);
		assert_int_equal(sprobe_macho_image__parse(header_of(&l), l.span, l.slide, &img), 0);
		for (int i = 0; i < l.nsyms; i++) {
			uint64_t pc = l.syms[i].addr + (uint64_t)l.slide, off = 99;
			const char *name = NULL;

			assert_true(sprobe_macho_image__contains(&img, pc));
			assert_int_equal(sprobe_macho_image__symbolize(&img, pc, &name, &off), 0);
			assert_string_equal(name, l.syms[i].name + 1);	/* no leading '_' */
			assert_int_equal(off, 0);
			/* A pc inside the body (every fixture function is > 2 bytes). */
			assert_int_equal(sprobe_macho_image__symbolize(&img, pc + 2, &name, &off), 0);
			assert_string_equal(name, l.syms[i].name + 1);
			assert_int_equal(off, 2);
		}
		sprobe_macho_image__clear(&img);
		free(l.mem);
	}
}

static void test_pc_outside_functions_is_enoent(void **state)
{
	struct loaded l;
	struct sprobe_macho_image img;
	const char *name;
	uint64_t off;

	load("arm64", ".dylib", &l);
	load_expectations("arm64", &l);
	assert_int_equal(sprobe_macho_image__parse(header_of(&l), l.span, l.slide, &img), 0);
	/* The header itself: inside __TEXT, before the first symbol. */
	assert_int_equal(sprobe_macho_image__symbolize(&img, img.text_start, &name, &off), -ENOENT);
	assert_false(sprobe_macho_image__contains(&img, img.text_end));
	assert_int_equal(sprobe_macho_image__symbolize(&img, img.text_end, &name, &off), -ENOENT);
	assert_int_equal(sprobe_macho_image__symbolize(&img, 0, &name, &off), -ENOENT);
	assert_int_equal(sprobe_macho_image__symbolize(NULL, 0, &name, &off), -EINVAL);
	sprobe_macho_image__clear(&img);
	free(l.mem);
}

/* strip -x removes the static function's name but LC_FUNCTION_STARTS still
 * marks it: it must come out unnamed, not as "fixture_second+0x30". */
static void test_stripped_local_is_unnamed_not_misnamed(void **state)
{
	for (size_t a = 0; a < 2; a++) {
		struct loaded l, full;
		struct sprobe_macho_image img;
		int locals = 0;

		load(archs[a], ".stripped.dylib", &l);
		load(archs[a], ".dylib", &full);
		load_expectations(archs[a], &full);
		assert_int_equal(sprobe_macho_image__parse(header_of(&l), l.span, l.slide, &img), 0);
		for (int i = 0; i < full.nsyms; i++) {
			uint64_t pc = full.syms[i].addr + (uint64_t)l.slide, off;
			const char *name = NULL;
			int err = sprobe_macho_image__symbolize(&img, pc + 2, &name, &off);

			if (full.syms[i].type == 't') {
				locals++;
				assert_int_equal(err, -ENOENT);
			} else {
				assert_int_equal(err, 0);
				assert_string_equal(name, full.syms[i].name + 1);
			}
		}
		assert_int_equal(locals, 1);	/* fixture_local */
		/* What the dladdr fallback on macOS relies on: a function start
		 * between a symbol and the pc means the name is not the pc's. */
		for (int i = 1; i < full.nsyms; i++) {
			uint64_t prev = full.syms[i - 1].addr + (uint64_t)l.slide;
			uint64_t pc = full.syms[i].addr + (uint64_t)l.slide + 2;

			assert_int_equal(sprobe_macho_image__unnamed_between(&img, prev, pc), 1);
			assert_int_equal(sprobe_macho_image__unnamed_between(&img, pc - 2, pc), 0);
			assert_int_equal(sprobe_macho_image__unnamed_between(&img, pc, prev), -EINVAL);
		}
		sprobe_macho_image__clear(&img);
		free(l.mem);
		free(full.mem);
	}
}

/* Offsets of fields the parser must validate, found by walking the image. */
struct cmd_offsets {
	size_t first_cmd, symtab, fstarts, uuid;
	size_t nonseg[32];	/* load commands other than segments */
	size_t nonseg_len[32];
	int nnonseg;
};

static void find_cmds(const uint8_t *h, struct cmd_offsets *o)
{
	uint32_t ncmds;
	size_t off = 32;

	memset(o, 0, sizeof(*o));
	memcpy(&ncmds, h + 16, 4);
	o->first_cmd = off;
	for (uint32_t i = 0; i < ncmds; i++) {
		uint32_t cmd, cmdsize;

		memcpy(&cmd, h + off, 4);
		memcpy(&cmdsize, h + off + 4, 4);
		if (cmd == 0x2)
			o->symtab = off;
		else if (cmd == 0x26)
			o->fstarts = off;
		else if (cmd == 0x1b)
			o->uuid = off;
		if (cmd != 0x19 && o->nnonseg < 32) {
			o->nonseg[o->nnonseg] = off;
			o->nonseg_len[o->nnonseg++] = cmdsize;
		}
		off += cmdsize;
	}
	assert_true(o->symtab && o->fstarts && o->uuid);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void test_hostile_load_commands_are_refused(void **state)
{
	struct loaded l;
	struct sprobe_macho_image img;
	struct cmd_offsets o;
	uint8_t *h, *saved;
	uint32_t v;
	size_t hdr_len;
	struct {
		const char *what;
		size_t at;
		uint32_t value;
	} cases[8];
	int n = 0;

	load("x86_64", ".dylib", &l);
	load_expectations("x86_64", &l);
	h = (uint8_t *)header_of(&l);
	find_cmds(h, &o);
	memcpy(&v, h + 20, 4);
	hdr_len = 32 + v;
	saved = malloc(hdr_len);
	assert_non_null(saved);
	memcpy(saved, h, hdr_len);

	cases[n++] = (typeof(cases[0])){ "bad magic", 0, 0xfeedfacf ^ 1 };
	cases[n++] = (typeof(cases[0])){ "sizeofcmds past span", 20, (uint32_t)l.span };
	cases[n++] = (typeof(cases[0])){ "cmdsize 0", o.first_cmd + 4, 0 };
	cases[n++] = (typeof(cases[0])){ "cmdsize past sizeofcmds", o.first_cmd + 4, 0x10000 };
	cases[n++] = (typeof(cases[0])){ "ncmds huge", 16, 0xffffffffu };
	cases[n++] = (typeof(cases[0])){ "symoff outside __LINKEDIT", o.symtab + 8, 0 };
	cases[n++] = (typeof(cases[0])){ "strsize past __LINKEDIT", o.symtab + 20, 0x7fffffffu };
	cases[n++] = (typeof(cases[0])){ "function starts past __LINKEDIT", o.fstarts + 12,
					 0x7fffffffu };
	for (int i = 0; i < n; i++) {
		memcpy(h, saved, hdr_len);
		put32(h + cases[i].at, cases[i].value);
		print_message("case: %s\n", cases[i].what);
		assert_int_equal(sprobe_macho_image__parse(h, l.span, l.slide, &img), -EINVAL);
	}
	memcpy(h, saved, hdr_len);
	assert_int_equal(sprobe_macho_image__parse(h, l.span, l.slide, &img), 0);
	assert_int_equal(sprobe_macho_image__parse(h, 16, l.slide, &img), -EINVAL);
	assert_int_equal(sprobe_macho_image__parse(NULL, l.span, l.slide, &img), -EINVAL);
	free(saved);
	free(l.mem);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * Random byte flips in everything the parser has to distrust: the header,
 * the non-segment load commands, the symbol and string tables and the
 * function starts. (Segment commands describe the mapping itself; dyld has
 * validated them before any image is visible, and the parser trusts them.)
 * Every parse must return 0 or -EINVAL, every lookup 0 or -ENOENT, and any
 * name returned must be a NUL-terminated string inside the string table.
 */
static void test_random_corruption_never_crashes(void **state)
{
	const char *env = getenv("SPROBE_MACHO_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : 0x5eed5eedull, rng;
	int iterations = 4000, parsed = 0, named = 0;
	struct loaded l;
	struct sprobe_macho_image img;
	struct cmd_offsets o;
	uint8_t *h, *pristine;
	uint32_t nsyms, strsize;
	size_t regions[40][2];
	int nreg = 0;

	print_message("seed 0x%llx (SPROBE_MACHO_SEED to replay)\n", (unsigned long long)seed);
	rng = seed;
	load("arm64", ".dylib", &l);
	load_expectations("arm64", &l);
	h = (uint8_t *)header_of(&l);
	find_cmds(h, &o);
	assert_int_equal(sprobe_macho_image__parse(h, l.span, l.slide, &img), 0);
	/* Regions as offsets from the header (all inside l.mem). */
	regions[nreg][0] = 0;
	regions[nreg++][1] = 32;
	for (int i = 0; i < o.nnonseg; i++) {
		regions[nreg][0] = o.nonseg[i];
		regions[nreg++][1] = o.nonseg_len[i];
	}
	memcpy(&nsyms, h + o.symtab + 12, 4);
	memcpy(&strsize, h + o.symtab + 20, 4);
	regions[nreg][0] = (size_t)((const uint8_t *)img.symtab - h);
	regions[nreg++][1] = (size_t)nsyms * 16;
	regions[nreg][0] = (size_t)((const uint8_t *)img.strtab - h);
	regions[nreg++][1] = strsize;
	regions[nreg][0] = (size_t)(img.fstarts - h);
	regions[nreg++][1] = img.fstarts_size;
	sprobe_macho_image__clear(&img);

	pristine = malloc(l.size);
	assert_non_null(pristine);
	memcpy(pristine, l.mem, l.size);
	for (int it = 0; it < iterations; it++) {
		int flips = 1 + (int)(xorshift(&rng) % 8);

		memcpy(l.mem, pristine, l.size);
		for (int f = 0; f < flips; f++) {
			int r = (int)(xorshift(&rng) % (uint64_t)nreg);
			size_t at;

			if (regions[r][1] == 0)
				continue;
			at = regions[r][0] + (size_t)(xorshift(&rng) % regions[r][1]);
			h[at] ^= (uint8_t)(1u << (xorshift(&rng) % 8));
		}
		int err = sprobe_macho_image__parse(h, l.span, l.slide, &img);

		assert_true(err == 0 || err == -EINVAL);
		if (err)
			continue;
		parsed++;
		for (int k = 0; k < 16; k++) {
			uint64_t pc = img.text_start + xorshift(&rng) % (img.text_end - img.text_start);
			const char *name;
			uint64_t off;

			err = sprobe_macho_image__symbolize(&img, pc, &name, &off);
			assert_true(err == 0 || err == -ENOENT);
			if (err)
				continue;
			named++;
			assert_true(name > img.strtab && name < img.strtab + img.strsize);
			assert_non_null(memchr(name, '\0', (size_t)(img.strtab + img.strsize - name)));
		}
		sprobe_macho_image__clear(&img);
	}
	print_message("%d/%d mutated images parsed, %d lookups named\n", parsed, iterations, named);
	/* Most flips land in bytes the parser may accept; both paths ran. */
	assert_true(parsed > 0 && parsed < iterations);
	assert_true(named > 0);
	free(pristine);
	free(l.mem);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_parse_matches_llvm_readings),
	cmocka_unit_test(test_symbolize_every_function),
	cmocka_unit_test(test_pc_outside_functions_is_enoent),
	cmocka_unit_test(test_stripped_local_is_unnamed_not_misnamed),
	cmocka_unit_test(test_hostile_load_commands_are_refused),
	cmocka_unit_test(test_random_corruption_never_crashes),
};

SPROBE_TEST_MAIN(tests)
