# ---- the process tree (tests/test_tree.c, tests/test_tree_programs.c) --
# build/treework: forks, exec chains, a killed child, _exit; build/treework-static:
# the same program linked statically (the agent cannot enter it).
$(BUILD)/treework: tests/workloads/treework.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $<
$(BUILD)/treework-static: tests/workloads/treework.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -static -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $<

all: $(BUILD)/treework $(BUILD)/treework-static
$(BUILD)/tests/test_tree $(BUILD)/tests/test_tree_programs: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/treework $(BUILD)/treework-static $(BUILD)/inlined

# The process-tree benchmark: a make -j2 build unprofiled, under record
# (wall 99, cpu 999) and under perf record -g, interleaved; the agent's
# start-up cost per process; CPU share by program against perf's.
BENCH_TREE_ARGS ?= --files 120 --rounds 5
.PHONY: bench-tree
bench-tree: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so
	$(Q)python3 bench/tree_build.py --build $(BUILD) $(BENCH_TREE_ARGS)
BENCH_LANES += bench-tree
