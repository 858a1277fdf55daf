/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The eBPF companion's loader: probe, open, load, attach bpf/pause.bpf.c for
 * one target process (and, with follow_children, its descendants) and one
 * signal; read its windows and the processes' exits from the ring buffer.
 *
 * Failure is an expected outcome (no privilege, no BTF, an old kernel): the
 * caller records without the companion. So every failure is explained once,
 * in perf's manner (what is missing, what to do next), and returned as an
 * errno the caller can continue past.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include <stackprobe/pause.h>

#include "bpf/pause.h"
#include "userspace/pause/libbpf_dl.h" /* libbpf's names read its table from here on */
#include "userspace/pause/pause_internal.h"

#ifndef SPROBE_NO_BPF
#include "pause.skel.h"
#endif

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

/* The shared header and the public one name the same bits. */
_Static_assert(SPROBE_PAUSE_KW_NO_GENERATE == SPROBE_PAUSE_F_NO_GENERATE, "flags");
_Static_assert(SPROBE_PAUSE_KW_GROUP == SPROBE_PAUSE_F_GROUP, "flags");
_Static_assert(SPROBE_PAUSE_KW_INCOMPLETE == SPROBE_PAUSE_F_INCOMPLETE, "flags");
_Static_assert(SPROBE_PAUSE_KW_NESTED == SPROBE_PAUSE_F_NESTED, "flags");
_Static_assert(SPROBE_PAUSE_KW_QUEUED == SPROBE_PAUSE_F_QUEUED, "flags");
_Static_assert(SPROBE_PAUSE_KW_SWITCH_IN_UNSEEN == SPROBE_PAUSE_F_SWITCH_IN_UNSEEN, "flags");
_Static_assert((int)SPROBE_PAUSE_MODE_TIMER == (int)SPROBE_PAUSE_BPF_MODE_TIMER, "mode");
_Static_assert(sizeof(struct sprobe_pause_event) == 72, "event layout is ABI with BPF");
/* Ring-buffer records are told apart by size (on_event). */
_Static_assert(sizeof(struct sprobe_pause_exit_event) == 48, "exit layout is ABI with BPF");
_Static_assert(sizeof(struct sprobe_pause_exit_event) != sizeof(struct sprobe_pause_event),
	       "records are told apart by size");
_Static_assert(sizeof(((struct sprobe_pause_exit *)0)->comm) ==
	       sizeof(((struct sprobe_pause_exit_event *)0)->comm), "comm");
#if defined(__x86_64__)
_Static_assert(__NR_rt_sigreturn == 15, "x86_64 rt_sigreturn");
#elif defined(__aarch64__)
_Static_assert(__NR_rt_sigreturn == 139, "aarch64 rt_sigreturn");
#endif

/* The tracepoints the programs attach to, as named in kernel BTF
 * (btf_trace_<name> typedefs exist for every raw tracepoint). */
static const char *const tracepoints[SPROBE_PAUSE_NPROGS] = {
	"signal_generate", "signal_deliver", "sys_enter", "sched_switch",
	"sched_process_exit", "sched_process_fork",
};

/* The embedded object's pages, PROT_NONE while parked (pause_internal.h). */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static bool parked;

#ifndef SPROBE_NO_BPF
static void object_pages(uintptr_t *lo, uintptr_t *hi)
{
	size_t sz;
	uintptr_t b = (uintptr_t)pause_bpf__elf_bytes(&sz);
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);

	*lo = (b + pg - 1) & ~(pg - 1);
	*hi = (b + sz) & ~(pg - 1);
}
#endif

int sprobe_pause__object_park(void)
{
	int err = 0;
#ifndef SPROBE_NO_BPF
	uintptr_t lo, hi;

	object_pages(&lo, &hi);
	pthread_mutex_lock(&park_lock);
	if (!parked && hi > lo) {
		if (mprotect((void *)lo, hi - lo, PROT_NONE) != 0) {
			err = -errno;
		} else {
			/* Clean pages of a private file mapping: dropping them
			 * loses nothing. */
			madvise((void *)lo, hi - lo, MADV_DONTNEED);
			parked = true;
		}
	}
	pthread_mutex_unlock(&park_lock);
#endif
	return err;
}

#ifndef SPROBE_NO_BPF
static int object_unpark(void)
{
	uintptr_t lo, hi;
	int err = 0;

	object_pages(&lo, &hi);
	pthread_mutex_lock(&park_lock);
	if (parked) {
		if (mprotect((void *)lo, hi - lo, PROT_READ) != 0)
			err = -errno;
		else
			parked = false;
	}
	pthread_mutex_unlock(&park_lock);
	return err;
}
#endif

/* Test seam (pause_internal.h). */
static bool test_ignore_group_dead;

void sprobe_pause__test_ignore_group_dead(bool on)
{
	test_ignore_group_dead = on;
}

struct sprobe_pause {
#ifndef SPROBE_NO_BPF
	struct pause_bpf *skel;
#endif
	struct ring_buffer *rb;
	struct sprobe_pause_kwindow *win;
	size_t nwin, capwin;
	struct sprobe_pause_exit *exits;
	size_t nexit, capexit;
	uint64_t received;
	int cb_err;		/* first error inside the ring-buffer callback */
};

/* ------------------------------------------------------------------ */
/* Explaining failures                                                 */

struct caps {
	bool known, bpf, perfmon, sys_admin;
};

static struct caps caps_now(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
	struct caps c = { 0 };

	if (syscall(SYS_capget, &hdr, data) != 0)
		return c;
	c.known = true;
#define HAS(cap) (!!(data[(cap) / 32].effective & (1u << ((cap) % 32))))
	c.bpf = HAS(CAP_BPF);
	c.perfmon = HAS(CAP_PERFMON);
	c.sys_admin = HAS(CAP_SYS_ADMIN);
#undef HAS
	return c;
}

static bool caps_enough(struct caps c)
{
	return !c.known || c.sys_admin || (c.bpf && c.perfmon);
}

static void sfmt(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void sfmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static const char *read_setting(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	if (!f)
		return NULL;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static void explain(int err, const char *stage, char *buf, size_t len)
{
	const char *what = stage ? stage : "setting up";
	char lock[128];

	if (err < 0)
		err = -err;
	if (err == EPERM || err == EACCES) {
		struct caps c = caps_now();

		if (!caps_enough(c)) {
			sfmt(buf, len,
			     "eBPF companion unavailable: %s needs CAP_BPF and CAP_PERFMON "
			     "(or CAP_SYS_ADMIN) and this process lacks%s%s%s. Run as root, "
			     "or grant them: sudo setcap cap_bpf,cap_perfmon+ep <program>. "
			     "Recording can continue without kernel timestamps.",
			     what, c.bpf ? "" : " CAP_BPF", c.perfmon ? "" : " CAP_PERFMON",
			     c.sys_admin ? "" : " CAP_SYS_ADMIN");
			return;
		}
		if (read_setting("/sys/kernel/security/lockdown", lock, sizeof(lock)) &&
		    !strstr(lock, "[none]")) {
			sfmt(buf, len,
			     "eBPF companion unavailable: %s was refused (%s) by kernel "
			     "lockdown (/sys/kernel/security/lockdown: %s); reading kernel "
			     "memory from BPF needs lockdown=none. Recording can continue "
			     "without kernel timestamps.", what, strerror(err), lock);
			return;
		}
		sfmt(buf, len,
		     "eBPF companion unavailable: %s was refused (%s) although the process "
		     "has CAP_BPF and CAP_PERFMON: check an LSM policy (SELinux, AppArmor), "
		     "a seccomp filter, or rerun with -v for libbpf's log. Recording can "
		     "continue without kernel timestamps.", what, strerror(err));
		return;
	}
	if (err == ENOTSUP || err == EOPNOTSUPP || err == ENOSYS) {
		sfmt(buf, len,
		     "eBPF companion unavailable: %s: this kernel lacks raw tracepoint "
		     "BPF programs or ring buffer maps (Linux >= 5.8 with CONFIG_BPF_SYSCALL "
		     "and CONFIG_DEBUG_INFO_BTF). Recording can continue without kernel "
		     "timestamps.", what);
		return;
	}
	if (err == ENOMEM || err == E2BIG) {
		sfmt(buf, len,
		     "eBPF companion unavailable: %s failed (%s): lower max_threads / "
		     "ringbuf_bytes, or raise RLIMIT_MEMLOCK (ulimit -l) on kernels "
		     "older than 5.11.", what, strerror(err));
		return;
	}
	sfmt(buf, len, "eBPF companion unavailable: %s failed: %s (rerun with -v for "
		       "libbpf's log).", what, strerror(err));
}

const char *sprobe_pause__strerror(int err, char *buf, size_t len)
{
	explain(err, NULL, buf, len);
	return buf;
}

/* ------------------------------------------------------------------ */
/* libbpf output: silent unless verbose                                */

static int print_verbose(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return vfprintf(stderr, fmt, ap);
}

static int print_silent(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

/* ------------------------------------------------------------------ */
/* Probe                                                               */

/* sprobe_pause__probe(), also saying whether sched_process_exit passes
 * group_dead (its btf_trace_ typedef has 3 parameters: ctx, p, group_dead). */
static int probe_impl(char *msg, size_t msg_len, bool *exit_group_dead)
{
#ifdef SPROBE_NO_BPF
	sfmt(msg, msg_len,
	     "eBPF companion unavailable: this stackprobe was built without it "
	     "(no vmlinux/<arch>/vmlinux.h at build time; see mk/bpf.mk).");
	return -ENOTSUP;
#else
	struct caps c = caps_now();
	const char *why;
	struct btf *btf;
	int err = 0, r;

	if (msg && msg_len)
		msg[0] = '\0';
	if (sprobe__libbpf_load(&why) != 0) {
		sfmt(msg, msg_len,
		     "eBPF companion unavailable: %s could not be loaded (%s; Debian: "
		     "apt-get install libbpf1). Recording can continue without kernel "
		     "timestamps.", SPROBE_LIBBPF_SONAME, why);
		return -ENOTSUP;
	}
	if (!caps_enough(c)) {
		explain(-EPERM, "loading tracing programs", msg, msg_len);
		return -EPERM;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		err = errno == ENOENT ? -ENOTSUP : -errno;
		if (err == -ENOTSUP)
			sfmt(msg, msg_len,
			     "eBPF companion unavailable: the kernel exposes no BTF "
			     "(/sys/kernel/btf/vmlinux is missing; needs "
			     "CONFIG_DEBUG_INFO_BTF=y). Recording can continue without "
			     "kernel timestamps.");
		else
			explain(err, "reading /sys/kernel/btf/vmlinux", msg, msg_len);
		return err;
	}
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		err = -errno;
		explain(err, "parsing kernel BTF", msg, msg_len);
		return err;
	}
	for (size_t i = 0; i < SPROBE_PAUSE_NPROGS; i++) {
		char name[64];

		snprintf(name, sizeof(name), "btf_trace_%s", tracepoints[i]);
		int id = btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF);
		if (id < 0) {
			sfmt(msg, msg_len,
			     "eBPF companion unavailable: the kernel has no %s tracepoint "
			     "(no %s in its BTF). Recording can continue without kernel "
			     "timestamps.", tracepoints[i], name);
			btf__free(btf);
			return -ENOTSUP;
		}
		if (strcmp(tracepoints[i], "sched_process_exit") == 0 && exit_group_dead) {
			/* typedef -> pointer -> func_proto */
			const struct btf_type *t = btf__type_by_id(btf, id);
			if (t)
				t = btf__type_by_id(btf, t->type);
			if (t && btf_is_ptr(t))
				t = btf__type_by_id(btf, t->type);
			*exit_group_dead = t && btf_is_func_proto(t) && btf_vlen(t) >= 3;
		}
	}
	btf__free(btf);

	libbpf_print_fn_t old = libbpf_set_print(print_silent);
	r = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_RAW_TRACEPOINT, NULL);
	if (r == 1)
		r = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL);
	libbpf_set_print(old);
	if (r == 1)
		return 0;
	err = r == 0 ? -ENOTSUP : r;
	explain(err, "probing BPF features", msg, msg_len);
	return err;
#endif
}

int sprobe_pause__probe(char *msg, size_t msg_len)
{
	return probe_impl(msg, msg_len, NULL);
}

/* ------------------------------------------------------------------ */
/* Open / load / attach                                                */

#ifndef SPROBE_NO_BPF
static int on_exit_event(struct sprobe_pause *p, const struct sprobe_pause_exit_event *e)
{
	if (p->nexit == p->capexit) {
		size_t cap = p->capexit ? p->capexit * 2 : 64;
		void *nx = realloc(p->exits, cap * sizeof(*p->exits));

		if (!nx) {
			p->cb_err = -ENOMEM;
			return -ENOMEM;
		}
		p->exits = nx;
		p->capexit = cap;
	}
	struct sprobe_pause_exit *x = &p->exits[p->nexit++];
	memset(x, 0, sizeof(*x));
	x->tgid = (pid_t)e->tgid;
	x->ppid = (pid_t)e->ppid;
	x->tid = (pid_t)e->tid;
	x->exit_code = e->exit_code;
	x->fork_ns = e->fork_ns;
	x->exit_ns = e->exit_ns;
	memcpy(x->comm, e->comm, sizeof(x->comm));
	x->comm[sizeof(x->comm) - 1] = '\0';
	return 0;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct sprobe_pause *p = ctx;
	const struct sprobe_pause_event *e = data;
	struct sprobe_pause_kwindow *w;

	if (size == sizeof(struct sprobe_pause_exit_event))
		return on_exit_event(p, data);
	if (size != sizeof(*e))
		return 0;	/* not ours: ignore rather than misread */
	if (p->nwin == p->capwin) {
		size_t cap = p->capwin ? p->capwin * 2 : 1024;
		void *nw = realloc(p->win, cap * sizeof(*p->win));

		if (!nw) {
			p->cb_err = -ENOMEM;
			return -ENOMEM;
		}
		p->win = nw;
		p->capwin = cap;
	}
	w = &p->win[p->nwin++];
	w->tid = (pid_t)e->tid;
	w->tgid = (pid_t)e->tgid;
	w->signo = e->signo;
	w->si_code = e->si_code;
	w->flags = e->flags;
	w->generate_ns = e->generate_ns;
	w->deliver_ns = e->deliver_ns;
	w->sigreturn_ns = e->sigreturn_ns;
	w->offcpu_ns = e->offcpu_ns;
	w->runq_ns = e->runq_ns;
	w->nswitches = e->nswitches;
	w->npreempt = e->npreempt;
	w->nruns = e->nruns;
	p->received++;
	return 0;
}

static bool pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}
#endif

static void fail_msg(const struct sprobe_pause_opts *o, const char *msg)
{
	if (!o->quiet && msg[0])
		fprintf(stderr, "stackprobe: %s\n", msg);
}

struct sprobe_pause *sprobe_pause__new(const struct sprobe_pause_opts *uopts)
{
	struct sprobe_pause_opts o = { 0 };
	char msg[512] = "";

	if (!uopts || uopts->sz < offsetof(struct sprobe_pause_opts, verbose)) {
		errno = EINVAL;
		return NULL;
	}
	memcpy(&o, uopts, uopts->sz < sizeof(o) ? uopts->sz : sizeof(o));
	if (o.tgid <= 0 || o.signo <= 0 || o.signo > SIGRTMAX ||
	    o.mode > SPROBE_PAUSE_MODE_TIMER) {
		errno = EINVAL;
		return NULL;
	}
#ifdef SPROBE_NO_BPF
	sprobe_pause__probe(msg, sizeof(msg));
	fail_msg(&o, msg);
	errno = ENOTSUP;
	return NULL;
#else
	if (!o.max_threads)
		o.max_threads = 16384;
	if (!o.ringbuf_bytes)
		o.ringbuf_bytes = 256 * 1024;
	/* Without follow_children the map holds the target alone. */
	if (!o.follow_children)
		o.max_procs = 1;
	else if (!o.max_procs)
		o.max_procs = 4096;
	if (!pow2(o.ringbuf_bytes) || o.ringbuf_bytes < 4096) {
		errno = EINVAL;
		return NULL;
	}

	struct sprobe_pause *p = NULL;
	const char *stage = "probing";
	libbpf_print_fn_t old_print;
	bool exit_group_dead = false;
	int err;

	err = probe_impl(msg, sizeof(msg), &exit_group_dead);
	if (err) {
		fail_msg(&o, msg);
		errno = -err;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	/* libbpf's print hook is process-global: set it for the duration of
	 * the load only (not thread-safe against another loader). */
	old_print = libbpf_set_print(o.verbose ? print_verbose : print_silent);

	stage = "opening the BPF object";
	err = object_unpark();
	if (err)
		goto fail;
	p->skel = pause_bpf__open();
	if (!p->skel) {
		err = -errno;
		goto fail;
	}
	p->skel->rodata->targ_tgid = (uint32_t)o.tgid;
	p->skel->rodata->targ_signo = o.signo;
	p->skel->rodata->targ_mode = o.mode;
	p->skel->rodata->nr_rt_sigreturn = __NR_rt_sigreturn;
	p->skel->rodata->targ_follow = o.follow_children;
	p->skel->rodata->exit_has_group_dead = exit_group_dead && !test_ignore_group_dead;
	err = bpf_map__set_max_entries(p->skel->maps.tids, o.max_threads);
	if (!err)
		err = bpf_map__set_max_entries(p->skel->maps.procs, o.max_procs);
	if (!err)
		err = bpf_map__set_max_entries(p->skel->maps.events, o.ringbuf_bytes);
	/* Forks matter only when following: no program on every fork of
	 * the machine otherwise. */
	if (!o.follow_children)
		bpf_program__set_autoattach(p->skel->progs.handle_fork, false);
	if (err)
		goto fail;

	stage = "loading the BPF programs";
	err = pause_bpf__load(p->skel);
	if (err)
		goto fail;
	/* The target is followed from before the first program is attached:
	 * every program tests `procs` (or targ_tgid) first. */
	stage = "adding the target to the process map";
	struct sprobe_pause_proc root = { 0 };
	__u32 key = (__u32)o.tgid;
	if (bpf_map__update_elem(p->skel->maps.procs, &key, sizeof(key), &root, sizeof(root),
				 BPF_NOEXIST) != 0) {
		err = -errno;
		goto fail;
	}
	stage = "attaching to raw tracepoints";
	err = pause_bpf__attach(p->skel);
	if (err)
		goto fail;
	stage = "creating the ring buffer reader";
	p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.events), on_event, p, NULL);
	if (!p->rb) {
		err = -errno;
		goto fail;
	}
	libbpf_set_print(old_print);
	return p;

fail:
	libbpf_set_print(old_print);
	if (err >= 0)
		err = -EINVAL;
	explain(err, stage, msg, sizeof(msg));
	fail_msg(&o, msg);
	sprobe_pause__free(p);
	errno = -err;
	return NULL;
#endif
}

void sprobe_pause__free(struct sprobe_pause *p)
{
	if (!p)
		return;
	if (p->rb) /* else libbpf may not be loaded */
		ring_buffer__free(p->rb);
#ifndef SPROBE_NO_BPF
	pause_bpf__destroy(p->skel);
#endif
	free(p->win);
	free(p->exits);
	free(p);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int sprobe_pause__poll(struct sprobe_pause *p, int timeout_ms)
{
	if (!p || !p->rb)
		return -EINVAL;
	size_t before = p->nwin + p->nexit;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
	int r;

	p->cb_err = 0;
	for (;;) {
		/* The BPF side wakes us only when the buffer is half full
		 * (pause.bpf.c: window_close), so drain without waiting first,
		 * then wait in short slices. */
		r = ring_buffer__consume(p->rb);
		if (r < 0 && r != -EINTR)
			return p->cb_err ? p->cb_err : r;
		if (p->nwin + p->nexit > before)
			break;
		uint64_t now = now_ms();
		if (now >= deadline)
			break;
		uint64_t slice = deadline - now < 10 ? deadline - now : 10;
		r = ring_buffer__poll(p->rb, (int)slice);
		if (r < 0 && r != -EINTR)
			return p->cb_err ? p->cb_err : r;
	}
	size_t got = p->nwin + p->nexit - before;
	return got > INT_MAX ? INT_MAX : (int)got;
}

const struct sprobe_pause_kwindow *sprobe_pause__windows(const struct sprobe_pause *p,
							  size_t *n)
{
	static const struct sprobe_pause_kwindow none;

	if (n)
		*n = p ? p->nwin : 0;
	return p && p->win ? p->win : &none;
}

const struct sprobe_pause_exit *sprobe_pause__exits(const struct sprobe_pause *p, size_t *n)
{
	static const struct sprobe_pause_exit none;

	if (n)
		*n = p ? p->nexit : 0;
	return p && p->exits ? p->exits : &none;
}

void sprobe_pause__clear(struct sprobe_pause *p)
{
	if (p) {
		p->nwin = 0;
		p->nexit = 0;
	}
}

int sprobe_pause__stats(const struct sprobe_pause *p, struct sprobe_pause_stats *out)
{
	if (!p || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
#ifndef SPROBE_NO_BPF
	/* Relaxed loads; pair with the __sync_fetch_and_add in count() in
	 * pause.bpf.c. Each counter is exact, the set is not a snapshot. */
	const __u64 *c = p->skel->bss->counters;
#define LD(i) __atomic_load_n(&c[i], __ATOMIC_RELAXED)
	out->generated = LD(SPROBE_PAUSE_C_GENERATED);
	out->not_queued = LD(SPROBE_PAUSE_C_NOT_QUEUED);
	out->delivered = LD(SPROBE_PAUSE_C_DELIVERED);
	out->emitted = LD(SPROBE_PAUSE_C_EMITTED);
	out->lost = LD(SPROBE_PAUSE_C_LOST);
	out->no_state = LD(SPROBE_PAUSE_C_NO_STATE);
	out->gen_ring_full = LD(SPROBE_PAUSE_C_GEN_RING_FULL);
	out->nested = LD(SPROBE_PAUSE_C_NESTED);
	out->abandoned = LD(SPROBE_PAUSE_C_ABANDONED);
	/* The target itself was inserted by the loader, not by a fork. */
	out->followed = 1 + LD(SPROBE_PAUSE_C_FOLLOWED);
	out->procs_full = LD(SPROBE_PAUSE_C_PROCS_FULL);
	out->exits = LD(SPROBE_PAUSE_C_EXITS);
	out->exits_lost = LD(SPROBE_PAUSE_C_EXITS_LOST);
#undef LD
	struct sprobe_pause_prog_stats ps[SPROBE_PAUSE_NPROGS];
	int n = sprobe_pause__prog_stats(p, ps, SPROBE_PAUSE_NPROGS);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		out->missed += ps[i].missed;
#endif
	out->received = p->received;
	return 0;
}

int sprobe_pause__prog_stats(const struct sprobe_pause *p,
			     struct sprobe_pause_prog_stats *out, size_t n)
{
	if (!p || (!out && n))
		return -EINVAL;
#ifdef SPROBE_NO_BPF
	return -ENOTSUP;
#else
	const struct bpf_program *progs[SPROBE_PAUSE_NPROGS] = {
		p->skel->progs.handle_generate, p->skel->progs.handle_deliver,
		p->skel->progs.handle_sys_enter, p->skel->progs.handle_switch,
		p->skel->progs.handle_exit, p->skel->progs.handle_fork,
	};
	size_t i;

	for (i = 0; i < n && i < SPROBE_PAUSE_NPROGS; i++) {
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);
		int err = bpf_obj_get_info_by_fd(bpf_program__fd(progs[i]), &info, &len);

		if (err)
			return err < 0 ? err : -errno;
		out[i].name = tracepoints[i];
		out[i].run_cnt = info.run_cnt;
		out[i].run_time_ns = info.run_time_ns;
		out[i].missed = info.recursion_misses;
	}
	return (int)i;
#endif
}
