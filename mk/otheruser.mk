# The tests that run a build product as another user (uid 65534), run from
# a clone in a directory that user cannot enter (a fresh `mktemp -d`, 0700,
# as root's home is): what they run must be a copy it can reach
# (tests/uid_dir_helper.h), never build/ of a checkout that may sit in such
# a directory. tools/other-user-lane.sh clones HEAD (committed state only),
# builds these tests there and nothing else, runs them, removes the clone.
# Needs root (else skipped at once) and git.
#
#   make test-other-user    counts in build/test-results/other-user.res
#
# A test that runs something as another user belongs in OTHER_USER_TESTS
# (program:test-name, one test each).
OTHER_USER_TESTS := test_ondemand:test_other_uid_refused \
	test_external_attach:test_other_user \
	test_external_attach:test_not_dumpable \
	test_external_attach:test_setuid_program

.PHONY: test-other-user
test-other-user:
	$(Q)tools/other-user-lane.sh $(BUILD)/test-results/other-user.res "$(MAKE) BUILD=build" \
		$(sort $(foreach t,$(OTHER_USER_TESTS),build/tests/$(firstword $(subst :, ,$(t))))) -- \
		$(foreach t,$(OTHER_USER_TESTS),"build/tests/$(subst :, ,$(t))")
TEST_LANES += test-other-user
