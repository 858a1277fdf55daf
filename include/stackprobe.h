/* SPDX-License-Identifier: BSD-2-Clause */
/* stackprobe: the public API, one header per part under stackprobe/. */
#ifndef STACKPROBE_H
#define STACKPROBE_H

#include <stackprobe/api.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>
#include <stackprobe/report.h>
#include <stackprobe/sampler.h>
#include <stackprobe/stream.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/table.h>
#include <stackprobe/trace.h>
#include <stackprobe/unwind.h>

/* The library version, "MAJOR.MINOR.PATCH". Static string; thread-safe. */
SPROBE_API
const char *sprobe_version(void);

#endif
