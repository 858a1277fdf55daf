/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The kernel's frames of the external tier's samples, named from
 * /proc/kallsyms (contract in ext_state.h). The addresses there are
 * zeros unless kernel.kptr_restrict lets this user see them (root, or
 * CAP_SYSLOG with kptr_restrict 1); then the frames are one "[kernel]"
 * (perf_part.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/external/ext_state.h"

static int cmp_ksym(const void *a, const void *b)
{
	const struct sprobe_ext_ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Text symbols only (t, T, w, W): a frame is code. */
static void ksyms_load(struct sprobe_ext_ksyms *k)
{
	size_t cap = 0, ncap = 0, nlen = 0;
	char line[512];
	FILE *f = fopen("/proc/kallsyms", "re");

	k->loaded = true;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long addr;
		char type, name[256];

		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3 || !addr ||
		    !strchr("tTwW", type))
			continue;
		size_t len = strlen(name) + 1;
		if (k->n == cap) {
			cap = cap ? cap * 2 : 65536;
			struct sprobe_ext_ksym *v = realloc(k->v, cap * sizeof(*v));
			if (!v)
				break;
			k->v = v;
		}
		if (nlen + len > ncap) {
			ncap = ncap ? ncap * 2 : 1u << 20;
			char *nv = realloc(k->names, ncap);
			if (!nv)
				break;
			k->names = nv;
		}
		memcpy(k->names + nlen, name, len);
		k->v[k->n++] = (struct sprobe_ext_ksym){ (uint64_t)addr, (uint32_t)nlen };
		nlen += len;
	}
	if (f)
		fclose(f);
	if (k->n)
		qsort(k->v, k->n, sizeof(*k->v), cmp_ksym);
}

const char *sprobe_ext__ksym(struct sprobe_ext_ksyms *k, uint64_t pc)
{
	if (!k->loaded)
		ksyms_load(k);
	if (!k->n || pc < k->v[0].addr)
		return NULL;
	size_t lo = 0, hi = k->n;

	while (hi - lo > 1) { /* the last symbol at or below pc */
		size_t mid = lo + (hi - lo) / 2;

		if (k->v[mid].addr <= pc)
			lo = mid;
		else
			hi = mid;
	}
	return k->names + k->v[lo].name;
}

void sprobe_ext__ksyms_free(struct sprobe_ext_ksyms *k)
{
	free(k->v);
	free(k->names);
	memset(k, 0, sizeof(*k));
}
