/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The data-file writer on a descriptor of the library's registry
 * (userspace/fds.h): what the sampler uses inside a host process.
 */
#ifndef SPROBE_USERSPACE_DATAFILE_OWNED_H
#define SPROBE_USERSPACE_DATAFILE_OWNED_H

#include <stackprobe/datafile.h>

/*
 * As sprobe_datafile_writer__new(), on registry handle h: every batch is
 * written through sprobe_fd__get(h) after sprobe_fd__verify(h), so if the
 * number stopped being the file it was opened on, writing stops with
 * -ESTALE or -EBADF (sticky, returned by every later call) and nothing
 * reaches whatever file has the number now. The writer does not own h.
 */
struct sprobe_datafile_writer *
sprobe_datafile_writer__new_owned(int h, const struct sprobe_datafile_writer_opts *opts);

#endif
