# The viewers lane (docs/OUTPUTS.md "Tests"): the outputs opened in the tools
# people open them in, not only parsed: the SVG flame graph and the
# speedscope web app (the npm package's build) in Debian's chromium, driven
# by playwright-core; pprof files read by the real `go tool pprof` (Debian's
# golang-go). chromium and golang-go come from tools/deps.d/viewers.list,
# playwright-core and speedscope from tests/node/package-lock.json
# (node-deps, mk/outputs.mk).
#
#   make test-viewers   tests/viewers/run.sh: records build/demo, writes its
#                       outputs to build/test-out/viewers/, runs
#                       tests/viewers/*.test.cjs with `node --test`;
#                       counts in build/test-results/viewers.res, screenshots
#                       in build/test-results/viewers/

.PHONY: test-viewers
test-viewers: $(BUILD)/stackprobe $(BUILD)/demo | node-deps
	$(Q)tests/viewers/run.sh $(BUILD)/test-results/viewers.res $(BUILD)/stackprobe $(BUILD)/demo \
		$(CURDIR)/$(NODE_DIR)/node_modules

TEST_LANES += test-viewers
