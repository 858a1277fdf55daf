# stackprobe diff (userspace/report/diff*.c, shares.c, stats.c): its test
# records tests/workloads/cpusplit.c with the CLI.
$(BUILD)/tests/test_diff: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/cpusplit
