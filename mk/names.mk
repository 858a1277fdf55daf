# Names (issue #22): Rust demangling, JIT maps, inlined frames and lines.
# tests/test_demangle.c records a Rust program it builds with rustc
# (tests/workloads/rusthot.rs), so it needs the CLI and the agent.
$(BUILD)/tests/test_demangle: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so
