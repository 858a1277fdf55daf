/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The one "can the agent enter this program" check
 * (userspace/common/enterable.c), used by the agent's exec wrappers and by
 * `record`: each verdict on real files made here (an ELF header with and
 * without PT_INTERP, scripts, set-ID bits owned by another user).
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sprobe_test.h"
#include "userspace/common/enterable.h"

#define DIR "build/test-out/enterable"

/* A 64-bit ELF executable header with one program header: PT_INTERP or
 * PT_LOAD. Only the headers matter to the check. */
static void write_elf(const char *path, bool interp)
{
	Elf64_Ehdr eh = { .e_type = ET_EXEC, .e_phoff = sizeof(Elf64_Ehdr),
			  .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = 1 };
	Elf64_Phdr ph = { .p_type = interp ? PT_INTERP : PT_LOAD };
	FILE *f = fopen(path, "w");

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	assert_non_null(f);
	assert_int_equal(fwrite(&eh, sizeof(eh), 1, f), 1);
	assert_int_equal(fwrite(&ph, sizeof(ph), 1, f), 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0755), 0);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0755), 0);
}

static enum sprobe_enter check(const char *path, char *why, char *interp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	enum sprobe_enter r;

	assert_true(fd >= 0);
	why[0] = interp[0] = '\0';
	r = sprobe_enter__check_fd(fd, why, 128, interp, 256);
	close(fd);
	return r;
}

static int setup(void **state)
{
	(void)state;
	mkdir("build/test-out", 0755);
	mkdir(DIR, 0755);
	return 0;
}

static void test_static_and_dynamic_elf(void **state)
{
	char why[128], interp[256];

	(void)state;
	write_elf(DIR "/static", false);
	write_elf(DIR "/dynamic", true);
	assert_int_equal(check(DIR "/static", why, interp), SPROBE_ENTER_STATIC);
	assert_non_null(strstr(why, "statically linked"));
	assert_int_equal(check(DIR "/dynamic", why, interp), SPROBE_ENTER_OK);
	assert_string_equal(why, "");
	/* A real dynamic program of the system. */
	assert_int_equal(check("/bin/sh", why, interp), SPROBE_ENTER_OK);
}

static void test_scripts_name_their_interpreter(void **state)
{
	char why[128], interp[256], text[512];

	(void)state;
	write_text(DIR "/plain.sh", "#!/bin/sh\necho hi\n");
	assert_int_equal(check(DIR "/plain.sh", why, interp), SPROBE_ENTER_SCRIPT);
	assert_string_equal(interp, "/bin/sh");
	write_text(DIR "/spaced.sh", "#!  /usr/bin/env python3 -u\n");
	assert_int_equal(check(DIR "/spaced.sh", why, interp), SPROBE_ENTER_SCRIPT);
	assert_string_equal(interp, "/usr/bin/env");
	/* An interpreter name longer than the caller's buffer is not cut
	 * to a wrong path: the check says nothing against the script. */
	memset(text, 'a', sizeof(text));
	memcpy(text, "#!/", 3);
	text[sizeof(text) - 2] = '\n';
	text[sizeof(text) - 1] = '\0';
	write_text(DIR "/long.sh", text);
	assert_int_equal(check(DIR "/long.sh", why, interp), SPROBE_ENTER_OK);
	write_text(DIR "/empty.sh", "#!\n");
	assert_int_equal(check(DIR "/empty.sh", why, interp), SPROBE_ENTER_OK);
	write_text(DIR "/text", "not a program\n");
	assert_int_equal(check(DIR "/text", why, interp), SPROBE_ENTER_OK);
}

static void test_set_id_of_another_user(void **state)
{
	char why[128], interp[256];

	(void)state;
	if (geteuid() != 0)
		SPROBE_SKIP("needs root to give a file to another user");
	write_elf(DIR "/setuid", true);
	assert_int_equal(chown(DIR "/setuid", 65534, (gid_t)-1), 0);
	assert_int_equal(chmod(DIR "/setuid", 04755), 0);
	assert_int_equal(check(DIR "/setuid", why, interp), SPROBE_ENTER_SETID);
	assert_non_null(strstr(why, "set-user/group-ID"));
	/* Set-user-ID of the caller's own uid changes no credentials. */
	assert_int_equal(chown(DIR "/setuid", getuid(), (gid_t)-1), 0);
	assert_int_equal(chmod(DIR "/setuid", 04755), 0);
	assert_int_equal(check(DIR "/setuid", why, interp), SPROBE_ENTER_OK);
}

static void test_resolve_like_execvp(void **state)
{
	char out[4096];

	(void)state;
	assert_true(sprobe_enter__resolve("sh", "/nonexistent:/bin", out, sizeof(out)));
	assert_string_equal(out, "/bin/sh");
	assert_false(sprobe_enter__resolve("no-such-program-here", "/bin:/usr/bin", out,
					   sizeof(out)));
	assert_true(sprobe_enter__resolve("./x", "/bin", out, sizeof(out)));
	assert_string_equal(out, "./x");
	assert_false(sprobe_enter__resolve("sh", "/bin", out, 4)); /* does not fit */
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_static_and_dynamic_elf, setup),
	cmocka_unit_test_setup(test_scripts_name_their_interpreter, setup),
	cmocka_unit_test_setup(test_set_id_of_another_user, setup),
	cmocka_unit_test_setup(test_resolve_like_execvp, setup),
};

SPROBE_TEST_MAIN(tests)
