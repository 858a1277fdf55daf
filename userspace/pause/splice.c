/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Kernel windows into a data file: the pause stage's output joins the
 * recording after the command has ended (the companion sees the last
 * windows only then), as KWINDOW records before the trailer, so a report
 * of the file can match them with the self-reported windows
 * (pause_merge.c). The CLI (stackprobe record --bpf) calls it; a recording
 * of a process tree splices each process's windows into its own part
 * (sprobe_pause__splice_windows_of).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>

/* kw[i] belongs in the file: every window for tgid 0, else that process's. */
static bool wanted(const struct sprobe_pause_kwindow *kw, pid_t tgid)
{
	return tgid == 0 || kw->tgid == tgid;
}

/* Append one KWINDOW record per wanted kernel window. Returns 0 or -errno. */
static int write_kwindows(struct sprobe_datafile_writer *w, const struct sprobe_pause_kwindow *kw,
			  size_t nk, pid_t tgid)
{
	int err = 0;

	for (size_t i = 0; i < nk && !err; i++) {
		if (!wanted(&kw[i], tgid))
			continue;
		struct sprobe_df_record k = { .type = SPROBE_DF_KWINDOW };
		k.kwindow.tid = (uint32_t)kw[i].tid;
		k.kwindow.generate_ns = kw[i].generate_ns;
		k.kwindow.deliver_ns = kw[i].deliver_ns;
		k.kwindow.sigreturn_ns = kw[i].sigreturn_ns;
		k.kwindow.offcpu_ns = kw[i].offcpu_ns;
		err = sprobe_datafile_writer__write(w, &k);
	}
	return err;
}

/*
 * Rewrite the data file at PATH with the kernel windows inserted before its
 * trailer (or appended, for a file cut short, which stays cut short). The
 * new file replaces the old one with rename(2), so a failure loses nothing.
 */
static int splice_into(const char *path, const struct sprobe_pause_kwindow *kw, size_t nk, pid_t tgid)
{
	/* On the heap, not PATH_MAX: the macOS build has no such bound. */
	size_t plen = strlen(path);
	char *tmp;
	int err = 0;

	tmp = malloc(plen + sizeof(".tmp"));
	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, plen + sizeof(".tmp"), "%s.tmp", path);
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(path);
	if (!rd) {
		err = -errno;
		free(tmp);
		return err;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		sprobe_datafile_reader__free(rd);
		free(tmp);
		return err;
	}
	struct sprobe_datafile_writer_opts wo = { .sz = sizeof(wo) };
	struct sprobe_datafile_writer *w = sprobe_datafile_writer__new(fd, &wo);
	if (!w) {
		err = -errno;
		goto out;
	}
	struct sprobe_df_record rec;
	bool added = false;
	int r;
	while ((r = sprobe_datafile_reader__next(rd, &rec)) > 0) {
		if (rec.type == SPROBE_DF_TRAILER && !added) {
			err = write_kwindows(w, kw, nk, tgid);
			added = true;
		}
		if (!err && rec.type == SPROBE_DF_TRAILER) {
			/* __finish() writes the trailer (and counts records). */
			err = sprobe_datafile_writer__finish(w, &rec.trailer);
			break;
		}
		if (!err)
			err = sprobe_datafile_writer__write(w, &rec);
		if (err)
			break;
	}
	if (r < 0 && !err && sprobe_datafile_reader__status(rd) != SPROBE_DF_CUT_SHORT)
		err = r;
	if (!err && !added) {
		/* Cut short: keep it so, with the windows at the end. */
		err = write_kwindows(w, kw, nk, tgid);
		if (!err)
			err = sprobe_datafile_writer__flush(w);
	}
out:
	sprobe_datafile_writer__free(w);
	if (close(fd) < 0 && !err)
		err = -errno;
	sprobe_datafile_reader__free(rd);
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	free(tmp);
	return err;
}

int sprobe_pause__splice_windows(const char *path, const struct sprobe_pause_kwindow *kw, size_t nk)
{
	if (!path || (nk && !kw))
		return -EINVAL;
	return splice_into(path, kw, nk, 0);
}

int sprobe_pause__splice_windows_of(const char *path, const struct sprobe_pause_kwindow *kw,
				    size_t nk, pid_t tgid)
{
	size_t n = 0;

	if (!path || (nk && !kw) || tgid < 0)
		return -EINVAL;
	for (size_t i = 0; i < nk; i++)
		n += wanted(&kw[i], tgid);
	/* Nothing of this process: leave its part as it is. */
	if (!n)
		return 0;
	return splice_into(path, kw, nk, tgid);
}
