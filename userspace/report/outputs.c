/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Containers and escaping shared by the pprof, speedscope and SVG writers.
 * See outputs.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/report/outputs.h"

/* ---- arrays ------------------------------------------------------------- */

int ro_grow(void **v, size_t *cap, size_t need, size_t elem)
{
	size_t nc = *cap ? *cap : 16;
	void *nv;

	if (need <= *cap)
		return 0;
	while (nc < need) {
		if (nc > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		nc *= 2;
	}
	nv = realloc(*v, nc * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = nc;
	return 0;
}

/* ---- buffer ------------------------------------------------------------- */

void ro_buf__put(struct ro_buf *b, const void *data, size_t len)
{
	if (b->oom || !len)
		return;
	if (b->n + len > b->cap) {
		size_t nc = b->cap ? b->cap : 256;
		uint8_t *np;

		while (nc < b->n + len) {
			if (nc > SIZE_MAX / 2) {
				b->oom = true;
				return;
			}
			nc *= 2;
		}
		np = realloc(b->p, nc);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->n, data, len);
	b->n += len;
}

void ro_buf__byte(struct ro_buf *b, uint8_t c)
{
	ro_buf__put(b, &c, 1);
}

void ro_buf__free(struct ro_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- map ---------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t ro_hash(const void *p, size_t n, uint64_t seed)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ULL ^ seed ^ n, w;

	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&w, b, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, b, n);
	h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
	return mix64(h);
}

bool ro_map__get(const struct ro_map *m, uint64_t key, uint32_t *val)
{
	if (!m->cap)
		return false;
	for (size_t i = mix64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->vals[i])
			return false;
		if (m->keys[i] == key) {
			*val = m->vals[i] - 1;
			return true;
		}
	}
}

static int map_rehash(struct ro_map *m, size_t ncap)
{
	struct ro_map nm = { .cap = ncap };

	nm.keys = calloc(ncap, sizeof(*nm.keys));
	nm.vals = calloc(ncap, sizeof(*nm.vals));
	if (!nm.keys || !nm.vals) {
		free(nm.keys);
		free(nm.vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->vals[i])
			ro_map__put(&nm, m->keys[i], m->vals[i] - 1);
	free(m->keys);
	free(m->vals);
	*m = nm;
	return 0;
}

int ro_map__put(struct ro_map *m, uint64_t key, uint32_t val)
{
	/* Load factor <= 1/2 keeps probe runs short; the rehash above never
	 * recurses into another rehash because ncap doubles first. */
	if ((m->n + 1) * 2 > m->cap) {
		int err = map_rehash(m, m->cap ? m->cap * 2 : 64);

		if (err)
			return err;
	}
	for (size_t i = mix64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->vals[i]) {
			m->keys[i] = key;
			m->vals[i] = val + 1;
			m->n++;
			return 0;
		}
		if (m->keys[i] == key) {
			m->vals[i] = val + 1;
			return 0;
		}
	}
}

void ro_map__free(struct ro_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- string table ------------------------------------------------------- */

long ro_strtab__intern(struct ro_strtab *t, const void *key, size_t len)
{
	uint64_t h = ro_hash(key, len, 0);
	uint32_t first = UINT32_MAX;

	if (ro_map__get(&t->idx, h, &first))
		for (uint32_t id = first; id != UINT32_MAX; id = t->next[id])
			if (t->len[id] == len && !memcmp(t->arena.p + t->off[id], key, len))
				return id;
	if (t->n >= UINT32_MAX - 1)
		return -ENOMEM;
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		size_t *no = realloc(t->off, nc * sizeof(*no));

		if (!no)
			return -ENOMEM;
		t->off = no;
		size_t *nl = realloc(t->len, nc * sizeof(*nl));

		if (!nl)
			return -ENOMEM;
		t->len = nl;
		uint32_t *nn = realloc(t->next, nc * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		t->next = nn;
		t->cap = nc;
	}
	t->off[t->n] = t->arena.n;
	t->len[t->n] = len;
	t->next[t->n] = first;
	ro_buf__put(&t->arena, key, len);
	ro_buf__byte(&t->arena, 0);
	if (t->arena.oom || ro_map__put(&t->idx, h, (uint32_t)t->n))
		return -ENOMEM;
	return (long)t->n++;
}

const char *ro_strtab__get(const struct ro_strtab *t, uint32_t id)
{
	return (const char *)t->arena.p + t->off[id];
}

size_t ro_strtab__len(const struct ro_strtab *t, uint32_t id)
{
	return t->len[id];
}

void ro_strtab__free(struct ro_strtab *t)
{
	ro_map__free(&t->idx);
	ro_buf__free(&t->arena);
	free(t->off);
	free(t->len);
	free(t->next);
	memset(t, 0, sizeof(*t));
}

/* ---- escaping ----------------------------------------------------------- */

int ro_utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	int n;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)	/* also stops at the NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void ro_json_str(FILE *o, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");

	fputc('"', o);
	while (*s) {
		unsigned char c = *s;
		int n;

		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", o);
		else if (c == '\t')
			fputs("\\t", o);
		else if (c < 0x20 || c == 0x7f)
			fprintf(o, "\\u%04x", c);
		else if (c < 0x80)
			fputc(c, o);
		else if ((n = ro_utf8_len(s)) > 0) {
			fwrite(s, 1, (size_t)n, o);
			s += n;
			continue;
		} else
			fputs("\\ufffd", o);
		s++;
	}
	fputc('"', o);
}

void ro_xml_str(FILE *o, const char *str, size_t max_chars)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	size_t chars = 0;

	while (*s) {
		unsigned char c = *s;
		int n = 1;

		if (max_chars && chars == max_chars) {
			fputs("..", o);
			return;
		}
		chars++;
		if (c == '<')
			fputs("&lt;", o);
		else if (c == '>')
			fputs("&gt;", o);
		else if (c == '&')
			fputs("&amp;", o);
		else if (c == '"')
			fputs("&quot;", o);
		else if (c == '\'')
			fputs("&apos;", o);
		else if ((c < 0x20 && c != '\t') || c == 0x7f)
			fputs("\xef\xbf\xbd", o);	/* U+FFFD */
		else if (c < 0x80)
			fputc(c, o);
		else if ((n = ro_utf8_len(s)) > 0 &&
			 !(n == 3 && s[0] == 0xef && s[1] == 0xbf && s[2] >= 0xbe))
			fwrite(s, 1, (size_t)n, o);	/* U+FFFE/U+FFFF: not XML */
		else {
			fputs("\xef\xbf\xbd", o);
			n = 1;
		}
		s += n;
	}
}
