# Zero-pause capture (docs/capture.md "Zero-pause"): the parked-thread
# workload of tests/zeropause/chain.c, compiled twice -- with and without
# frame pointers -- and linked into the test and the benchmark.

ZP_OBJ := $(BUILD)/obj/zp
ZP_CHAIN_OBJS := $(ZP_OBJ)/chain_fp.o $(ZP_OBJ)/chain_nofp.o

$(ZP_OBJ)/chain_fp.o: tests/zeropause/chain.c tests/zeropause/chain.h | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -O2 -fno-omit-frame-pointer -DZP_SUFFIX=_fp -c $< -o $@

$(ZP_OBJ)/chain_nofp.o: tests/zeropause/chain.c tests/zeropause/chain.h | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -O2 -fomit-frame-pointer -DZP_SUFFIX=_nofp -c $< -o $@

# The zero-pause tests, one theme per program (tests/test_zero_pause*.c).
ZP_TEST_BINS := $(addprefix $(BUILD)/tests/,test_zero_pause test_zero_pause_torn test_zero_pause_kept)
$(ZP_TEST_BINS): $(ZP_CHAIN_OBJS)
$(ZP_TEST_BINS): TEST_LIBS += $(ZP_CHAIN_OBJS)
$(ZP_TEST_BINS): TEST_CFLAGS += -Itests/zeropause
$(BUILD)/bench/bench_zero_pause: $(ZP_CHAIN_OBJS)
$(BUILD)/bench/bench_zero_pause: BENCH_LIBS += $(ZP_CHAIN_OBJS)
$(BUILD)/bench/bench_zero_pause: BENCH_CFLAGS += -Itests/zeropause

# --- aarch64 under qemu-user: zero-pause must refuse itself there -------
# (the syscall file shows the emulator's host thread). Capture part only,
# as the test-aarch64 lane of mk/capture.mk builds it.
$(BUILD)/aarch64/zp_qemu_check: tests/zeropause/qemu_check.c $(CAPTURE_A64_SRCS) $(HDRS)
	$(call msg,A64-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(AARCH64_CC) $(CAPTURE_A64_CFLAGS) -o $@ $< $(CAPTURE_A64_SRCS) -lcmocka

.PHONY: test-aarch64-zp
test-aarch64-zp: $(BUILD)/aarch64/zp_qemu_check
	$(Q)SPROBE_TEST_SLOW=1 SPROBE_TEST_QEMU=1 tools/run-tests.sh $(BUILD)/test-results/aarch64-zp.res \
		"$(QEMU_AARCH64) -L / $(BUILD)/aarch64/zp_qemu_check"
TEST_LANES += test-aarch64-zp

# Under ASan it captures in-process through signals too (see
# ASAN_CAPTURING_TESTS in mk/hardening.mk).
ASAN_CAPTURING_TESTS += test_zero_pause test_zero_pause_torn test_zero_pause_kept
