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

$(BUILD)/tests/test_zero_pause: $(ZP_CHAIN_OBJS)
$(BUILD)/tests/test_zero_pause: TEST_LIBS += $(ZP_CHAIN_OBJS)
$(BUILD)/tests/test_zero_pause: TEST_CFLAGS += -Itests/zeropause
$(BUILD)/bench/bench_zero_pause: $(ZP_CHAIN_OBJS)
$(BUILD)/bench/bench_zero_pause: BENCH_LIBS += $(ZP_CHAIN_OBJS)
$(BUILD)/bench/bench_zero_pause: BENCH_CFLAGS += -Itests/zeropause
