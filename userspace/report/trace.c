/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Chrome trace-event JSON writer (see include/stackprobe/trace.h).
 *
 * Format reference: "Trace Event Format" (Google doc linked from the
 * Perfetto docs). We use complete events ("ph":"X" with "dur"), instant
 * events ("ph":"i", "s":"t") and metadata ("ph":"M": process_name,
 * thread_name, thread_sort_index). Slices of one track must nest properly:
 * delivery [generate, deliver] and pause [deliver, sigreturn] are adjacent,
 * and the handler [entry, exit] lies inside the pause (the merge's
 * containment rule), so they do.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/trace.h>

struct track {
	pid_t tid;
	pid_t pid;		/* its process; 0: the trace's */
	bool named;
};

struct sprobe_trace {
	FILE *f;
	pid_t pid;
	bool finished;
	size_t nevents;
	struct track *tracks;	/* sorted by tid */
	size_t ntracks, captracks;
};

/* ------------------------------------------------------------------ */
/* JSON output                                                         */

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates, beyond U+10FFFF. */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static void put_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "??");
	size_t n = strlen((const char *)p);

	fputc('"', f);
	while (n) {
		if (*p == '"' || *p == '\\') {
			fputc('\\', f);
			fputc(*p, f);
		} else if (*p == '\n') {
			fputs("\\n", f);
		} else if (*p == '\t') {
			fputs("\\t", f);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p);
		} else if (*p >= 0x80) {
			size_t len = utf8_len(p, n);
			if (!len) {
				fputs("\\ufffd", f);
				len = 1;
			} else {
				fwrite(p, 1, len, f);
			}
			p += len;
			n -= len;
			continue;
		} else {
			fputc(*p, f);
		}
		p++;
		n--;
	}
	fputc('"', f);
}

/* Microseconds with the nanosecond digits: exact, no floating point. */
static void put_us(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%03u", ns / 1000u, (unsigned)(ns % 1000u));
}

static pid_t track_pid(const struct sprobe_trace *t, pid_t tid);

/* Opens one event object; the caller writes the rest and calls end(). */
static void begin_pid(struct sprobe_trace *t, const char *ph, const char *name, pid_t pid, pid_t tid)
{
	fputs(t->nevents++ ? ",\n" : "\n", t->f);
	fprintf(t->f, "{\"ph\":\"%s\",\"pid\":%d,\"tid\":%d,\"name\":", ph, (int)pid, (int)tid);
	put_str(t->f, name);
}

static void begin(struct sprobe_trace *t, const char *ph, const char *name, pid_t tid)
{
	begin_pid(t, ph, name, track_pid(t, tid), tid);
}

static int end(struct sprobe_trace *t)
{
	fputc('}', t->f);
	return ferror(t->f) ? -EIO : 0;
}

/* ------------------------------------------------------------------ */
/* Tracks                                                              */

static struct track *track_get(struct sprobe_trace *t, pid_t tid)
{
	size_t lo = 0, hi = t->ntracks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->tracks[mid].tid == tid)
			return &t->tracks[mid];
		if (t->tracks[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (t->ntracks == t->captracks) {
		size_t cap = t->captracks ? t->captracks * 2 : 16;
		struct track *nt = realloc(t->tracks, cap * sizeof(*nt));
		if (!nt)
			return NULL;
		t->tracks = nt;
		t->captracks = cap;
	}
	memmove(&t->tracks[lo + 1], &t->tracks[lo], (t->ntracks - lo) * sizeof(*t->tracks));
	t->tracks[lo] = (struct track){ .tid = tid };
	t->ntracks++;
	return &t->tracks[lo];
}

static pid_t track_pid(const struct sprobe_trace *t, pid_t tid)
{
	size_t lo = 0, hi = t->ntracks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->tracks[mid].tid == tid)
			return t->tracks[mid].pid ? t->tracks[mid].pid : t->pid;
		if (t->tracks[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return t->pid;
}

static int track_name(struct sprobe_trace *t, struct track *tr, const char *name)
{
	tr->named = true;
	begin(t, "M", "thread_name", tr->tid);
	fputs(",\"args\":{\"name\":", t->f);
	put_str(t->f, name);
	fputc('}', t->f);
	int err = end(t);
	if (err)
		return err;
	/* Perfetto orders tracks by this index: keep thread order stable. */
	begin(t, "M", "thread_sort_index", tr->tid);
	fprintf(t->f, ",\"args\":{\"sort_index\":%d}", (int)tr->tid);
	return end(t);
}

static int check(const struct sprobe_trace *t, pid_t tid)
{
	return !t || t->finished || tid <= 0 ? -EINVAL : 0;
}

/* ------------------------------------------------------------------ */
/* API                                                                 */

struct sprobe_trace *sprobe_trace__new(FILE *f, const struct sprobe_trace_opts *opts)
{
	struct sprobe_trace *t;
	char pname[32];

	if (!f || !opts || opts->sz < offsetof(struct sprobe_trace_opts, process_name) ||
	    opts->pid <= 0) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->f = f;
	t->pid = opts->pid;
	const char *name = opts->sz >= sizeof(*opts) ? opts->process_name : NULL;
	if (!name) {
		snprintf(pname, sizeof(pname), "pid %d", (int)opts->pid);
		name = pname;
	}
	fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"stackprobe\"},"
	      "\"traceEvents\":[", f);
	begin(t, "M", "process_name", opts->pid);
	fputs(",\"args\":{\"name\":", f);
	put_str(f, name);
	fputc('}', f);
	if (end(t)) {
		free(t);
		errno = EIO;
		return NULL;
	}
	return t;
}

int sprobe_trace__thread_process(struct sprobe_trace *t, pid_t tid, pid_t pid,
				 const char *process_name)
{
	int err = check(t, tid);
	struct track *tr;
	bool known = pid == t->pid;

	if (err || pid <= 0)
		return -EINVAL;
	for (size_t i = 0; i < t->ntracks && !known; i++)
		known = t->tracks[i].pid == pid;
	tr = track_get(t, tid);
	if (!tr)
		return -ENOMEM;
	if (tr->pid)
		return 0; /* the first process given for a tid wins */
	tr->pid = pid;
	if (known)
		return 0;
	char pname[32];

	if (!process_name) {
		snprintf(pname, sizeof(pname), "pid %d", (int)pid);
		process_name = pname;
	}
	begin_pid(t, "M", "process_name", pid, tid);
	fputs(",\"args\":{\"name\":", t->f);
	put_str(t->f, process_name);
	fputc('}', t->f);
	return end(t);
}

int sprobe_trace__thread_name(struct sprobe_trace *t, pid_t tid, const char *name)
{
	int err = check(t, tid);
	struct track *tr;

	if (err || !name)
		return -EINVAL;
	tr = track_get(t, tid);
	if (!tr)
		return -ENOMEM;
	return tr->named ? 0 : track_name(t, tr, name);
}

int sprobe_trace__kernel_window(struct sprobe_trace *t, const struct sprobe_pause_kwindow *w)
{
	if (!w || check(t, w->tid) || !w->deliver_ns)
		return -EINVAL;
	if (!track_get(t, w->tid))
		return -ENOMEM;
	if (w->generate_ns && w->generate_ns <= w->deliver_ns) {
		begin(t, "X", "signal delivery", w->tid);
		fputs(",\"cat\":\"kernel\",\"ts\":", t->f);
		put_us(t->f, w->generate_ns);
		fputs(",\"dur\":", t->f);
		put_us(t->f, w->deliver_ns - w->generate_ns);
		fprintf(t->f, ",\"args\":{\"signo\":%d,\"si_code\":%d,\"group\":%s}", w->signo,
			w->si_code, w->flags & SPROBE_PAUSE_KW_GROUP ? "true" : "false");
		int err = end(t);
		if (err)
			return err;
	}
	bool complete = !(w->flags & SPROBE_PAUSE_KW_INCOMPLETE) &&
			w->sigreturn_ns >= w->deliver_ns;
	begin(t, complete ? "X" : "i",
	      complete ? "kernel pause" : "kernel pause (no rt_sigreturn)", w->tid);
	fputs(",\"cat\":\"kernel\",\"ts\":", t->f);
	put_us(t->f, w->deliver_ns);
	if (complete) {
		fputs(",\"dur\":", t->f);
		put_us(t->f, w->sigreturn_ns - w->deliver_ns);
	} else {
		fputs(",\"s\":\"t\"", t->f);
	}
	fputs(",\"args\":{\"offcpu_us\":", t->f);
	put_us(t->f, w->offcpu_ns);
	fputs(",\"runq_us\":", t->f);
	put_us(t->f, w->runq_ns);
	fprintf(t->f, ",\"switches\":%u,\"preempted\":%u,\"flags\":%u,\"generated\":%s}",
		w->nswitches, w->npreempt, w->flags, w->generate_ns ? "true" : "false");
	return end(t);
}

int sprobe_trace__self_window(struct sprobe_trace *t, const struct sprobe_pause_swindow *w)
{
	if (!w || check(t, w->tid) || !w->entry_ns || w->exit_ns < w->entry_ns)
		return -EINVAL;
	if (!track_get(t, w->tid))
		return -ENOMEM;
	begin(t, "X", "handler", w->tid);
	fputs(",\"cat\":\"self\",\"ts\":", t->f);
	put_us(t->f, w->entry_ns);
	fputs(",\"dur\":", t->f);
	put_us(t->f, w->exit_ns - w->entry_ns);
	fputs(",\"args\":{", t->f);
	if (w->signal_ns && w->signal_ns <= w->entry_ns) {
		fputs("\"signal_to_entry_us\":", t->f);
		put_us(t->f, w->entry_ns - w->signal_ns);
	}
	fputc('}', t->f);
	return end(t);
}

int sprobe_trace__sample(struct sprobe_trace *t, pid_t tid, uint64_t ts_ns,
			 const char *const *frames, size_t nframes, uint32_t weight)
{
	if (check(t, tid) || (!frames && nframes))
		return -EINVAL;
	if (!track_get(t, tid))
		return -ENOMEM;
	begin(t, "i", "sample", tid);
	fputs(",\"cat\":\"sample\",\"s\":\"t\",\"ts\":", t->f);
	put_us(t->f, ts_ns);
	fputs(",\"args\":{\"stack\":[", t->f);
	for (size_t i = 0; i < nframes; i++) {
		if (i)
			fputc(',', t->f);
		put_str(t->f, frames[i]);
	}
	fputc(']', t->f);
	if (weight > 1)
		fprintf(t->f, ",\"weight\":%u", weight);
	fputc('}', t->f);
	return end(t);
}

int sprobe_trace__finish(struct sprobe_trace *t)
{
	char name[32];
	int err = 0;

	if (!t || t->finished)
		return -EINVAL;
	for (size_t i = 0; i < t->ntracks && !err; i++) {
		if (t->tracks[i].named)
			continue;
		snprintf(name, sizeof(name), "thread %d", (int)t->tracks[i].tid);
		err = track_name(t, &t->tracks[i], name);
	}
	t->finished = true;
	fputs("\n]}\n", t->f);
	if (fflush(t->f) != 0 || ferror(t->f))
		return -EIO;
	return err;
}

void sprobe_trace__free(struct sprobe_trace *t)
{
	if (!t)
		return;
	if (!t->finished)
		sprobe_trace__finish(t);
	free(t->tracks);
	free(t);
}
