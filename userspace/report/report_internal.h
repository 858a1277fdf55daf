/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the report stage (userspace/report/): the report model that
 * load.c fills and aggregate.c aggregates, and what the writers that read
 * it directly (text.c, folded.c, json.c, trace_format.c, html.c) share
 * with it. Calls go one way: the writers ask the model's files (model.c,
 * aggregate.c, inline.c), which ask the leaves (bytemap.c, filter.c).
 * formats.c is the one file that knows every format. The pprof, speedscope
 * and SVG writers read the report only through the public accessors
 * (outputs.h).
 *
 * Nothing here is thread-safe: a report belongs to one thread at a time.
 */
#ifndef SPROBE_REPORT_INTERNAL_H
#define SPROBE_REPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>
#include <stackprobe/report.h>

#include "userspace/report/outputs.h"

/* ---- small containers -------------------------------------------------- */

#define VEC(T) struct { T *v; size_t n, cap; }

#define VEC_PUSH(vec, val)                                                        \
	(ro_grow((void **)&(vec).v, &(vec).cap, (vec).n + 1, sizeof(*(vec).v))        \
		 ? -ENOMEM                                                        \
		 : ((vec).v[(vec).n++] = (val), 0))

typedef VEC(uint64_t) u64vec;
typedef VEC(uint32_t) u32vec;

struct bkey {
	size_t off, len;
	uint32_t next;		/* next id with the same hash, or UINT32_MAX */
};

/* Map from byte strings (kept in an arena) to u32 ids. */
struct bytemap {
	struct ro_map idx;		/* hash -> first id with that hash */
	VEC(char) arena;
	VEC(struct bkey) keys;		/* by id */
};

/* ---- the model ---------------------------------------------------------- */

#define NMETHODS 6

/* Several processes in one report (data file version 3): each part's pcs
 * become keys with the process index in bits 48..63 (user-space addresses
 * are below 2^48 on x86_64 and aarch64; bit 63 stays free for the
 * synthetic pcs of inlined frames, inline.c), so that equal addresses in two
 * processes never share a symbol or a function; the first process's keys
 * are its addresses. Module indexes and tids are per process too. */
#define PROC_SHIFT 48
#define PC_MASK ((1ull << PROC_SHIFT) - 1)
#define MAX_PROCS 32767u /* bit 63 is inline.c's synthetic pcs' */
static inline uint64_t pc_key(uint32_t proc, uint64_t pc)
{
	return proc ? (pc & PC_MASK) | (uint64_t)proc << PROC_SHIFT : pc;
}
static inline uint32_t key_proc(uint64_t key)
{
	return (uint32_t)(key >> PROC_SHIFT) & MAX_PROCS;
}
static inline uint64_t key_pc(uint64_t key)
{
	return (key >> PROC_SHIFT) & MAX_PROCS ? key & PC_MASK : key;
}

/* One process image of the recording (a part, or an unsampled one). */
struct process {
	uint32_t pid, ppid, exec_index, flags;
	char *name, *exe, *note;	/* owned; "" when unknown */
	char *cmdline;			/* owned, NUL-joined arguments */
	uint32_t cmdline_len;
	bool has_header, has_trailer, has_exit;
	uint32_t mode, freq_hz;
	uint64_t start_realtime_ns, start_mono_ns, end_mono_ns;
	uint32_t exit_how;		/* enum sprobe_df_exit_how */
	int32_t exit_code;
	uint32_t part_status;		/* enum sprobe_df_status */
	char *exit_note;		/* owned */
	uint64_t samples;		/* weighted */
	uint64_t captures;
};

struct thread {
	uint32_t tid;
	uint32_t proc;		/* index into procs */
	char *name;
	uint64_t samples;
	uint64_t truncated;
	uint64_t stack_max;
	uint64_t methods[NMETHODS];
	uint64_t dropped[SPROBE_DROP__COUNT];	/* captures that missed it */
	u64vec win;		/* entry -> exit, ns */
	u64vec lat;		/* signal -> exit, ns */
	u64vec kpause;		/* kernel deliver -> sigreturn, ns */
	u64vec kdelay;		/* kernel generate -> deliver, ns */
	uint64_t koffcpu;
	/* cpu mode: the thread's CPU time from its last THREAD_CPU record
	 * (cpu_seen: there was one), and the SPROBE_CPU_USAGE_* flags of
	 * all of them (coverage.c). */
	uint64_t cpu_ns;
	uint32_t cpu_flags;
	bool cpu_seen;
};

struct module {
	uint32_t index;
	uint32_t proc;		/* index into procs */
	bool agent;		/* libstackprobe.so: its frames are elided */
	char *path;
	char *build_id;		/* hex */
	uint64_t load_bias;
	struct sprobe_df_range *ranges;
	uint32_t nranges;
	/* Frames of the selected samples in it, and how many of them had a
	 * name (built by aggregate()): a module with frames and no name for
	 * any has no symbols, which the text report says. */
	uint64_t frames, named;
};

struct symbol {
	uint64_t key;		/* the pc's key (pc_key()) */
	uint32_t name;		/* id in names */
	uint32_t module;	/* position in modules, or SPROBE_DF_NO_MODULE */
	uint64_t offset;
};

/* Source view of a pc (srcline records, inline.c): entries [first, first
 * + n) of srcents, innermost first, the last the pc's own function. */
struct srcline {
	uint32_t first, n;
};

struct srcent {
	uint32_t name;		/* id in names: "f (inlined)"; the last entry: unused */
	uint32_t plain;		/* id in srcstr: "f"; the last entry: unused */
	uint32_t file;		/* id in srcstr; "" when unknown */
	uint32_t line;		/* 0 when unknown */
};

/* Frames of one expanded stack at most (a pc's inlined frames count). */
#define SPROBE_REP_MAX_FRAMES SPROBE_REPORT_MAX_FRAMES

struct sample {
	uint64_t time_ns;
	uint64_t pc_off;	/* into pcs */
	uint64_t window_ns;	/* entry -> exit, 0 if not recorded */
	uint32_t thread;	/* index into threads */
	uint32_t weight;	/* samples it stands for (cpu mode: timer periods), >= 1 */
	uint16_t nframes;
	uint8_t method;
	uint8_t truncated;
};

struct func {
	uint32_t name;		/* id in names */
	uint32_t module;	/* position in modules, or NO_MODULE */
	bool unnamed;		/* module+0xoff or 0xpc: no symbol had a name */
	uint64_t self, total;
	uint64_t mark;		/* last sample counted in total, + 1 */
};

struct stack {
	uint32_t thread;
	uint32_t key;		/* id in stacks map: u32 thread + fids root first */
	uint64_t count;
};

struct sprobe_report {
	uint32_t filter_tid;
	uint32_t filter_pid;
	uint32_t top;
	char *source;
	char *labels;		/* opts.labels (pprof), or NULL */

	int status;
	char *message;
	uint64_t records;

	bool has_header, has_trailer;
	struct sprobe_df_header header;	/* cmdline owned */
	struct sprobe_df_trailer trailer;
	uint64_t lost[SPROBE_DF__TYPE_COUNT];	/* max of LOST and trailer */

	VEC(struct process) procs;	/* in file order (record: by start time) */
	bool debuginfod_done;		/* sprobe_report__debuginfod() ran */
	uint32_t cur_proc;		/* the part being loaded */
	uint64_t procs_skipped;		/* parts past MAX_PROCS, not loaded */
	bool skipping;
	VEC(struct thread) threads;
	struct ro_map tid_idx;		/* proc << 32 | tid -> position */
	struct ro_map tid_any;		/* tid -> position (its last process) */
	VEC(struct module) modules;
	struct ro_map mod_idx;		/* proc << 32 | module index -> position */
	struct bytemap names;		/* interned function / symbol names */
	struct ro_map sym_idx;		/* pc key -> position in syms */
	VEC(struct symbol) syms;
	/* inline.c: srcline records; an inlined frame is a synthetic pc
	 * (SRC_SYNTH_BIT | index << 6 | depth) with its own symbol. */
	struct ro_map src_idx;		/* pc -> index in srclines */
	VEC(struct srcline) srclines;
	VEC(struct srcent) srcents;
	struct bytemap srcstr;		/* file and plain function names */
	struct ro_map inl_names;	/* name ids of "f (inlined)" frames */
	uint64_t xbuf[SPROBE_REP_MAX_FRAMES]; /* sprobe_rep__expand()'s output */
	VEC(struct sample) samples;	/* all threads; filtered at output */
	u64vec pcs;

	/* capture records (global, not filtered by tid) */
	uint64_t captures, cap_total, cap_captured, cap_dropped;
	uint64_t cap_first_ns, cap_last_ns; /* capture times, CLOCK_MONOTONIC */
	uint64_t cap_dropped_reason[SPROBE_DROP__COUNT];
	uint64_t cap_pause_ns;
	u64vec capture_ns;
	uint64_t kwindows;
	/* Both sides of every capture window, for the kernel-vs-self check
	 * (userspace/pause/pause_merge.c) and the trace timeline. */
	VEC(struct sprobe_pause_kwindow) kwv;
	VEC(struct sprobe_pause_swindow) swv;
	/* Zero-pause samples (no window: the kernel must show no signal),
	 * and each capture's probe-side duration by its start time. */
	VEC(struct sprobe_pause_zp_sample) zpv;
	struct ro_map cap_end;

	uint64_t t_min, t_max;	/* monotonic ns seen in records */

	/* aggregation, built by aggregate() */
	bool aggregated;
	size_t elided_upto;	/* samples whose agent frames are gone */
	uint64_t agent_frames;	/* frames of the agent's wrappers elided */
	VEC(struct func) funcs;
	struct ro_map pc_func;
	struct bytemap stackmap;
	VEC(struct stack) stacks;
	uint64_t nsel;		/* samples passing the filter (weighted) */
	uint64_t nsel_stacks;	/* of them, captured stacks (sample records) */
	u64vec all_win;
};

/* Names of enum sprobe_method and enum sprobe_drop_reason, for the text
 * and JSON writers (model.c). */
extern const char *const sprobe_rep__method_names[NMETHODS];
extern const char *const sprobe_rep__drop_names[SPROBE_DROP__COUNT];

/* ---- the byte-string map (bytemap.c) ------------------------------------ */

/* Find KEY or add it with the next id. *added says which. Returns the id or
 * a negative errno. */
long sprobe_rep__bytemap_intern(struct bytemap *m, const void *key, size_t len, bool *added);
const char *sprobe_rep__bytemap_key(const struct bytemap *m, uint32_t id);
/* Free the map's storage (not m itself); m is then empty but not reset. */
void sprobe_rep__bytemap_free(struct bytemap *m);

/* ---- the filters (filter.c) --------------------------------------------- */

/* The filters (opts.tid, opts.pid): does thread tid take part? And the
 * thread at position ti (exact when tids repeat across processes). */
bool sprobe_rep__selected(const struct sprobe_report *r, uint32_t tid);
bool sprobe_rep__thread_selected(const struct sprobe_report *r, uint32_t ti);
/* The label of a thread in every stack format: its name, else "thread". */
static inline const char *sprobe_rep__thread_label(const struct thread *t)
{
	return t->name && *t->name ? t->name : "thread";
}

/* ---- aggregation (aggregate.c) ------------------------------------------ */

/* pcs -> functions, stacks, distributions; every writer runs it first
 * (sprobe_report__write()). Returns 0 or -ENOMEM. */
int sprobe_rep__aggregate(struct sprobe_report *r);
/* Drop the agent's frames (struct module.agent) from the samples loaded
 * since the last call, in place; the innermost frame stays. 0 or -ENOMEM. */
int sprobe_rep__elide_agent_frames(struct sprobe_report *r);
/* Position in modules of the module of a pc key (its process's), or -1. */
long sprobe_rep__module_of(const struct sprobe_report *r, uint64_t key);
/* The function id of pc (interned on first sight: its symbol, else
 * module+offset, else the bare address), or -ENOMEM. */
long sprobe_rep__func_of(struct sprobe_report *r, uint64_t pc);
const char *sprobe_rep__func_name(const struct sprobe_report *r, uint32_t fid);
/* Is name id the agent's name for a function known by its FDE only
 * ("<module base name>+0x<hex>", symbolize.h source "eh-frame")? */
bool sprobe_rep__cfi_name(const struct sprobe_report *r, uint32_t module, uint32_t id);
const char *sprobe_rep__module_name(const struct sprobe_report *r, uint32_t index);
/* Function ids with at least one sample, sorted by total or self samples;
 * the caller frees; *n gets the count. NULL on ENOMEM. */
uint32_t *sprobe_rep__sorted_funcs(const struct sprobe_report *r, bool by_total, size_t *n);

/* ---- queries over the model (model.c) ----------------------------------- */
/* More than one process in the report. */
static inline bool sprobe_rep__multi(const struct sprobe_report *r)
{
	return r->procs.n > 1;
}
/* "name" of the process at position p ("pid N" when it has none). */
const char *sprobe_rep__proc_name(const struct sprobe_report *r, uint32_t p, char *buf, size_t len);
/* How a process image ended ("exit 0", "killed by SIGINT", "exec'd"...),
 * into buf; and whether its part of the file is whole, in words (a static
 * string or p->note). */
void sprobe_rep__proc_end(const struct process *p, char *buf, size_t len);
const char *sprobe_rep__proc_data(const struct process *p);
/* The file name part of path (path itself when it ends in '/'). */
const char *sprobe_rep__base_name(const char *path);
/* Nearest-rank percentile p (0..100) of a sorted vector, and its sum. */
uint64_t sprobe_rep__pct(const u64vec *v, unsigned p);
uint64_t sprobe_rep__sum(const u64vec *v);
uint64_t sprobe_rep__wall_ns(const struct sprobe_report *r);
uint64_t sprobe_rep__lost_total(const struct sprobe_report *r);
const char *sprobe_rep__status_name(int st);
/* Kernel vs self-reported windows: the kernel's word on the selected
 * threads' zero-pause samples, and the merge of their kernel windows with
 * their self-reported ones (NULL with errno; ENOENT: no kernel windows). */
int sprobe_rep__zp_check(const struct sprobe_report *r, struct sprobe_pause_zp_check *out);
struct sprobe_pause_merge *sprobe_rep__pause_check(const struct sprobe_report *r);

/* ---- inlined frames and source lines (inline.c) ------------------------- */

/* Load a srcline record. Returns 0 or -ENOMEM. */
int sprobe_rep__load_srcline(struct sprobe_report *r, const struct sprobe_df_srcline *l);
/* The stack pcs[0..n) with each pc's inlined frames (synthetic pcs) before
 * it, innermost first: pcs itself when no pc has any, else r->xbuf, valid
 * until the next call. *out_n gets the count (<= SPROBE_REP_MAX_FRAMES;
 * past that, pcs are left unexpanded). */
const uint64_t *sprobe_rep__expand(struct sprobe_report *r, const uint64_t *pcs, size_t n,
				   size_t *out_n);
void sprobe_rep__inline_free(struct sprobe_report *r);
/* "Top source lines by self samples": the file:line of each selected
 * sample's innermost frame (inlined or not), summed; nothing when the
 * recording has no srcline records. 0 or -ENOMEM. */
int sprobe_rep__write_top_lines(struct sprobe_report *r, FILE *o);
/* Is name id (a function id) an inlined function's frame? */
bool sprobe_rep__is_inlined(const struct sprobe_report *r, uint32_t name);

/* ---- the writers that read the model (formats.c calls them) ------------- */

/* Text report, cpu mode: the engine line and the CPU coverage, naming every
 * thread whose CPU time went unsampled and why (coverage.c). */
void sprobe_rep__write_cpu_coverage(const struct sprobe_report *r, FILE *o);

int sprobe_rep__write_text(struct sprobe_report *r, FILE *o);
int sprobe_rep__write_folded(struct sprobe_report *r, FILE *o);
int sprobe_rep__write_json(struct sprobe_report *r, FILE *o);
int sprobe_rep__write_trace(struct sprobe_report *r, FILE *o);
int sprobe_rep__write_html(struct sprobe_report *r, FILE *o);

/* The HTML page's fixed parts (html_page.c): its style sheet, the markup
 * between the summary and the data, and its script. */
extern const char sprobe_rep__html_style[];
extern const char sprobe_rep__html_body[];
extern const char sprobe_rep__html_script[];

#endif
