/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Can the LD_PRELOAD agent enter a program? One test, used by the agent's
 * exec wrappers (to note a child it will not sample) and by `record` (to
 * choose the external tier for the command itself), so the two never
 * disagree about the same file.
 *
 * The agent cannot enter: a set-user/group-ID program whose bits change
 * the credentials, or one whose file capabilities raise ours (the loader
 * runs either in secure-execution mode and ignores LD_PRELOAD), and an ELF program with no PT_INTERP (statically
 * linked: no loader runs at all). A #! script is what its interpreter is.
 *
 * The caller opens the files (the agent through its descriptor registry,
 * userspace/common/fds.h; the CLI plainly): these functions only read the
 * descriptor they are given. Not async-signal-safe; thread-safe.
 */
#ifndef SPROBE_COMMON_ENTERABLE_H
#define SPROBE_COMMON_ENTERABLE_H

#include <stdbool.h>
#include <stddef.h>

enum sprobe_enter {
	SPROBE_ENTER_OK = 0,	/* enterable, or nothing known against it */
	SPROBE_ENTER_STATIC,	/* cannot be entered: no loader; why says so */
	SPROBE_ENTER_SETID,	/* cannot be entered: set-ID, or file
				 * capabilities; why says so. The kernel also
				 * drops perf events at such an exec (a
				 * non-dumpable image), so the external tier
				 * cannot follow it through the exec. */
	SPROBE_ENTER_SCRIPT,	/* a #! script: check interp instead */
};

/* Check the program open on fd. why gets the reason for _STATIC and _SETID
 * (a phrase without a verb: "statically linked: ..."), interp the
 * interpreter's path for SPROBE_ENTER_SCRIPT. */
enum sprobe_enter sprobe_enter__check_fd(int fd, char *why, size_t len, char *interp,
					 size_t ilen);

/* Find FILE as execvp() would: as given when it has a '/', else the first
 * executable match on path_env (NULL: "/bin:/usr/bin"). Returns false when
 * nothing matches or the name does not fit out. */
bool sprobe_enter__resolve(const char *file, const char *path_env, char *out, size_t len);

/* How deep a chain of #! scripts is followed (execve follows a few). */
#define SPROBE_ENTER_MAX_SCRIPTS 2

#endif
