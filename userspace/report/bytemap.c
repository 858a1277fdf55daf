/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report's byte-string maps (report_internal.h, "struct bytemap"):
 * names, source strings and stacks interned to dense u32 ids.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/report/report_internal.h"

/* Find KEY or add it with the next id. *added says which. Returns the id or
 * a negative errno. */
long sprobe_rep__bytemap_intern(struct bytemap *m, const void *key, size_t len, bool *added)
{
	uint64_t h = ro_hash(key, len, 0);
	uint32_t id, first = UINT32_MAX;

	*added = false;
	if (ro_map__get(&m->idx, h, &first)) {
		for (id = first; id != UINT32_MAX; id = m->keys.v[id].next)
			if (m->keys.v[id].len == len &&
			    memcmp(m->arena.v + m->keys.v[id].off, key, len) == 0)
				return id;
	}
	if (m->keys.n >= UINT32_MAX - 1)
		return -ENOMEM;
	if (ro_grow((void **)&m->arena.v, &m->arena.cap, m->arena.n + len + 1, 1))
		return -ENOMEM;
	struct bkey k = { .off = m->arena.n, .len = len, .next = first };

	if (len)
		memcpy(m->arena.v + m->arena.n, key, len);
	m->arena.v[m->arena.n + len] = '\0';
	m->arena.n += len + 1;
	id = (uint32_t)m->keys.n;
	if (VEC_PUSH(m->keys, k) || ro_map__put(&m->idx, h, id))
		return -ENOMEM;
	*added = true;
	return id;
}

const char *sprobe_rep__bytemap_key(const struct bytemap *m, uint32_t id)
{
	return m->arena.v + m->keys.v[id].off;
}

void sprobe_rep__bytemap_free(struct bytemap *m)
{
	ro_map__free(&m->idx);
	free(m->arena.v);
	free(m->keys.v);
}
