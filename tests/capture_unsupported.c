/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The unsupported-platform contract, built by mk/capture.mk with
 * backends/unsupported/capture.c in place of a real backend: capturing reports
 * -ENOTSUP and never an empty snapshot that would read as "no threads".
 * (Not named test_*.c: it must not be linked with the Linux backend.)
 */
#include <errno.h>

#include "sprobe_test.h"
#include <stackprobe/capture.h>

static void test_unsupported_is_an_error(void **state)
{
	struct sprobe_snapshot *s = sprobe_snapshot__new(4, 4096);
	struct sprobe_capturer *c;

	assert_non_null(s);
	errno = 0;
	c = sprobe_capturer__new(NULL);
	assert_null(c);
	assert_int_equal(errno, ENOTSUP);
	assert_int_equal(sprobe_capturer__signo(c), -ENOTSUP);
	assert_int_equal(sprobe_capturer__capture(c, s), -ENOTSUP);
	assert_int_equal(sprobe_capturer__capture(NULL, NULL), -ENOTSUP);
	/* The snapshot was not turned into an empty "success". */
	assert_int_equal(sprobe_snapshot__nthreads(s), 0);
	assert_int_equal(sprobe_snapshot__stats(s)->threads_total, 0);
	assert_false(sprobe_snapshot__frames_resolved(s));
	sprobe_capturer__free(c);
	sprobe_snapshot__free(s);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_unsupported_is_an_error),
};

SPROBE_TEST_MAIN(tests)
