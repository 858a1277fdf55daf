/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HTML report's flame graph (html_tree.h): the selected samples folded
 * into one tree, all -> [process] -> thread -> frames root first, as the
 * folded report; written preorder, small frames pruned.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/report/html_tree.h"

static long node_get(struct html_tree *t, uint32_t parent, uint32_t name, uint8_t kind)
{
	uint64_t key = (uint64_t)parent << 32 | name;
	uint32_t id;

	if (ro_map__get(&t->child, key, &id))
		return id;
	struct html_node nd = { .name = name, .first = UINT32_MAX, .next = UINT32_MAX, .kind = kind };

	if (VEC_PUSH(t->nodes, nd))
		return -ENOMEM;
	id = (uint32_t)(t->nodes.n - 1);
	if (parent != UINT32_MAX) {
		t->nodes.v[id].next = t->nodes.v[parent].first;
		t->nodes.v[parent].first = id;
	}
	if (ro_map__put(&t->child, key, id))
		return -ENOMEM;
	return id;
}

/* The name id of a label, through a cache keyed by what it names. */
static long cached_name(struct html_tree *t, struct ro_map *cache, uint64_t key, const char *label)
{
	uint32_t id;
	long n;

	if (ro_map__get(cache, key, &id))
		return id;
	n = ro_strtab__intern(&t->names, label, strlen(label));
	if (n < 0 || ro_map__put(cache, key, (uint32_t)n))
		return -ENOMEM;
	return n;
}

static long thread_name_id(struct sprobe_report *r, struct html_tree *t, uint32_t ti)
{
	const struct thread *th = &r->threads.v[ti];
	uint32_t id;

	if (ro_map__get(&t->name_of_thread, ti, &id))
		return id;
	size_t ln = strlen(sprobe_rep__thread_label(th));
	char *s = malloc(ln + 16);

	if (!s)
		return -ENOMEM;
	snprintf(s, ln + 16, "%s-%u", sprobe_rep__thread_label(th), th->tid);
	long n = cached_name(t, &t->name_of_thread, ti, s);

	free(s);
	return n;
}

static long proc_name_id(struct sprobe_report *r, struct html_tree *t, uint32_t p)
{
	char nb[32];
	const char *pn = sprobe_rep__proc_name(r, p, nb, sizeof(nb));
	size_t ln = strlen(pn);
	uint32_t id;

	if (ro_map__get(&t->name_of_proc, p, &id))
		return id;
	char *s = malloc(ln + 16);

	if (!s)
		return -ENOMEM;
	snprintf(s, ln + 16, "%s-%u", pn, r->procs.v[p].pid);
	long n = cached_name(t, &t->name_of_proc, p, s);

	free(s);
	return n;
}

/* all -> [process] -> thread -> frames root first, as the folded report
 * (the process level only with several processes). */
int sprobe_rep__html_tree_build(struct sprobe_report *r, struct html_tree *t)
{
	bool multi = sprobe_rep__multi(r);

	if (ro_strtab__intern(&t->names, "all", 3) != 0 || node_get(t, UINT32_MAX, 0, K_ROOT) != 0)
		return -ENOMEM;
	for (size_t si = 0; si < r->samples.n; si++) {
		const struct sample *s = &r->samples.v[si];
		const struct thread *th = &r->threads.v[s->thread];
		uint32_t parent = 0;
		long id, n;

		if (!sprobe_rep__thread_selected(r, s->thread))
			continue;
		t->nodes.v[0].value += s->weight;
		t->nodes.v[0].pause += s->window_ns;
		/* Inlined functions are frames of their own (inline.c), as in
		 * the folded report. */
		size_t nfr;
		const uint64_t *pcs = sprobe_rep__expand(r, s->nframes ? r->pcs.v + s->pc_off : NULL,
							 s->nframes, &nfr);

		for (int level = multi ? 0 : 1; level < 2 + (int)nfr; level++) {
			uint8_t kind;

			if (level == 0) {
				n = proc_name_id(r, t, th->proc);
				kind = K_PROC;
			} else if (level == 1) {
				n = thread_name_id(r, t, s->thread);
				kind = K_THREAD;
			} else {
				/* pcs are innermost first: root first here. */
				uint64_t pc = pcs[nfr - 1 - (size_t)(level - 2)];
				long fid = sprobe_rep__func_of(r, pc);

				if (fid < 0)
					return (int)fid;
				n = cached_name(t, &t->name_of_fid, (uint64_t)fid,
						sprobe_rep__func_name(r, (uint32_t)fid));
				kind = K_FRAME;
			}
			if (n < 0)
				return (int)n;
			id = node_get(t, parent, (uint32_t)n, kind);
			if (id < 0)
				return (int)id;
			t->nodes.v[id].value += s->weight;
			t->nodes.v[id].pause += s->window_ns;
			parent = (uint32_t)id;
		}
	}
	return 0;
}

static uint64_t subtree_size(const struct html_tree *t, uint32_t id)
{
	uint64_t n = 1;

	for (uint32_t c = t->nodes.v[id].first; c != UINT32_MAX; c = t->nodes.v[c].next)
		n += subtree_size(t, c);
	return n;
}

/* Preorder: name, kind, samples, pause ns, number of children written.
 * Recursion depth <= 3 + SPROBE_MAX_FRAMES. */
static void tree_write(FILE *o, struct html_tree *t, uint32_t id, bool *first)
{
	const struct html_node *nd = &t->nodes.v[id];
	const struct html_node *root = &t->nodes.v[0];
	uint32_t nk = 0;

	for (uint32_t c = nd->first; c != UINT32_MAX; c = t->nodes.v[c].next) {
		const struct html_node *k = &t->nodes.v[c];

		if (k->value * PRUNE_DIV >= root->value || k->pause * PRUNE_DIV >= root->pause)
			nk++;
	}
	fprintf(o, "%s%u,%u,%" PRIu64 ",%" PRIu64 ",%u", *first ? "" : ",", nd->name, nd->kind, nd->value,
		nd->pause, nk);
	*first = false;
	for (uint32_t c = nd->first; c != UINT32_MAX; c = t->nodes.v[c].next) {
		const struct html_node *k = &t->nodes.v[c];

		if (k->value * PRUNE_DIV >= root->value || k->pause * PRUNE_DIV >= root->pause)
			tree_write(o, t, c, first);
		else
			t->pruned += subtree_size(t, c);
	}
}

void sprobe_rep__html_tree_free(struct html_tree *t)
{
	free(t->nodes.v);
	ro_map__free(&t->child);
	ro_strtab__free(&t->names);
	ro_map__free(&t->name_of_fid);
	ro_map__free(&t->name_of_thread);
	ro_map__free(&t->name_of_proc);
}

void sprobe_rep__html_tree_write(FILE *o, struct html_tree *t)
{
	bool first = true;

	if (t->nodes.n)
		tree_write(o, t, 0, &first);
}
