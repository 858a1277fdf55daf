/* SPDX-License-Identifier: BSD-2-Clause */
/* Build products copied where another user can run them
 * (tests/uid_dir_helper.c; used by the tests that run the CLI or a
 * workload as uid 65534). The checkout may sit in a directory that user
 * cannot enter (root's 0700 home, a `mktemp -d` directory), so those tests
 * never run a product from build/ as that user. */
#ifndef SPROBE_TESTS_UID_DIR_HELPER_H
#define SPROBE_TESTS_UID_DIR_HELPER_H

#include <sys/types.h>

/* The directory must be on a file system that honours set-user-ID bits
 * (not mounted nosuid): the test makes a set-ID program of a copy. */
#define SPROBE_TEST_UID_DIR_SETID 1u

/* A fresh directory, mode 0755, that uid (with gid, no supplementary
 * groups) can use: under the first of $TMPDIR, /tmp, /var/tmp where it
 * checks out. It holds a copy of each of files[] (NULL-terminated paths,
 * e.g. "build/stackprobe"; each a program or library that needs nothing
 * else from the checkout) under its base name, with the original's
 * permission bits and the caller's ownership, and an empty "out", mode
 * 01777, for what uid writes. Checked from a child that has become uid:
 * it can read every copy, execute every executable one and create files
 * in out; so every directory above is searchable by uid and the mount is
 * not noexec.
 * Returns the directory's path, malloc'd: free it with
 * sprobe_test_uid_dir_free() (or the teardown below). Skips the test,
 * saying why, when no candidate qualifies; fails it (cmocka) on any other
 * error. Needs root. Forks: call it where no other thread holds a lock. */
char *sprobe_test_uid_dir(uid_t uid, gid_t gid, const char *const files[], unsigned flags);

/* Remove dir and all in it (whatever uid wrote too), and free dir. NULL:
 * nothing. */
void sprobe_test_uid_dir_free(char *dir);

/* cmocka teardown: sprobe_test_uid_dir_free(*state), so a test that fails
 * after it stored its directory in *state leaves nothing behind. */
int sprobe_test_uid_dir_teardown(void **state);

#endif
