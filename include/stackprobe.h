/* SPDX-License-Identifier: BSD-2-Clause */
/* stackprobe: the public API, one header per part under stackprobe/. */
#ifndef STACKPROBE_H
#define STACKPROBE_H

#include <stackprobe/capture.h>

/* The library version, "MAJOR.MINOR.PATCH". Static string; thread-safe. */
const char *sprobe_version(void);

#endif
