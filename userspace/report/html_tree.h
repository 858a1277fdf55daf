/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HTML report's flame graph tree (html_tree.c), which html.c writes
 * into the page's JSON object ("names", "tree"). Not thread-safe: one
 * writer call owns it.
 */
#ifndef SPROBE_REPORT_HTML_TREE_H
#define SPROBE_REPORT_HTML_TREE_H

#include <stdio.h>

#include "userspace/report/report_internal.h"

/* Frames under 1/PRUNE_DIV of both the samples and the pause time of the
 * whole tree are left out (the page states it). */
#define PRUNE_DIV 100000u

enum { K_ROOT, K_PROC, K_THREAD, K_FRAME };

struct html_node {
	uint32_t name;		/* id in names */
	uint32_t first, next;	/* first child, next sibling (UINT32_MAX: none) */
	uint8_t kind;
	uint64_t value, pause;
};

struct html_tree {
	VEC(struct html_node) nodes;
	struct ro_map child;	/* parent << 32 | name -> node */
	struct ro_strtab names;	/* node labels, by id */
	struct ro_map name_of_fid;
	struct ro_map name_of_thread;
	struct ro_map name_of_proc;
	uint64_t pruned;	/* nodes left out by the last write */
};

/* Fold r's selected samples (inlined frames expanded) into t, zeroed by
 * the caller. 0 or -ENOMEM; free t either way. */
int sprobe_rep__html_tree_build(struct sprobe_report *r, struct html_tree *t);
/* The nodes preorder as "name,kind,samples,pause ns,children" numbers,
 * comma-separated, pruned (PRUNE_DIV); counts the left-out ones in
 * t->pruned. */
void sprobe_rep__html_tree_write(FILE *o, struct html_tree *t);
void sprobe_rep__html_tree_free(struct html_tree *t);

#endif
