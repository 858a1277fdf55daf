# ---- many threads (tests/test_carry.c, bench/threads.py) ----
# Blocked threads carried forward in wall mode (docs/capture.md "Many
# threads"); the bench measures rate, drops, CPU and memory at 10 to
# 10 000 idle threads plus 2 busy ones against perf (docs/PERFORMANCE.md
# "Many threads").
$(BUILD)/tests/test_carry: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/idlethreads

BENCH_THREADS_ARGS ?=

.PHONY: bench-threads
bench-threads: $(BUILD)/idlethreads $(BUILD)/stackprobe $(BUILD)/libstackprobe.so \
		$(BUILD)/bench/capture_times
	$(Q)python3 bench/threads.py --build $(BUILD) $(BENCH_THREADS_ARGS)

BENCH_LANES += bench-threads
