# What the preloaded library exports (README "Embedding", docs/OUTPUTS.md):
# the library objects are compiled -fvisibility=hidden (top Makefile), the
# public functions carry SPROBE_API (include/stackprobe/api.h) and the
# version script userspace/libstackprobe.map lists the libc functions the
# agent interposes.
#
#   make test-exports   tests/exports_test.sh on build/libstackprobe.so: no
#                       export outside the API and the interposed names,
#                       every API function and agent wrapper exported, every
#                       public declaration marked, and the checks' own
#                       ability to fail (five checks, build/test-results/
#                       exports.res)

.PHONY: test-exports
test-exports: $(SHLIB) $(BUILD)/libstackprobe.a $(AGENT_OBJS)
	$(Q)tools/run-tests.sh $(BUILD)/test-results/exports.res \
		"tests/exports_test.sh headers" \
		"tests/exports_test.sh exports $(SHLIB)" \
		"tests/exports_test.sh api $(SHLIB) $(BUILD)/libstackprobe.a" \
		"tests/exports_test.sh agent $(SHLIB) $(AGENT_OBJS)" \
		"tests/exports_test.sh selftest"

TEST_LANES += test-exports
