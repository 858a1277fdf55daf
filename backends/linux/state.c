/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The backend's global state, defined apart from every mechanism: the
 * handler reads it and the probe's files write it, so all of them depend
 * on this leaf and none on another for it (linux.h describes each field).
 */
#include "backends/linux/linux.h"

/* The handler's state: written by the probe before it arms a slot, read
 * by the handler after its CAS on that slot. */
struct sprobe_lx_state sprobe_lx_g;
/* The program's disposition of the capture signal (chain.c). */
struct sprobe_lx_chain sprobe_lx_ch;
