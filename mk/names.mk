# Names: Rust demangling, JIT maps, inlined frames and lines.
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

# tests/test_inline.c: a hot static inline function, -O2 -g (the build
# users profile), compared with addr2line -i and go tool pprof -lines.
$(BUILD)/inlined: tests/workloads/inlined.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -o $@ $<

all: $(BUILD)/inlined
$(BUILD)/tests/test_inline: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/inlined
# record's source-line pass (userspace/cli/record_lines.c), tested directly.
$(BUILD)/tests/test_inline: $(BUILD)/obj/userspace/cli/record_lines.o
$(BUILD)/tests/test_inline: TEST_LIBS += $(BUILD)/obj/userspace/cli/record_lines.o $(BUILD)/libstackprobe.a

# tests/test_dwarf_load.c: the same program with zlib-compressed debug
# sections (-gz=zlib), the files userspace/symbols/dwarf_load.c inflates.
$(BUILD)/inlined-gz: tests/workloads/inlined.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -gz=zlib -std=gnu11 $(WARN) -o $@ $<

$(BUILD)/tests/test_dwarf_load: $(BUILD)/inlined $(BUILD)/inlined-gz

# tests/test_stripped.c: a program built -O2 and stripped (strip -s), the
# way distributions ship binaries; the unstripped copy (.full) is the
# test's reference for where hot_fn is.
$(BUILD)/stripped.full: tests/workloads/stripped.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -std=gnu11 $(WARN) -o $@ $<
$(BUILD)/stripped: $(BUILD)/stripped.full
	$(call msg,STRIP,$@)
	$(Q)strip -s -o $@ $<

all: $(BUILD)/stripped
$(BUILD)/tests/test_stripped: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/stripped

# tests/test_stripped.c's debuginfod test: the same program built -O2 -g,
# its debug file kept apart (what debuginfod -F serves), the binary
# stripped.
$(BUILD)/stripped_g.full: tests/workloads/stripped.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -o $@ $<
$(BUILD)/debuginfod-src/stripped_g.debug: $(BUILD)/stripped_g.full
	$(call msg,OBJCOPY,$@)
	$(Q)mkdir -p $(@D)
	$(Q)objcopy --only-keep-debug $< $@
$(BUILD)/stripped_g: $(BUILD)/stripped_g.full
	$(call msg,STRIP,$@)
	$(Q)strip -s -o $@ $<

all: $(BUILD)/stripped_g $(BUILD)/debuginfod-src/stripped_g.debug
$(BUILD)/tests/test_stripped: $(BUILD)/stripped_g $(BUILD)/debuginfod-src/stripped_g.debug
