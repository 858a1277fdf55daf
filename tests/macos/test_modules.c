/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * macOS module inventory and names through the public API of
 * <stackprobe/symbolize.h> (backends/macos/modules.c over dyld). Built and
 * run only on a macOS host (`make test` there); here it is only syntax-checked
 * against tests/macos_sdk_standin.h and has NOT been run by anyone yet.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackprobe/symbolize.h>

#include "sprobe_test.h"

__attribute__((noinline)) int macos_named_function(int x);
__attribute__((noinline)) int macos_named_function(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 7 + 1;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t a = strlen(s), b = strlen(tail);

	return a >= b && strcmp(s + a - b, tail) == 0;
}

static void test_own_function_is_attributed_and_named(void **state)
{
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	uint64_t pc = (uint64_t)(uintptr_t)&macos_named_function;
	const struct sprobe_module *mod;
	struct sprobe_symbol sym;
	char buf[256];

	assert_non_null(m);
	assert_true(sprobe_modules__count(m) > 1);
	mod = sprobe_modules__find(m, pc);
	assert_non_null(mod);
	assert_true(ends_with(mod->path, "/test_modules"));
	assert_int_equal(mod->build_id_len, 16);	/* LC_UUID */
	assert_true(mod->start <= pc && pc < mod->end);

	assert_int_equal(sprobe_modules__symbolize(m, pc + 1, &sym), 0);
	assert_ptr_equal(sym.module, mod);
	assert_non_null(sym.name);
	assert_string_equal(sym.name, "macos_named_function");
	assert_int_equal(sym.sym_offset, 1);
	assert_int_equal(sym.sym_start, pc);
	assert_true(sprobe_symbol__snprintf(&sym, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "macos_named_function+0x1"));
	sprobe_modules__free(m);
}

/* A system library in the dyld shared cache: exported names are there. */
static void test_libsystem_export_is_named(void **state)
{
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	void *(*fn)(size_t) = malloc;
	uint64_t pc = (uint64_t)(uintptr_t)fn;
	struct sprobe_symbol sym;

	assert_non_null(m);
	assert_int_equal(sprobe_modules__symbolize(m, pc, &sym), 0);
	assert_non_null(sym.module);
	print_message("malloc is in %s\n", sym.module->path);
	assert_non_null(strstr(sym.module->name, "libsystem_malloc"));
	assert_non_null(sym.name);
	assert_string_equal(sym.name, "malloc");
	sprobe_modules__free(m);
}

static void test_refresh_without_change_keeps_generation(void **state)
{
	struct sprobe_modules *m = sprobe_modules__new(NULL);
	uint64_t gen;

	assert_non_null(m);
	gen = sprobe_modules__generation(m);
	assert_int_equal(sprobe_modules__refresh(m), 0);
	assert_int_equal(sprobe_modules__generation(m), gen);
	assert_null(sprobe_modules__find(m, 0));
	assert_int_equal(errno, ENOENT);
	assert_null(sprobe_modules__get(m, sprobe_modules__count(m)));
	sprobe_modules__free(m);
}

static void test_other_process_and_empty_mode(void **state)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .pid = 1 };
	struct sprobe_module desc = { .path = "/offline/libx.dylib", .bias = 0x1000, .nsegs = 1 };
	struct sprobe_symbol sym;
	struct sprobe_modules *m;

	assert_null(sprobe_modules__new(&o));
	assert_int_equal(errno, ENOTSUP);

	o.pid = 0;
	o.empty = true;
	m = sprobe_modules__new(&o);
	assert_non_null(m);
	assert_int_equal(sprobe_modules__count(m), 0);
	desc.segs[0].start = 0x10000;
	desc.segs[0].end = 0x20000;
	assert_int_equal(sprobe_modules__add(m, &desc), 0);
	assert_int_equal(sprobe_modules__add(m, &desc), -EEXIST);
	assert_int_equal(sprobe_modules__symbolize(m, 0x10010, &sym), 0);
	assert_string_equal(sym.module->name, "libx.dylib");
	assert_null(sym.name);	/* offline: module + offset only */
	assert_int_equal(sym.module_offset, 0x10010 - 0x1000);
	assert_int_equal(sprobe_modules__symbolize(m, 0x30000, &sym), -ENOENT);
	sprobe_modules__free(m);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_own_function_is_attributed_and_named),
	cmocka_unit_test(test_libsystem_export_is_named),
	cmocka_unit_test(test_refresh_without_change_keeps_generation),
	cmocka_unit_test(test_other_process_and_empty_mode),
};

SPROBE_TEST_MAIN(tests)
