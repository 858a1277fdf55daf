# The layout: each folder's files depend one way and no source file holds
# several mechanisms' worth of lines (../shared/STYLE.md "One mechanism per
# file"). tools/layout_check.py reads the objects' symbols (nm) and the
# includes of each file's own header: a loop between files, or a source
# file over 800 lines, fails the lane and is named.
#
#   make test-layout    build/test-results/layout.res (the check, and its
#                       own ability to find a loop)

.PHONY: test-layout
test-layout: $(LIB_OBJS) $(AGENT_OBJS) $(CLI_OBJS)
	$(Q)tools/run-tests.sh $(BUILD)/test-results/layout.res \
		"tools/layout_check.py $(BUILD)/obj" \
		"tools/layout_check.py --selftest"

TEST_LANES += test-layout
