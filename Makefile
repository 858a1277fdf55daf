# stackprobe — top-level Makefile.
#
# A few pattern rules in the libbpf-bootstrap manner. Every part is a folder;
# its sources are picked up by wildcard so adding a file needs no edit here.
# Part-specific rules (BPF skeletons, cross builds, extra test lanes) live in
# mk/<part>.mk, included at the bottom.
#
#   make            build/stackprobe, build/libstackprobe.{a,so}
#   make test       deps, build, run every test lane, print "N passed, N failed"
#   make run        deps, build, record the bundled demo and print the report
#   make bench      benchmarks (timing lives here, never in tests)
#   make install    PREFIX=/usr/local DESTDIR=
#   make deps       install missing Debian packages (apt-get, idempotent)
#   V=1             echo every command

.DELETE_ON_ERROR:
.SUFFIXES:

VERSION   := 0.1.0
BUILD     := build
PREFIX    ?= /usr/local
DESTDIR   ?=
CC        ?= cc
CLANG     ?= clang
BPFTOOL   ?= bpftool
AR        ?= ar

ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
ifeq ($(filter x86 arm64,$(ARCH)),)
$(error stackprobe builds on x86_64 and aarch64 only (uname -m says $(shell uname -m)))
endif

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

WARN    := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O2 -g
ALL_CFLAGS = $(CFLAGS) $(WARN) -std=gnu11 -fPIC -pthread -D_GNU_SOURCE \
	     -DSPROBE_VERSION='"$(VERSION)"' -Iinclude -I. -I$(BUILD) $(EXTRA_CFLAGS)
LIBS    := -lbpf -lelf -lz -lunwind-generic -lunwind -ldw -lpthread -lrt -lm
# The preloaded library links libc alone: it opens libbpf, libdw, libelf,
# zlib and libunwind on first use (userspace/pause/libbpf_dl.h,
# userspace/symbols/libdw_dl.h, userspace/symbols/libelf_dl.h,
# userspace/common/zlib_dl.h, userspace/unwind/libunwind_dl.h), so a
# program under `record` maps only those its agent uses (none while it
# walks no stack and names no pc itself).
SHLIB_LIBS = $(filter-out -lbpf -ldw -lelf -lz -lunwind-generic -lunwind,$(LIBS))
LDFLAGS ?=

# Library sources: every part's folder except the CLI, the agent and the
# tests. Platform code is chosen by folder: backends/<os>/ holds one
# operating system's capture backend ($(call lib_srcs,OS)).
lib_srcs = $(sort $(wildcard table/*.c backends/*.c backends/$(1)/*.c userspace/*.c) \
	$(filter-out userspace/agent/% userspace/cli/%,$(wildcard userspace/*/*.c)))
LIB_SRCS := $(call lib_srcs,linux)
LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
# The LD_PRELOAD agent (constructor + exec wrappers) goes into the shared
# library only: in the static one it would interpose execve on programs
# that merely embed the library.
AGENT_SRCS := $(sort $(wildcard userspace/agent/*.c))
AGENT_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(AGENT_SRCS))
CLI_SRCS := $(sort $(wildcard userspace/cli/*.c))
CLI_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRCS))
# Every header, for the lanes in mk/ that compile sources in one command
# (cross builds, fuzzers); objects built here track their own headers
# (-MMD, the .d files included at the bottom).
HDRS     := $(shell find include backends table userspace tests bpf -name '*.h' -not -path 'tests/corpus/*')

# Tests: tests/test_<part>.c -> build/tests/test_<part>, linked with the
# static library and cmocka. tests/*_helper.c are shared fixtures.
TEST_SRCS    := $(sort $(wildcard tests/test_*.c))
TEST_BINS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
TEST_HELPERS := $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard tests/*_helper.c)))
TEST_CFLAGS  ?=
BENCH_SRCS   := $(sort $(wildcard bench/bench_*.c))
BENCH_BINS   := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))

# Extra generated headers (BPF skeletons) that sources may include. Filled in
# by mk/bpf.mk; every library object waits for them.
GEN_HDRS :=
# Extra test lanes (qemu, wine, fuzz, sanitizers): names of phony targets
# that each write build/test-results/<lane>.res. Filled in by mk/*.mk.
TEST_LANES := test-native
BENCH_LANES :=

# ---- Darwin (macOS) ---------------------------------------------------------
# The whole difference lives in this block; on Linux it only defines the
# DARWIN_* lists, which `make check-macos` (mk/macos.mk) syntax-checks here.
# On macOS only the portable sources and the macOS ones are compiled: the
# Linux-only ones (BPF, libunwind, libelf, futex, per-thread CPU timers, the
# LD_PRELOAD agent) are left out, and so is every mk/ fragment but
# mk/macos.mk (their lanes are Linux, qemu or wine ones). The CLI is reduced
# to `report`. Tests: an allowlist of portable ones, plus tests/macos/ (added
# by mk/macos.mk). `make print-darwin-sources [UNAME_S=Darwin]` shows the
# lists. See docs/MACOS.md.
UNAME_S ?= $(shell uname -s)
SHLIB := $(BUILD)/libstackprobe.so
# The version script says what the preloaded library exports: the public
# API and the libc functions the agent interposes (see the file).
SHLIB_MAP := userspace/libstackprobe.map
SHLIB_LDFLAGS = -shared -Wl,-soname,libstackprobe.so.0 -Wl,-z,defs \
	-Wl,--version-script=$(SHLIB_MAP)
MK_FRAGMENTS := $(sort $(wildcard mk/*.mk))
DEPS_CMD := tools/deps.sh
DARWIN_EXCLUDED_SRCS := userspace/symbols/modules.c userspace/symbols/symbolize.c userspace/symbols/build_id.c userspace/symbols/plt.c userspace/symbols/debug_file.c \
	userspace/symbols/perfmap.c userspace/symbols/inline.c userspace/symbols/libdw_dl.c userspace/symbols/libelf_dl.c userspace/symbols/cfi_names.c userspace/symbols/debuginfod.c \
	userspace/symbols/debug_frame.c userspace/symbols/dwarf_load.c userspace/symbols/dwarf_cache.c \
	userspace/unwind/unwind.c userspace/unwind/access.c userspace/unwind/libunwind_dl.c userspace/common/zlib_dl.c userspace/common/dl_table.c userspace/unwind/go_preempt.c userspace/pause/pause.c userspace/pause/libbpf_dl.c userspace/datafile/stream.c userspace/sampler/sampler.c userspace/sampler/probe.c userspace/sampler/threads.c userspace/sampler/resolve.c userspace/sampler/emit.c userspace/sampler/blocked_perf.c \
	userspace/datafile/merge.c userspace/external/perf_tree.c userspace/external/perf_attach.c userspace/external/perf_part.c userspace/external/perf_kernel.c userspace/external/xsample.c userspace/common/enterable.c \
	userspace/unwind/access_file.c userspace/external/perm.c userspace/common/ctl_line.c table/table_win.c \
	userspace/report/debuginfod.c
DARWIN_LIB_SRCS := $(filter-out $(DARWIN_EXCLUDED_SRCS),$(call lib_srcs,macos))
DARWIN_CLI_SRCS := userspace/cli/main.c userspace/cli/cmd_report.c userspace/cli/cmd_diff.c userspace/cli/report_input.c userspace/cli/parse.c userspace/cli/macos/unavailable.c
DARWIN_TEST_SRCS := $(filter $(addprefix tests/,test_table.c test_table_hostile.c test_table_concurrency.c \
	test_datafile.c test_report.c test_report_json.c test_report_cli.c test_cli.c),$(TEST_SRCS))
ifeq ($(UNAME_S),Darwin)
ifeq ($(origin CC),default)
CC := clang
endif
LIBS := -lz -lpthread -lm
SHLIB := $(BUILD)/libstackprobe.dylib
# ld64 has no version scripts; hidden visibility alone limits the exports
# to the SPROBE_API functions (there is no agent to interpose on macOS).
SHLIB_MAP :=
SHLIB_LDFLAGS = -dynamiclib -install_name @rpath/libstackprobe.0.dylib \
	-compatibility_version 0.1.0 -current_version $(VERSION)
MK_FRAGMENTS := mk/macos.mk
DEPS_CMD := echo "deps: macOS: nothing installed (CI: brew install cmocka coreutils)"
LIB_SRCS := $(DARWIN_LIB_SRCS)
LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
AGENT_OBJS :=
CLI_SRCS := $(DARWIN_CLI_SRCS)
CLI_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRCS))
TEST_SRCS := $(DARWIN_TEST_SRCS)
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
BENCH_BINS :=
endif

# Library objects are compiled hidden: only functions declared SPROBE_API
# (include/stackprobe/api.h) are visible outside the shared library, so the
# helpers shared between its files (ro_*, private sprobe_*) cannot replace
# a preloaded program's own. Static linking (tests, CLI, benches) is not
# affected. The agent's objects keep default visibility: every non-static
# function there is a libc wrapper that must be exported, and the version
# script is the one list of them.
$(LIB_OBJS): OBJ_CFLAGS += -fvisibility=hidden

.PHONY: all lib cli tests benches test run bench install uninstall clean deps
all: lib cli

-include $(MK_FRAGMENTS)

.PHONY: print-darwin-sources
print-darwin-sources:
	@echo "UNAME_S=$(UNAME_S)"
	@echo "DARWIN_LIB_SRCS=$(DARWIN_LIB_SRCS)"
	@echo "DARWIN_CLI_SRCS=$(DARWIN_CLI_SRCS)"
	@echo "DARWIN_TEST_SRCS=$(DARWIN_TEST_SRCS)"
	@echo "LIB_SRCS=$(LIB_SRCS)"
	@echo "CLI_SRCS=$(CLI_SRCS)"
	@echo "TEST_BINS=$(TEST_BINS)"
	@echo "TEST_LANES=$(TEST_LANES)"
	@echo "MK_FRAGMENTS=$(MK_FRAGMENTS)"
	@echo "SHLIB=$(SHLIB)"
	@echo "LIBS=$(LIBS)"

lib: $(BUILD)/libstackprobe.a $(SHLIB)
cli: $(BUILD)/stackprobe
tests: $(TEST_BINS)
benches: $(BENCH_BINS)

$(BUILD)/obj/%.o: %.c | $(BUILD) $(GEN_HDRS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(OBJ_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libstackprobe.a: $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# The pause companion's object goes last: its ~700 KB of read-only data
# (the BPF object embedded by its skeleton) then ends .rodata instead of
# sitting between the small tables and strings the agent reads, so the
# kernel's fault-around (64 KiB windows of the page cache) maps fewer of
# its pages into every preloaded program (docs/PERFORMANCE.md, "What the
# agent costs its target").
SHLIB_LAST_OBJS := $(filter %/userspace/pause/pause.o,$(LIB_OBJS))
$(SHLIB): $(LIB_OBJS) $(AGENT_OBJS) $(SHLIB_MAP)
	$(call msg,LD,$@)
	$(Q)$(CC) $(SHLIB_LDFLAGS) -o $@ $(filter-out $(SHLIB_LAST_OBJS),$(filter %.o,$^)) \
		$(SHLIB_LAST_OBJS) $(LDFLAGS) $(SHLIB_LIBS) -ldl

$(BUILD)/stackprobe: $(CLI_OBJS) $(BUILD)/libstackprobe.a
	$(call msg,LD,$@)
	$(Q)$(CC) -o $@ $(CLI_OBJS) $(BUILD)/libstackprobe.a $(LDFLAGS) $(LIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_HELPERS) $(BUILD)/libstackprobe.a | $(GEN_HDRS)
	$(call msg,TEST-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(TEST_CFLAGS) -MMD -MP -Itests -o $@ $< $(TEST_HELPERS) \
		$(BUILD)/libstackprobe.a $(LDFLAGS) $(LIBS) -lcmocka $(TEST_LIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libstackprobe.a | $(GEN_HDRS)
	$(call msg,BENCH-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(BENCH_CFLAGS) -MMD -MP -Itests -Ibench -o $@ $< \
		$(BUILD)/libstackprobe.a $(LDFLAGS) $(LIBS) $(BENCH_LIBS)

$(BUILD):
	$(Q)mkdir -p $@

deps:
	$(Q)$(DEPS_CMD)

# The README's test command. Each lane writes its counts; the summary sums
# them and fails if any test failed or any lane ran nothing.
test: deps
	$(Q)$(MAKE) --no-print-directory all tests
	$(Q)rm -rf $(BUILD)/test-results && mkdir -p $(BUILD)/test-results
	$(Q)status=0; for lane in $(TEST_LANES); do \
		$(MAKE) --no-print-directory $$lane || status=1; done; \
	tools/test-summary.sh $(BUILD)/test-results || status=1; exit $$status

test-native: $(TEST_BINS)
	$(Q)tools/run-tests.sh $(BUILD)/test-results/native.res $(TEST_BINS)

run: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory run-demo

bench: deps
	$(Q)$(MAKE) --no-print-directory all benches
	$(Q)for b in $(BENCH_BINS); do echo "== $$b"; $$b || exit 1; done
	$(Q)for lane in $(BENCH_LANES); do $(MAKE) --no-print-directory $$lane || exit 1; done

install: all
	$(if $(filter Darwin,$(UNAME_S)),$(error make install is Linux-only for now (see docs/MACOS.md)))
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib \
		$(DESTDIR)$(PREFIX)/include/stackprobe $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 0755 $(BUILD)/stackprobe $(DESTDIR)$(PREFIX)/bin/stackprobe
	install -m 0644 $(BUILD)/libstackprobe.a $(DESTDIR)$(PREFIX)/lib/libstackprobe.a
	install -m 0755 $(BUILD)/libstackprobe.so $(DESTDIR)$(PREFIX)/lib/libstackprobe.so.$(VERSION)
	ln -sf libstackprobe.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libstackprobe.so.0
	ln -sf libstackprobe.so.0 $(DESTDIR)$(PREFIX)/lib/libstackprobe.so
	install -m 0644 include/stackprobe.h $(DESTDIR)$(PREFIX)/include/stackprobe.h
	install -m 0644 include/stackprobe/*.h $(DESTDIR)$(PREFIX)/include/stackprobe/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
		tools/stackprobe.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/stackprobe.pc
	$(INSTALL_EXTRA)

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/stackprobe $(DESTDIR)$(PREFIX)/lib/libstackprobe.* \
		$(DESTDIR)$(PREFIX)/include/stackprobe.h $(DESTDIR)$(PREFIX)/lib/pkgconfig/stackprobe.pc
	rm -rf $(DESTDIR)$(PREFIX)/include/stackprobe

clean:
	rm -rf $(BUILD)

# Header dependencies the compiler wrote (-MMD -MP).
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
