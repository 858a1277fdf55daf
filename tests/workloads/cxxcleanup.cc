// SPDX-License-Identifier: BSD-2-Clause
// A C++ call chain whose middle frames have cleanups (a std::string and a
// std::vector destroyed on the way out, so their FDEs have an LSDA and
// their CIE names __gxx_personality_v0 through a DW.ref data word):
// main -> top -> mid -> leaf, leaf computing. test_record checks that
// every sample in leaf() is walked up to main and _start.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

__attribute__((noinline)) long leaf(long n)
{
	long s = 0;

	for (long i = 0; i < n; i++)
		s += i * i % 7;
	return s;
}

__attribute__((noinline)) long mid(long n)
{
	std::string a(50, 'x');
	std::vector<int> v(10);

	return leaf(n) + (long)a.size() + (long)v.size();
}

__attribute__((noinline)) long top(long n, int rounds)
{
	std::string b(60, 'y');
	long r = 0;

	for (int k = 0; k < rounds; k++)
		r += mid(n);
	return r + (long)b.size();
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 200;

	printf("%ld\n", top(2000000, rounds));
	return 0;
}
