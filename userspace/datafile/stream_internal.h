/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the stream (stream.c) and its tests: what the public header
 * does not promise.
 */
#ifndef SPROBE_USERSPACE_DATAFILE_STREAM_INTERNAL_H
#define SPROBE_USERSPACE_DATAFILE_STREAM_INTERNAL_H

#include <stddef.h>

struct sprobe_stream;

/* Bytes of s's ring resident in memory now (mincore()), or 0 for NULL or
 * when mincore fails. Any thread; a snapshot that the writer may change
 * at once. */
size_t sprobe_stream__resident_bytes(const struct sprobe_stream *s);

#endif
