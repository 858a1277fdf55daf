/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A shared library built several ways by mk/unwind.mk for test_symbolize and
 * test_unwind: with .symtab, stripped, stripped with a debug file found by
 * build-id, stripped with a .gnu_debuglink. The same code each time; the
 * tests look names up by address.
 */
#include <stdint.h>

/* Keeps calls from being folded into jumps and functions from merging. */
volatile int sprobe_testlib_sink;

/* Internal: in .symtab only, never in .dynsym. A stripped copy must not
 * call a pc in here by an exported neighbour's name. */
__attribute__((noinline, used)) static int testlib_hidden_worker(int x)
{
	for (int i = 0; i < x; i++)
		sprobe_testlib_sink += i * 7;
	return sprobe_testlib_sink;
}

__attribute__((noinline)) int sprobe_testlib_alpha(int x)
{
	sprobe_testlib_sink += x;
	return sprobe_testlib_sink * 3;
}

__attribute__((noinline)) int sprobe_testlib_beta(int x)
{
	return testlib_hidden_worker(x) + 1;
}

/* A C++ name without a C++ compiler: demangles to sprobe::test::thing(int). */
__attribute__((noinline)) int sprobe_testlib_cxx(int x) __asm__("_ZN6sprobe4test5thingEi");
__attribute__((noinline)) int sprobe_testlib_cxx(int x)
{
	sprobe_testlib_sink -= x;
	return sprobe_testlib_sink;
}

/* The address of the internal function, for the tests. */
void *sprobe_testlib_hidden_addr(void)
{
	return (void *)(uintptr_t)testlib_hidden_worker;
}

/*
 * For test_unwind: calls cb(arg) two frames down, so a stack captured inside
 * cb runs through this library's code (CFI from its own .eh_frame).
 */
__attribute__((noinline)) static int testlib_inner(int (*cb)(void *), void *arg)
{
	int r = cb(arg);

	sprobe_testlib_sink += r;
	return r + 1;
}

__attribute__((noinline)) int sprobe_testlib_call(int (*cb)(void *), void *arg)
{
	int r = testlib_inner(cb, arg);

	sprobe_testlib_sink += r;
	return r + 2;
}
