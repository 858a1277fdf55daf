# ---- the external tier: record -p through the kernel ----------------------
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
# ---- the external tier (tests/test_external.c) ----------------------------
# build/extsplit: a C program linked statically and built -O2 (gcc omits
# frame pointers there), so only DWARF unwinding of the kernel's stack
# copies finds its callers. build/gosplit: a pure Go program (CGO_ENABLED=0,
# static; Go's CFI is .debug_frame, frame pointers kept), built offline as
# build/gomix is (mk/share.mk: GO, GO_ENV).
$(BUILD)/extsplit: tests/workloads/extsplit.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -static -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -o $@ $< -lpthread

# The same program with frame pointers: the kernel's chain goes on where a
# small stack copy ends (the splice, userspace/external/xsample.c).
$(BUILD)/extsplit-fp: tests/workloads/extsplit.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -static -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -o $@ $< -lpthread

# A dynamic program that dlopens the unwind test library (mk/unwind.mk)
# after it has run a while: record reads its maps again.
$(BUILD)/extdl: tests/workloads/extdl.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -o $@ $< -ldl

$(BUILD)/gosplit: tests/workloads/gosplit/main.go | $(BUILD)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(BUILD)/go
	$(Q)cd tests/workloads/gosplit && $(GO_ENV) CGO_ENABLED=0 $(GO) build -o $(abspath $@) main.go

all: $(BUILD)/extsplit $(BUILD)/extsplit-fp $(BUILD)/extdl
$(BUILD)/tests/test_external: $(BUILD)/stackprobe $(BUILD)/extsplit $(BUILD)/extsplit-fp $(BUILD)/gosplit \
	$(BUILD)/extdl $(BUILD)/tests/unwind_testlib/libsprobe_testlib.so

# bench: the external tier's shares and top functions against perf
# record --call-graph dwarf (linux-perf, tools/deps.d/benchrec.list) on the
# workloads above and on xz. Not in `make test`.
.PHONY: bench-external
bench-external: $(BUILD)/stackprobe $(BUILD)/extsplit $(BUILD)/gosplit
	$(Q)python3 bench/external_vs_perf.py --build $(BUILD) $(BENCH_EXTERNAL_ARGS)
BENCH_LANES += bench-external
