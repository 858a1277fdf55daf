# Names (issue #22): Rust demangling, JIT maps, inlined frames and lines.
# tests/test_demangle.c records a Rust program it builds with rustc
# (tests/workloads/rusthot.rs), so it needs the CLI and the agent.
$(BUILD)/tests/test_demangle: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so

# tests/test_perfmap.c records this small JIT (a loop generated at run time,
# named in /tmp/perf-PID.map).
$(BUILD)/jitloop: tests/workloads/jitloop.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -o $@ $<

all: $(BUILD)/jitloop
$(BUILD)/tests/test_perfmap: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/jitloop
