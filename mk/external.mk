# ---- the external tier: record -p through the kernel (issue 26) ----------
# build/attachwork: a running program started without the agent
# (tests/test_external_attach.c); build/noperf (mk/hardening.mk) puts a
# seccomp filter forbidding perf events in front of record.
$(BUILD)/attachwork: tests/workloads/attachwork.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $<
all: $(BUILD)/attachwork
$(BUILD)/tests/test_external_attach: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/attachwork $(BUILD)/noperf

# The pause the tier costs its target, next to the signal path's, measured
# from the target's side (bench/bench_ext_pause.c; docs/PERFORMANCE.md
# "External tier: the pause it costs the target").
BENCH_EXT_PAUSE_ARGS ?= 10 1 999 32
.PHONY: bench-ext-pause
bench-ext-pause: $(BUILD)/bench/bench_ext_pause
	$(Q)$(BUILD)/bench/bench_ext_pause $(BENCH_EXT_PAUSE_ARGS)
