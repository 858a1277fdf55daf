/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Source of the Mach-O dylibs that tests/test_macho.c parses (built by
 * mk/macos.mk with clang --target=<arch>-apple-macos11 and ld64.lld).
 * Freestanding: it includes nothing, so no SDK is needed. Not a test by
 * itself (the name keeps it out of the tests/test_*.c wildcard).
 */
__attribute__((noinline)) static int fixture_local(int x)
{
	__asm__ volatile("" : "+r"(x));	/* keep a body and a local symbol */
	return x * 3;
}

int fixture_first(int x);
int fixture_second(int x);
int fixture_third(int x);

__attribute__((noinline)) int fixture_first(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

__attribute__((noinline)) int fixture_second(int x)
{
	return fixture_local(x) + fixture_first(x);
}

int fixture_third(int x)
{
	int s = 0;

	for (int i = 0; i < x; i++)
		s += fixture_second(i);
	return s;
}
