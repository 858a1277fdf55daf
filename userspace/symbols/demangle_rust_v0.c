/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Rust v0 demangling (RFC 2603, `-C symbol-mangling-version=v0`; see
 * demangle_rust_v0.h). The printer follows the grammar as it parses, so a
 * symbol is read once, left to right, except for back-references, which
 * re-read an earlier part of the same string.
 *
 * Bounds against hostile names: every read checks the string's end; the
 * recursion depth is capped (V0_MAX_DEPTH), and so is the output
 * (demangle_out.h). Either cap makes the symbol "malformed".
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/symbols/demangle_out.h"
#include "userspace/symbols/demangle_rust_v0.h"

#define V0_MAX_DEPTH 256

struct v0 {
	const char *s;	/* after "_R": back-references count from here */
	size_t n, pos;
	unsigned depth;
	uint64_t bound_lifetimes;
	bool quiet;	/* parse without printing (impl paths, the crate) */
	struct sprobe_dm_out *o;
};

static void v0_put(struct v0 *p, const char *s)
{
	if (!p->quiet)
		sprobe__dm_put(p->o, s);
}

static void v0_put_n(struct v0 *p, const char *s, size_t n)
{
	if (!p->quiet)
		sprobe__dm_put_n(p->o, s, n);
}

static bool v0_bad(struct v0 *p)
{
	return p->o->bad || p->o->nomem;
}

static void v0_fail(struct v0 *p)
{
	p->o->bad = true;
}

static bool v0_eat(struct v0 *p, char c)
{
	if (p->pos < p->n && p->s[p->pos] == c) {
		p->pos++;
		return true;
	}
	return false;
}

static char v0_next(struct v0 *p)
{
	if (p->pos >= p->n) {
		v0_fail(p);
		return 0;
	}
	return p->s[p->pos++];
}

static bool v0_enter(struct v0 *p)
{
	if (v0_bad(p) || ++p->depth > V0_MAX_DEPTH) {
		v0_fail(p);
		return false;
	}
	return true;
}

/* <base-62-number> = {0-9a-zA-Z} "_": "_" is 0, else the digits' value + 1. */
static uint64_t v0_base62(struct v0 *p)
{
	uint64_t x = 0;

	if (v0_eat(p, '_'))
		return 0;
	while (p->pos < p->n && p->s[p->pos] != '_') {
		char c = p->s[p->pos++];
		uint64_t d;

		if (c >= '0' && c <= '9')
			d = (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'z')
			d = (uint64_t)(c - 'a') + 10;
		else if (c >= 'A' && c <= 'Z')
			d = (uint64_t)(c - 'A') + 36;
		else {
			v0_fail(p);
			return 0;
		}
		if (x > (UINT64_MAX - d) / 62) {
			v0_fail(p);
			return 0;
		}
		x = x * 62 + d;
	}
	if (!v0_eat(p, '_') || x == UINT64_MAX) {
		v0_fail(p);
		return 0;
	}
	return x + 1;
}

/* [tag <base-62-number>]: 0 when the tag is absent, else the number + 1. */
static uint64_t v0_opt62(struct v0 *p, char tag)
{
	uint64_t x;

	if (!v0_eat(p, tag))
		return 0;
	x = v0_base62(p);
	if (x == UINT64_MAX) {
		v0_fail(p);
		return 0;
	}
	return x + 1;
}

static uint64_t v0_decimal(struct v0 *p)
{
	uint64_t x = 0;

	if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9') {
		v0_fail(p);
		return 0;
	}
	if (p->s[p->pos] == '0') { /* no leading zeros */
		p->pos++;
		return 0;
	}
	while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
		if (x > (UINT64_MAX - 9) / 10) {
			v0_fail(p);
			return 0;
		}
		x = x * 10 + (uint64_t)(p->s[p->pos++] - '0');
	}
	return x;
}

struct ident {
	const char *s;
	size_t len;
	bool punycode;
};

/* <undisambiguated-identifier> = ["u"] <decimal> ["_"] <bytes> */
static struct ident v0_ident(struct v0 *p)
{
	struct ident id = { 0 };
	uint64_t len;

	id.punycode = v0_eat(p, 'u');
	len = v0_decimal(p);
	v0_eat(p, '_');
	if (v0_bad(p) || len > p->n - p->pos) {
		v0_fail(p);
		id.len = 0;
		return id;
	}
	id.s = p->s + p->pos;
	id.len = (size_t)len;
	p->pos += (size_t)len;
	return id;
}

/* RFC 3492 decoding of a Punycode identifier ("u" tag): the basic code
 * points before the last '_', then the encoded insertions. */
static bool punycode_put(struct v0 *p, const struct ident *id)
{
	uint32_t cps[128];
	size_t ncp = 0, i = 0, k;
	const char *delim = NULL;
	uint32_t n = 128, bias = 72;
	uint64_t idx = 0;

	for (k = 0; k < id->len; k++)
		if (id->s[k] == '_')
			delim = id->s + k;
	if (delim) {
		for (const char *c = id->s; c < delim; c++) {
			if (ncp == 128)
				return false;
			cps[ncp++] = (unsigned char)*c;
		}
		i = (size_t)(delim - id->s) + 1;
	}
	while (i < id->len) {
		uint64_t old = idx, w = 1;

		for (uint32_t t_k = 36;; t_k += 36) {
			char c;
			uint32_t d, t;

			if (i >= id->len)
				return false;
			c = id->s[i++];
			if (c >= 'a' && c <= 'z')
				d = (uint32_t)(c - 'a');
			else if (c >= '0' && c <= '9')
				d = (uint32_t)(c - '0') + 26;
			else
				return false;
			if (d > (UINT32_MAX - idx) / w)
				return false;
			idx += d * w;
			t = t_k <= bias ? 1 : (t_k >= bias + 26 ? 26 : t_k - bias);
			if (d < t)
				break;
			w *= 36 - t;
			if (w > UINT32_MAX)
				return false;
		}
		/* adapt the bias */
		uint64_t delta = (idx - old) / (old == 0 ? 700 : 2);

		delta += delta / (ncp + 1);
		bias = 0;
		while (delta > 455) {
			delta /= 35;
			bias += 36;
		}
		bias += (uint32_t)(36 * delta / (delta + 38));
		if (ncp == 128 || idx / (ncp + 1) > 0x10ffff - n)
			return false;
		n += (uint32_t)(idx / (ncp + 1));
		idx %= ncp + 1;
		memmove(cps + idx + 1, cps + idx, (ncp - idx) * sizeof(cps[0]));
		cps[idx++] = n;
		ncp++;
	}
	for (k = 0; k < ncp; k++) {
		if (!p->quiet && !sprobe__dm_put_utf8(p->o, cps[k]))
			return false;
	}
	return true;
}

static void v0_put_ident(struct v0 *p, const struct ident *id)
{
	if (!id->punycode) {
		v0_put_n(p, id->s, id->len);
		return;
	}
	if (p->quiet)
		return;
	size_t before = p->o->len;

	if (!punycode_put(p, id)) {
		/* Undecodable: shown raw, marked, as rustc-demangle does. */
		p->o->len = before;
		if (p->o->p)
			p->o->p[before] = '\0';
		v0_put(p, "punycode{");
		v0_put_n(p, id->s, id->len);
		v0_put(p, "}");
	}
}

static void v0_path(struct v0 *p, bool in_value);
static void v0_type(struct v0 *p);
static void v0_const(struct v0 *p);
static bool v0_path_open_generics(struct v0 *p);

/* <backref> = "B" <base-62-number>, after the 'B': run fn at the earlier
 * offset (which must precede this back-reference), then come back. */
static void v0_backref(struct v0 *p, void (*fn)(struct v0 *, bool), bool arg)
{
	size_t at = p->pos - 1;
	uint64_t target = v0_base62(p);
	size_t save;

	if (v0_bad(p) || target >= at) {
		v0_fail(p);
		return;
	}
	save = p->pos;
	p->pos = (size_t)target;
	fn(p, arg);
	p->pos = save;
}

static void v0_lifetime(struct v0 *p, uint64_t lt)
{
	char b[32];

	if (lt == 0) {
		v0_put(p, "'_");
		return;
	}
	if (lt > p->bound_lifetimes) {
		v0_fail(p);
		return;
	}
	uint64_t depth = p->bound_lifetimes - lt;

	if (depth < 26)
		snprintf(b, sizeof(b), "'%c", (char)('a' + depth));
	else
		snprintf(b, sizeof(b), "'_%llu", (unsigned long long)depth);
	v0_put(p, b);
}

/* [<binder>] = "G" <base-62-number>: for<'a, ...> before what follows. */
static uint64_t v0_binder(struct v0 *p)
{
	uint64_t k = v0_opt62(p, 'G');

	if (k > 1024) {
		v0_fail(p);
		return 0;
	}
	if (k) {
		v0_put(p, "for<");
		for (uint64_t i = 0; i < k; i++) {
			if (i)
				v0_put(p, ", ");
			p->bound_lifetimes++;
			v0_lifetime(p, 1);
		}
		v0_put(p, "> ");
	}
	return k;
}

static void v0_generic_arg(struct v0 *p)
{
	if (v0_eat(p, 'L'))
		v0_lifetime(p, v0_base62(p));
	else if (v0_eat(p, 'K'))
		v0_const(p);
	else
		v0_type(p);
}

static void v0_generic_args(struct v0 *p)
{
	for (int i = 0; !v0_bad(p) && !v0_eat(p, 'E'); i++) {
		if (i)
			v0_put(p, ", ");
		v0_generic_arg(p);
	}
}

static void v0_path_backref(struct v0 *p, bool in_value)
{
	v0_path(p, in_value);
}

static void v0_path(struct v0 *p, bool in_value)
{
	char tag, ns;
	uint64_t dis;
	struct ident id;
	bool was_quiet;

	if (!v0_enter(p))
		return;
	tag = v0_next(p);
	switch (tag) {
	case 'C': /* crate root; its disambiguator is not shown */
		v0_opt62(p, 's');
		id = v0_ident(p);
		if (!v0_bad(p))
			v0_put_ident(p, &id);
		break;
	case 'N': /* nested: <namespace> <path> <identifier> */
		ns = v0_next(p);
		if (!((ns >= 'a' && ns <= 'z') || (ns >= 'A' && ns <= 'Z'))) {
			v0_fail(p);
			break;
		}
		v0_path(p, in_value);
		dis = v0_opt62(p, 's');
		id = v0_ident(p);
		if (v0_bad(p))
			break;
		if (ns >= 'A' && ns <= 'Z') {
			char b[32];

			v0_put(p, "::{");
			v0_put(p, ns == 'C' ? "closure" : ns == 'S' ? "shim" : (char[]){ ns, 0 });
			if (id.len) {
				v0_put(p, ":");
				v0_put_ident(p, &id);
			}
			snprintf(b, sizeof(b), "#%llu}", (unsigned long long)dis);
			v0_put(p, b);
		} else if (id.len) {
			v0_put(p, "::");
			v0_put_ident(p, &id);
		}
		break;
	case 'M': /* <T>: inherent impl; the impl path itself is not shown */
	case 'X': /* <T as Trait> */
		was_quiet = p->quiet;
		p->quiet = true;
		v0_opt62(p, 's');
		v0_path(p, false);
		p->quiet = was_quiet;
		/* fallthrough */
	case 'Y': /* <T as Trait>, trait definition */
		v0_put(p, "<");
		v0_type(p);
		if (tag != 'M') {
			v0_put(p, " as ");
			v0_path(p, false);
		}
		v0_put(p, ">");
		break;
	case 'I': /* generic arguments */
		v0_path(p, in_value);
		if (in_value)
			v0_put(p, "::");
		v0_put(p, "<");
		v0_generic_args(p);
		v0_put(p, ">");
		break;
	case 'B':
		v0_backref(p, v0_path_backref, in_value);
		break;
	default:
		v0_fail(p);
	}
	p->depth--;
}

static const char *basic_type(char c)
{
	switch (c) {
	case 'a': return "i8";
	case 'b': return "bool";
	case 'c': return "char";
	case 'd': return "f64";
	case 'e': return "str";
	case 'f': return "f32";
	case 'h': return "u8";
	case 'i': return "isize";
	case 'j': return "usize";
	case 'l': return "i32";
	case 'm': return "u32";
	case 'n': return "i128";
	case 'o': return "u128";
	case 's': return "i16";
	case 't': return "u16";
	case 'u': return "()";
	case 'v': return "...";
	case 'x': return "i64";
	case 'y': return "u64";
	case 'z': return "!";
	case 'p': return "_";
	default: return NULL;
	}
}

static void v0_type_backref(struct v0 *p, bool unused)
{
	(void)unused;
	v0_type(p);
}

static void v0_fn_sig(struct v0 *p)
{
	uint64_t k = v0_binder(p);

	if (v0_eat(p, 'U'))
		v0_put(p, "unsafe ");
	if (v0_eat(p, 'K')) {
		v0_put(p, "extern \"");
		if (v0_eat(p, 'C')) {
			v0_put(p, "C");
		} else {
			struct ident abi = v0_ident(p);

			if (v0_bad(p) || abi.punycode) {
				v0_fail(p);
				return;
			}
			/* '-' is spelled '_' in the mangling ("system-unwind") */
			for (size_t i = 0; i < abi.len; i++)
				v0_put_n(p, abi.s[i] == '_' ? "-" : abi.s + i, 1);
		}
		v0_put(p, "\" ");
	}
	v0_put(p, "fn(");
	for (int i = 0; !v0_bad(p) && !v0_eat(p, 'E'); i++) {
		if (i)
			v0_put(p, ", ");
		v0_type(p);
	}
	v0_put(p, ")");
	if (!v0_eat(p, 'u')) {
		v0_put(p, " -> ");
		v0_type(p);
	}
	p->bound_lifetimes -= k;
}

static void v0_dyn_trait(struct v0 *p)
{
	bool open = v0_path_open_generics(p);

	while (!v0_bad(p) && v0_eat(p, 'p')) {
		struct ident name;

		v0_put(p, open ? ", " : "<");
		open = true;
		name = v0_ident(p);
		if (v0_bad(p))
			return;
		v0_put_ident(p, &name);
		v0_put(p, " = ");
		v0_type(p);
	}
	if (open)
		v0_put(p, ">");
}

static void v0_type(struct v0 *p)
{
	char tag;
	const char *basic;

	if (!v0_enter(p))
		return;
	tag = v0_next(p);
	if ((basic = basic_type(tag))) {
		v0_put(p, basic);
		p->depth--;
		return;
	}
	switch (tag) {
	case 'R':
	case 'Q':
		v0_put(p, "&");
		if (v0_eat(p, 'L')) {
			uint64_t lt = v0_base62(p);

			if (lt) {
				v0_lifetime(p, lt);
				v0_put(p, " ");
			}
		}
		if (tag == 'Q')
			v0_put(p, "mut ");
		v0_type(p);
		break;
	case 'P':
		v0_put(p, "*const ");
		v0_type(p);
		break;
	case 'O':
		v0_put(p, "*mut ");
		v0_type(p);
		break;
	case 'A':
	case 'S':
		v0_put(p, "[");
		v0_type(p);
		if (tag == 'A') {
			v0_put(p, "; ");
			v0_const(p);
		}
		v0_put(p, "]");
		break;
	case 'T': {
		int i;

		v0_put(p, "(");
		for (i = 0; !v0_bad(p) && !v0_eat(p, 'E'); i++) {
			if (i)
				v0_put(p, ", ");
			v0_type(p);
		}
		if (i == 1)
			v0_put(p, ",");
		v0_put(p, ")");
		break;
	}
	case 'F':
		v0_fn_sig(p);
		break;
	case 'D': {
		uint64_t k;

		v0_put(p, "dyn ");
		k = v0_binder(p);
		for (int i = 0; !v0_bad(p) && !v0_eat(p, 'E'); i++) {
			if (i)
				v0_put(p, " + ");
			v0_dyn_trait(p);
		}
		p->bound_lifetimes -= k;
		if (!v0_eat(p, 'L')) {
			v0_fail(p);
			break;
		}
		uint64_t lt = v0_base62(p);

		if (lt) {
			v0_put(p, " + ");
			v0_lifetime(p, lt);
		}
		break;
	}
	case 'B':
		v0_backref(p, v0_type_backref, false);
		break;
	default:
		p->pos--;
		v0_path(p, false);
	}
	p->depth--;
}

/* A path whose generic arguments stay open ("Trait<A"), so that a dyn
 * trait's associated-type bindings join them. Returns true when open. */
static bool v0_path_open_generics(struct v0 *p)
{
	if (!v0_enter(p))
		return false;
	bool open = false;

	if (v0_eat(p, 'B')) {
		size_t at = p->pos - 1;
		uint64_t target = v0_base62(p);
		size_t save = p->pos;

		if (v0_bad(p) || target >= at) {
			v0_fail(p);
		} else {
			p->pos = (size_t)target;
			open = v0_path_open_generics(p);
			p->pos = save;
		}
	} else if (v0_eat(p, 'I')) {
		v0_path(p, false);
		v0_put(p, "<");
		v0_generic_args(p);
		open = true;
	} else {
		v0_path(p, false);
	}
	p->depth--;
	return open;
}

static void v0_const_backref(struct v0 *p, bool unused)
{
	(void)unused;
	v0_const(p);
}

/* Integer-like const data: ["n"] {hex} "_", printed in decimal when it
 * fits 64 bits, else in hex. */
static void v0_const_int(struct v0 *p, bool is_signed, char ty)
{
	char b[48];
	uint64_t v = 0;
	size_t digits = 0, start;
	bool neg = is_signed && v0_eat(p, 'n');

	start = p->pos;
	while (p->pos < p->n && p->s[p->pos] != '_') {
		if (!sprobe__dm_is_hex(p->s[p->pos])) {
			v0_fail(p);
			return;
		}
		p->pos++;
		digits++;
	}
	if (!v0_eat(p, '_')) {
		v0_fail(p);
		return;
	}
	for (size_t i = 0; i < digits && digits <= 16; i++)
		v = v * 16 + (uint64_t)sprobe__dm_hexval(p->s[start + i]);
	if (ty == 'b') {
		if (digits != 1 || v > 1) {
			v0_fail(p);
			return;
		}
		v0_put(p, v ? "true" : "false");
		return;
	}
	if (ty == 'c') {
		if (digits > 8 || v >= 0x110000) {
			v0_fail(p);
			return;
		}
		if (v >= 0x20 && v < 0x7f && v != '\'' && v != '\\')
			snprintf(b, sizeof(b), "'%c'", (char)v);
		else
			snprintf(b, sizeof(b), "'\\u{%llx}'", (unsigned long long)v);
		v0_put(p, b);
		return;
	}
	if (digits <= 16) {
		snprintf(b, sizeof(b), "%s%llu", neg ? "-" : "", (unsigned long long)v);
		v0_put(p, b);
	} else {
		v0_put(p, neg ? "-0x" : "0x");
		v0_put_n(p, p->s + start, digits);
	}
}

static void v0_const(struct v0 *p)
{
	char tag;

	if (!v0_enter(p))
		return;
	tag = v0_next(p);
	switch (tag) {
	case 'p':
		v0_put(p, "_");
		break;
	case 'B':
		v0_backref(p, v0_const_backref, false);
		break;
	case 'h': case 't': case 'm': case 'y': case 'o': case 'j':
		v0_const_int(p, false, tag);
		break;
	case 'a': case 's': case 'l': case 'x': case 'n': case 'i':
		v0_const_int(p, true, tag);
		break;
	case 'b':
	case 'c':
		v0_const_int(p, false, tag);
		break;
	default:
		/* Structured constants (str, refs, arrays, ADTs: the unstable
		 * adt_const_params) are not decoded: the symbol stays mangled. */
		v0_fail(p);
	}
	p->depth--;
}

char *sprobe__rust_v0_demangle(const char *s, size_t n)
{
	struct sprobe_dm_out o = { 0 };
	struct v0 p = { .s = s + 2, .n = n - 2, .o = &o };

	/* "_R" then an uppercase path tag; a decimal would be a future
	 * encoding version, which this does not know. */
	if (n < 3 || !(s[2] >= 'A' && s[2] <= 'Z')) {
		errno = EINVAL;
		return NULL;
	}
	v0_path(&p, true);
	/* <instantiating-crate>: parsed, not shown (as rustc-demangle's {:#}) */
	if (!v0_bad(&p) && p.pos < p.n && p.s[p.pos] >= 'A' && p.s[p.pos] <= 'Z') {
		p.quiet = true;
		v0_path(&p, false);
		p.quiet = false;
	}
	if (!v0_bad(&p) && p.pos < p.n) {
		/* <vendor-specific-suffix>: ".cold" and the like, kept */
		if (p.s[p.pos] != '.')
			v0_fail(&p);
		else
			sprobe__dm_put_n(&o, p.s + p.pos, p.n - p.pos);
	}
	return sprobe__dm_finish(&o);
}
