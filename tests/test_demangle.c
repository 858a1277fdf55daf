/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Rust demangling (userspace/symbols/demangle_rust.c): every Rust symbol of
 * a program built here with rustc, in both manglings, against binutils'
 * c++filt (libiberty's independent Rust demangler); the names a recording
 * of that program shows, against perf's; and hostile names (truncated,
 * mutated, deeply nested, exponentially back-referenced) that must come
 * back as "not demangled", never as a crash or a read past the string.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "userspace/symbols/demangle_rust.h"

#include "run_helper.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out/demangle"

static void expect_demangled(const char *mangled, const char *want)
{
	char *d = sprobe__rust_demangle(mangled);

	if (!d)
		fail_msg("%s: not demangled (errno %d), want %s", mangled, errno, want);
	if (strcmp(d, want) != 0)
		fail_msg("%s:\n  got  %s\n  want %s", mangled, d, want);
	assert_true(sprobe__rust_is_mangled(mangled));
	free(d);
}

static void expect_rejected(const char *mangled)
{
	errno = 0;
	char *d = sprobe__rust_demangle(mangled);

	if (d)
		fail_msg("%s: demangled to %s, want a refusal", mangled, d);
	assert_int_equal(errno, EINVAL);
}

/* The rules of each mangling, one at a time. The legacy name is the one
 * a user reported; the v0 names are rustc 1.95's for tests/workloads/rusthot.rs. */
static void test_rules(void **state)
{
	(void)state;
	expect_demangled("_ZN4core3ops8function6FnOnce40call_once$u7b$$u7b$vtable.shim$u7d$$u7d$"
			 "17h584dd148505da648E",
			 "core::ops::function::FnOnce::call_once{{vtable.shim}}");
	expect_demangled("_ZN42_$LT$$RF$T$u20$as$u20$core..fmt..Debug$GT$3fmt17h44ebc397807870d6E",
			 "<&T as core::fmt::Debug>::fmt");
	expect_demangled("_ZN9hashbrown3raw21RawTable$LT$T$C$A$GT$14reserve_rehash17h0b4a5482b42ea940E"
			 ".llvm.9383500000545889612",
			 "hashbrown::raw::RawTable<T,A>::reserve_rehash");
	/* other suffixes stay */
	expect_demangled("_ZN3hot4main17h28c0ab870516aaa7E.cold", "hot::main.cold");
	expect_demangled("_RINvCs81nRMqtTsfS_3hot4spinyEB2_", "hot::spin::<u64>");
	expect_demangled("_RNvMCs81nRMqtTsfS_3hotNtB2_6Worker3run", "<hot::Worker>::run");
	expect_demangled("_RINvNtCsgEmfK2I1SDS_4core6escape14escape_unicodeKja_E"
			 "CsgY6Mt91CT9J_14rustc_demangle",
			 "core::escape::escape_unicode::<10>");
	/* closures, references with lifetimes under a binder, fn pointers, dyn */
	expect_demangled("_RNCNvC1a4main0B3_", "a::main::{closure#0}");
	expect_demangled("_RINvC1a1fFG_RL0_hEuE", "a::f::<for<'a> fn(&'a u8)>");
	expect_demangled("_RINvC1a1fDNtC1b1TEL_E", "a::f::<dyn b::T>");
	expect_demangled("_RINvC1a1fTmEE", "a::f::<(u32,)>");

	/* C++ and C names are not Rust; neither is a _ZN name without a hash */
	expect_rejected("_ZN6sprobe4test5thingEi");
	expect_rejected("_ZN3foo3barE");
	expect_rejected("main");
	assert_false(sprobe__rust_is_mangled("_ZN3foo3barE"));
	assert_false(sprobe__rust_is_mangled("_Z3foov"));
}

/* Hostile names: refused, never a crash (the ASan lane checks the reads). */
static void test_hostile_names(void **state)
{
	static const char *valid[] = {
		("_ZN4core3ops8function6FnOnce40call_once$u7b$$u7b$vtable.shim$u7d$$u7d$"
		 "17h584dd148505da648E"),
		"_RNvMCs81nRMqtTsfS_3hotNtB2_6Worker3run",
		"_RINvC1a1fFG_RL0_hEuE",
		"_RINvC1a1fDNtC1b1TEL_E",
		("_RINvNtCsgEmfK2I1SDS_4core6escape14escape_unicodeKja_ECsgY6Mt91CT9J_14rustc_demangle"),
	};
	char buf[256];
	unsigned long seed = 22, demangled = 0, refused = 0;
	(void)state;

	/* every prefix */
	for (size_t v = 0; v < sizeof(valid) / sizeof(valid[0]); v++) {
		size_t n = strlen(valid[v]);

		for (size_t k = 0; k < n; k++) {
			char *cut = strndup(valid[v], k);
			char *d = sprobe__rust_demangle(cut);

			assert_non_null(cut);
			if (d) {
				assert_true(strlen(d) > 0);
				demangled++;
			} else {
				refused++;
			}
			free(d);
			free(cut);
		}
	}
	/* random byte mutations */
	for (int iter = 0; iter < 20000; iter++) {
		const char *v = valid[(size_t)iter % (sizeof(valid) / sizeof(valid[0]))];
		size_t n = strlen(v);

		memcpy(buf, v, n + 1);
		for (int j = 0; j < 3; j++) {
			seed = seed * 6364136223846793005ul + 1442695040888963407ul;
			size_t at = 2 + (size_t)(seed >> 33) % (n - 2);

			buf[at] = (char)(1 + (seed >> 20) % 255);
		}
		char *d = sprobe__rust_demangle(buf);

		if (d)
			demangled++;
		else
			refused++;
		free(d);
	}
	print_message("  hostile: %lu demangled, %lu refused\n", demangled, refused);
	assert_true(refused > 0);

	/* depth: "I" nested 2000 times */
	char *deep = malloc(4096);

	assert_non_null(deep);
	strcpy(deep, "_R");
	for (int i = 0; i < 2000; i++)
		strcat(deep, "I");
	strcat(deep, "C1a");
	expect_rejected(deep);

	/* output size: a path 200 names deep of 30 characters each */
	deep = realloc(deep, 16384);
	assert_non_null(deep);
	strcpy(deep, "_R");
	for (int i = 0; i < 200; i++)
		strcat(deep, "Nv");
	strcat(deep, "C1a");
	for (int i = 0; i < 200; i++)
		strcat(deep, "30abcdefghijklmnopqrstuvwxyzabcd");
	expect_rejected(deep);

	/* exponential back-references: each tuple holds the previous one
	 * twice, 40 levels: 2^40 names if it were printed */
	size_t at[41];

	strcpy(deep, "_RINvC1a1f");
	at[0] = strlen(deep) - 2;
	strcat(deep, "TuuE");
	for (int i = 1; i <= 40; i++) {
		char b[64], digits[16];
		uint64_t x = at[i - 1];
		int nd = 0;

		at[i] = strlen(deep) - 2;
		/* base-62 of at - 1 then "_" (0 would be a lone "_") */
		if (x == 0) {
			snprintf(b, sizeof(b), "B_");
		} else {
			x -= 1;
			do {
				int d = (int)(x % 62);

				digits[nd++] = (char)(d < 10 ? '0' + d : d < 36 ? 'a' + d - 10 : 'A' + d - 36);
				x /= 62;
			} while (x);
			char *p = b;

			*p++ = 'B';
			while (nd)
				*p++ = digits[--nd];
			*p++ = '_';
			*p = '\0';
		}
		strcat(deep, "T");
		strcat(deep, b);
		strcat(deep, b);
		strcat(deep, "E");
	}
	strcat(deep, "E");
	expect_rejected(deep);
	/* ...while 3 levels of the same construction print */
	free(deep);
	char *small = sprobe__rust_demangle("_RINvC1a1fTuuETB7_B7_EE");

	assert_non_null(small);
	assert_string_equal(small, "a::f::<((), ()), (((), ()), ((), ()))>");
	free(small);
}

/* Build tests/workloads/rusthot.rs with rustc: "legacy" (rustc's default,
 * the flag that names it is unstable) or "v0". Once per run of this test
 * program. */
static bool build_rust(const char *mangling)
{
	static int built[2];
	int which = strcmp(mangling, "v0") == 0;
	char cmd[512];

	if (built[which])
		return built[which] > 0;
	built[which] = -1;
	if (sprobe_test_run("command -v rustc >/dev/null 2>&1", NULL) != 0)
		return false;
	mkdir("build", 0755);
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	snprintf(cmd, sizeof(cmd),
		 "rustc -O -g --crate-name hot %s -o " OUT "/rusthot_%s tests/workloads/rusthot.rs 2>&1",
		 which ? "-C symbol-mangling-version=v0" : "", mangling);
	char *out = NULL;
	int rc = sprobe_test_run(cmd, &out);

	if (rc != 0)
		fail_msg("rustc failed (%d): %s", rc, out);
	free(out);
	built[which] = 1;
	return true;
}

/*
 * Every Rust symbol of the binary, ours against c++filt's. Where the two
 * differ by design the c++filt side is normalised: libiberty prints crate
 * disambiguators ("core[c1f1a4ba060b9bfa]::") and legacy hashes, which
 * rustc-demangle's short form, perf and Rust's own backtraces leave out;
 * it types const generics ("<10: usize>") and drops ".0" suffixes.
 */
static void compare_with_cxxfilt(const char *mangling, const char *must_have)
{
	char cmd[1024];
	char *syms = NULL, *theirs = NULL;
	unsigned compared = 0, rust = 0;
	bool found = false;

	snprintf(cmd, sizeof(cmd), "nm " OUT "/rusthot_%s | awk '{print $NF}' | "
		 "grep -E '^(_ZN|_R)' | sort -u", mangling);
	assert_int_equal(sprobe_test_run(cmd, &syms), 0);
	snprintf(cmd, sizeof(cmd), "nm " OUT "/rusthot_%s | awk '{print $NF}' | "
		 "grep -E '^(_ZN|_R)' | sort -u | c++filt | "
		 "sed -E 's/\\[[0-9a-f]+\\]//g; s/::h[0-9a-f]{16}$//; "
		 "s/([0-9]+): [ui](8|16|32|64|128|size)/\\1/g'", mangling);
	assert_int_equal(sprobe_test_run(cmd, &theirs), 0);

	char *sp = NULL, *tp = NULL;
	char *s = strtok_r(syms, "\n", &sp), *t = strtok_r(theirs, "\n", &tp);

	for (; s && t; s = strtok_r(NULL, "\n", &sp), t = strtok_r(NULL, "\n", &tp)) {
		if (!sprobe__rust_is_mangled(s))
			continue; /* a C++-shaped _ZN name without a hash */
		rust++;
		char *d = sprobe__rust_demangle(s);

		if (!d)
			fail_msg("%s: not demangled; c++filt: %s", s, t);
		/* libiberty drops ".0"-style suffixes; we keep them, as rustc-demangle does */
		char *dot = strrchr(d, '.');

		if (dot && dot[1] >= '0' && dot[1] <= '9' && strspn(dot + 1, "0123456789") == strlen(dot + 1) &&
		    strcmp(d, t) != 0)
			*dot = '\0';
		if (strcmp(d, t) != 0)
			fail_msg("%s:\n  ours     %s\n  c++filt  %s", s, d, t);
		if (strcmp(d, must_have) == 0)
			found = true;
		compared++;
		free(d);
	}
	assert_null(s);
	assert_null(t);
	print_message("  %s: %u Rust symbols, %u equal to c++filt's\n", mangling, rust, compared);
	assert_true(compared >= 100);
	if (!found)
		fail_msg("%s not among the demangled names", must_have);
	free(syms);
	free(theirs);
}

static void test_rust_binary_against_cxxfilt(void **state)
{
	(void)state;
	if (sprobe_test_run("command -v c++filt >/dev/null 2>&1", NULL) != 0)
		SPROBE_SKIP("no c++filt (binutils, tools/deps.d/outputs.list)");
	if (!build_rust("legacy") || !build_rust("v0"))
		SPROBE_SKIP("no rustc: install Debian's rustc (tools/deps.d/names.list)");
	/* the legacy build's std may itself be v0 (rustc >= 1.90): both kinds are checked */
	compare_with_cxxfilt("legacy", "hot::Worker::run");
	compare_with_cxxfilt("v0", "<hot::Worker>::run");
}

/* perf's names of the program's own hot functions ("hot::spin::<u64>"). */
static char *perf_names(const char *bin)
{
	char cmd[1024];
	char *out = NULL;

	snprintf(cmd, sizeof(cmd),
		 "perf record -q -F 499 -o " OUT "/perf.%s.data " OUT "/%s 300000000 >/dev/null 2>&1 && "
		 "perf report -i " OUT "/perf.%s.data --stdio --sort sym 2>/dev/null | "
		 "sed -n 's/.*\\[\\.\\] //p' | grep -E '^<?hot::' | sed 's/ *$//'",
		 bin, bin, bin);
	if (sprobe_test_run("command -v perf >/dev/null 2>&1", NULL) != 0 ||
	    sprobe_test_run(cmd, &out) != 0 || !out[0]) {
		free(out);
		return NULL;
	}
	return out;
}

/* A folded line with ";caller;" in it and leaf as its last frame, or
 * followed only by frames inlined into it (the std iterator code of its
 * loop: "core::iter::range::...::next (inlined)"). Inlined closures may
 * sit between caller and leaf ("hot::Worker::run::{{closure}} (inlined)"). */
static bool has_stack(const char *folded, const char *caller, const char *leaf)
{
	char c[256], l[256];
	const char *line = folded;

	snprintf(c, sizeof(c), ";%s;", caller);
	snprintf(l, sizeof(l), ";%s", leaf);
	while (*line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char tmp[8192];

		if (len < sizeof(tmp)) {
			memcpy(tmp, line, len);
			tmp[len] = '\0';
			char *sp = strrchr(tmp, ' ');

			if (sp && strstr(tmp, c)) {
				*sp = '\0';
				for (char *at = strstr(tmp, l); at; at = strstr(at + 1, l)) {
					char *end = at + strlen(l);
					bool ok = *end == '\0' || *end == ';';

					/* every frame after it must be an inlined one */
					for (char *f = *end ? end + 1 : NULL; ok && f;) {
						char *next = strchr(f, ';');
						size_t flen = next ? (size_t)(next - f) : strlen(f);

						ok = flen >= 10 && strncmp(f + flen - 10, " (inlined)", 10) == 0;
						f = next ? next + 1 : NULL;
					}
					if (ok)
						return true;
				}
			}
		}
		line += len + (eol ? 1 : 0);
	}
	return false;
}

static void check_recording(const char *mangling, const char *caller, const char *leaf)
{
	char cmd[1024], bin[64];
	char *folded = NULL;

	snprintf(bin, sizeof(bin), "rusthot_%s", mangling);
	snprintf(cmd, sizeof(cmd), CLI " record -q -F 499 -o " OUT "/%s.data -- " OUT "/%s 600000000 >/dev/null",
		 mangling, bin);
	assert_int_equal(sprobe_test_run(cmd, NULL), 0);
	snprintf(cmd, sizeof(cmd), CLI " report -i " OUT "/%s.data --format folded", mangling);
	assert_int_equal(sprobe_test_run(cmd, &folded), 0);
	if (!has_stack(folded, caller, leaf))
		fail_msg("%s: no stack with %s above %s in:\n%s", mangling, caller, leaf, folded);
	/* no hash, no escape left anywhere */
	assert_null(strstr(folded, "$u7b$"));
	assert_null(strstr(folded, "17h"));
	assert_null(strstr(folded, "_RNv"));

	char *perf = perf_names(bin);

	if (!perf) {
		print_message("  %s: perf unavailable here (perf_event_paranoid?), not compared\n", mangling);
	} else {
		unsigned n = 0;
		char *sp = NULL;

		for (char *name = strtok_r(perf, "\n", &sp); name; name = strtok_r(NULL, "\n", &sp)) {
			char want[512];

			snprintf(want, sizeof(want), ";%s", name);
			if (!strstr(folded, want))
				fail_msg("%s: perf names %s, the recording does not:\n%s", mangling, name, folded);
			n++;
		}
		print_message("  %s: perf's %u hot names all in the recording\n", mangling, n);
		assert_true(n >= 1);
	}
	free(perf);
	free(folded);
}

static void test_rust_recording_names(void **state)
{
	(void)state;
	if (!build_rust("legacy") || !build_rust("v0"))
		SPROBE_SKIP("no rustc: install Debian's rustc (tools/deps.d/names.list)");
	check_recording("legacy", "hot::Worker::run", "hot::spin");
	check_recording("v0", "<hot::Worker>::run", "hot::spin::<u64>");
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_rules),
	cmocka_unit_test(test_hostile_names),
	cmocka_unit_test(test_rust_binary_against_cxxfilt),
	cmocka_unit_test(test_rust_recording_names),
};

SPROBE_TEST_MAIN(tests)
