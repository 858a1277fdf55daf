# Hardening (docs/LIMITATIONS.md): sanitizer lanes, the ELF fuzzer, the
# failure-mode workload and the soak run.
#
#   make test-asan      library + every native test under ASan+UBSan (build/asan)
#   make test-tsan      table and stream tests under TSan (build/tsan)
#   make test-fuzz-elf  bounded libFuzzer run of ELF symbolization
#   make fuzz           every fuzz target, longer (FUZZ_LONG_SECONDS each)
#   make soak-service   SOAK_SECONDS (default 3600) of the service workload
#                       under the agent at SOAK_FREQ Hz; checks invariants
#                       (`make soak` runs it too, after the capture soak)
#
# The sanitizer lanes rebuild the whole library into their own BUILD
# directory through a recursive make, so nothing in build/ is touched. Tests
# that run programs (build/stackprobe, build/demo, the agent) still run the
# ordinary build's binaries: `make test` builds those first.

ASAN_BUILD := build/asan
TSAN_BUILD := build/tsan
SAN_CC ?= $(CC)
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
TSAN_FLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer

# Every native test, by name, as the top Makefile sees them.
# Windows tests (tests/test_windows_*.c) are built by mk/windows.mk only.
HARDEN_TEST_NAMES = $(filter-out $(ASAN_EXCLUDED_TESTS) test_windows_%,$(patsubst tests/%.c,%,$(TEST_SRCS)))
TSAN_TEST_NAMES := test_table test_table_hostile test_table_concurrency test_stream

# The capture copies a live stack (its own, from its signal handler) that
# holds other frames' ASan redzones; ASan's memcpy interceptor reports that
# as a stack-buffer-underflow in sprobe_lx_capture_handler (backends/linux/handler.c) although
# the copy is by design. The tests that capture real threads in-process run
# with the intrinsic interceptors off (instrumented loads and stores stay
# checked; memcpy/memset/memmove ranges do not). The alternative,
# __attribute__((no_sanitize_address)) plus a non-intercepted copy in the
# handler, would leave the window's copy unchecked in every build. Every
# other test is fully checked.
ASAN_CAPTURING_TESTS := test_unwind test_unwind_limits test_unwind_storage test_sampler_threads test_capture_torture test_pause test_pause_offcpu test_pause_merge \
			test_failure_modes test_failure_modes_signals test_failure_modes_dlclose \
			test_outputs test_outputs_html test_record test_record_agent test_blocked_perf test_zero_pause \
			test_carry test_capture_cpu_cost
# test_capture interposes malloc/calloc/free to prove the capture path does
# not allocate; ASan's runtime calls that malloc before it is initialised
# (dlsym during AsanInitInternal) and crashes. It cannot run under ASan and
# runs in the native lane only. test_capture_copy and test_capture_cpu were
# part of it (the split by theme kept the lanes as they were).
ASAN_EXCLUDED_TESTS := test_capture test_capture_copy test_capture_cpu
ASAN_OPTS_COMMON := detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0
ASAN_OPTS_CAPTURE := $(ASAN_OPTS_COMMON):replace_intrin=0:intercept_intrin=0
UBSAN_OPTS := print_stacktrace=1:halt_on_error=1

.PHONY: asan-build tsan-build test-asan test-tsan
asan-build:
	$(Q)$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) CC=$(SAN_CC) \
		CFLAGS='$(ASAN_FLAGS)' LDFLAGS='-fsanitize=address,undefined' \
		$(addprefix $(ASAN_BUILD)/tests/,$(HARDEN_TEST_NAMES))

# clang: gcc refuses atomic_thread_fence under -fsanitize=thread (-Werror=tsan,
# table/table.c uses one).
TSAN_CC ?= $(CLANG)
tsan-build:
	$(Q)$(MAKE) --no-print-directory BUILD=$(TSAN_BUILD) CC=$(TSAN_CC) \
		CFLAGS='$(TSAN_FLAGS)' LDFLAGS='-fsanitize=thread' \
		$(addprefix $(TSAN_BUILD)/tests/,$(TSAN_TEST_NAMES))

# One run-tests.sh invocation per test so each gets its own options.
# A lane whose build fails counts as one failed test (never as "nothing ran").
test-asan:
	$(Q)$(MAKE) --no-print-directory asan-build || \
		{ mkdir -p $(BUILD)/test-results; echo "0 1 0" > $(BUILD)/test-results/asan.res; exit 1; }
	$(Q)rm -f $(BUILD)/test-results/asan-*.res
	$(Q)for t in $(HARDEN_TEST_NAMES); do \
		case " $(ASAN_CAPTURING_TESTS) " in \
		*" $$t "*) opts='$(ASAN_OPTS_CAPTURE)';; *) opts='$(ASAN_OPTS_COMMON)';; esac; \
		ASAN_OPTIONS=$$opts UBSAN_OPTIONS='$(UBSAN_OPTS)' SPROBE_TEST_SANITIZER=asan \
		tools/run-tests.sh $(BUILD)/test-results/asan-$$t.res $(ASAN_BUILD)/tests/$$t \
		|| status=1; done; \
	cat $(BUILD)/test-results/asan-*.res | awk '{p+=$$1; f+=$$2; s+=$$3} \
		END {print p+0, f+0, s+0}' > $(BUILD)/test-results/asan.res; \
	rm -f $(BUILD)/test-results/asan-*.res; exit $${status:-0}

test-tsan:
	$(Q)$(MAKE) --no-print-directory tsan-build || \
		{ mkdir -p $(BUILD)/test-results; echo "0 1 0" > $(BUILD)/test-results/tsan.res; exit 1; }
	$(Q)TSAN_OPTIONS='halt_on_error=1:second_deadlock_stack=1' SPROBE_TEST_SANITIZER=tsan \
		tools/run-tests.sh $(BUILD)/test-results/tsan.res \
		$(addprefix $(TSAN_BUILD)/tests/,$(TSAN_TEST_NAMES))

TEST_LANES += test-asan test-tsan

# ---- ELF symbolization fuzzer --------------------------------------------
# tests/fuzz_elf.c drives modules.c + symbolize.c (compiled here with clang's
# fuzzer and sanitizers) on an inventory made with opts.empty whose one
# module is a temp file holding the input. libelf itself is the system's
# (not instrumented): a wild read there still crashes and is caught.
FUZZ_ELF := $(BUILD)/fuzz/fuzz_elf
FUZZ_ELF_SRCS := tests/fuzz_elf.c userspace/symbols/modules.c userspace/symbols/symbolize.c userspace/symbols/build_id.c userspace/symbols/plt.c userspace/symbols/debug_file.c userspace/common/fds.c \
	userspace/symbols/demangle_rust.c userspace/symbols/demangle_rust_v0.c userspace/symbols/demangle_out.c userspace/symbols/perfmap.c userspace/symbols/inline.c userspace/symbols/libdw_dl.c userspace/symbols/libelf_dl.c userspace/common/zlib_dl.c userspace/common/dl_table.c userspace/symbols/cfi_names.c userspace/symbols/debuginfod.c \
	userspace/symbols/dwarf_load.c userspace/symbols/dwarf_cache.c
FUZZ_ELF_RUN ?= -runs=100000 -max_total_time=20
FUZZ_LONG_SECONDS ?= 300

$(FUZZ_ELF): $(FUZZ_ELF_SRCS) userspace/symbols/modules_internal.h include/stackprobe/symbolize.h mk/hardening.mk
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(WARN) -Iinclude -I. -Iuserspace \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-o $@ $(FUZZ_ELF_SRCS) -ldw -lelf -lz -ldl

.PHONY: test-fuzz-elf fuzz fuzz-elf
test-fuzz-elf: $(FUZZ_ELF)
	$(Q)rm -rf $(BUILD)/fuzz/corpus-elf && mkdir -p $(BUILD)/fuzz/corpus-elf
	$(Q)tools/run-tests.sh $(BUILD)/test-results/fuzz-elf.res \
		"$(FUZZ_ELF) $(FUZZ_ELF_RUN) -timeout=10 -rss_limit_mb=2048 -max_len=65536 -artifact_prefix=$(BUILD)/fuzz/elf- $(BUILD)/fuzz/corpus-elf tests/corpus/elf"
TEST_LANES += test-fuzz-elf

fuzz-elf: $(FUZZ_ELF)
	$(Q)mkdir -p $(BUILD)/fuzz/corpus-elf
	$(FUZZ_ELF) -max_total_time=$(FUZZ_LONG_SECONDS) -timeout=10 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/elf- \
		$(BUILD)/fuzz/corpus-elf tests/corpus/elf

# All fuzz targets, each FUZZ_LONG_SECONDS (default 5 min): not part of
# `make test`. New inputs land in build/fuzz/corpus-*, crashes in build/fuzz/.
fuzz: $(FUZZ_ELF) $(FUZZ_TABLE) $(FUZZ_DATAFILE)
	$(Q)mkdir -p $(BUILD)/fuzz/corpus-table $(BUILD)/fuzz/corpus-datafile
	$(FUZZ_TABLE) -max_total_time=$(FUZZ_LONG_SECONDS) -print_final_stats=1 \
		-artifact_prefix=$(BUILD)/fuzz/table- $(BUILD)/fuzz/corpus-table tests/corpus/table
	$(FUZZ_DATAFILE) -max_total_time=$(FUZZ_LONG_SECONDS) -timeout=10 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/datafile- \
		$(BUILD)/fuzz/corpus-datafile tests/corpus/datafile
	$(Q)$(MAKE) --no-print-directory fuzz-elf

# ---- the service workload, failure modes, soak -------------------------
# tests/workloads/service/*.h are its parts, included by service.c.
$(BUILD)/service: tests/workloads/service.c $(wildcard tests/workloads/service/*.h) | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread \
		-o $@ $< -ldl

# Takes a signal through one libc entry point (test_signal_entry_points);
# several of them are deprecated, which is the point.
$(BUILD)/sigown: tests/workloads/sigown.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes \
		-Wno-deprecated-declarations -pthread -o $@ $<

all: $(BUILD)/service $(BUILD)/sigown
# The failure-mode tests, one theme per program (tests/test_failure_modes*.c).
FAILMODE_TEST_BINS := $(addprefix $(BUILD)/tests/,test_failure_modes test_failure_modes_signals \
	test_failure_modes_dlclose)
$(FAILMODE_TEST_BINS): $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/service \
	$(BUILD)/sigown $(BUILD)/tests/unwind_testlib/libsprobe_testlib.so

# make soak-service [SOAK_SECONDS=3600] [SOAK_FREQ=999] [SOAK_DL=100] [SOAK_REQUIRE_BPF=1]
# (`make soak` runs it after the capture soak of mk/capture.mk.) The service in rounds for SOAK_SECONDS under the agent at SOAK_FREQ Hz
# (each round also dlopen/dlclose SOAK_DL times), the eBPF companion attached
# (required unless SOAK_REQUIRE_BPF=0), RSS sampled every 250 ms. Bounded: the
# run is killed SOAK_SECONDS + 240 s after it starts, the test program
# SOAK_SECONDS + 600 s. The full output is kept in $(BUILD)/soak.log.
SOAK_SECONDS ?= 3600
SOAK_FREQ ?= 999
SOAK_DL ?= 100
SOAK_REQUIRE_BPF ?= 1
.PHONY: soak soak-service
soak: soak-service
soak-service: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/service $(BUILD)/tests/test_failure_modes
	$(Q)SPROBE_SOAK_SECONDS=$(SOAK_SECONDS) SPROBE_SOAK_FREQ=$(SOAK_FREQ) \
		SPROBE_SOAK_DL=$(SOAK_DL) SPROBE_SOAK_REQUIRE_BPF=$(SOAK_REQUIRE_BPF) \
		SPROBE_TEST_TIMEOUT=$$(( $(SOAK_SECONDS) + 600 )) \
		tools/run-tests.sh $(BUILD)/soak.res "$(BUILD)/tests/test_failure_modes test_soak" \
		> $(BUILD)/soak.log 2>&1; st=$$?; cat $(BUILD)/soak.log $(BUILD)/soak.res; exit $$st

# ---- the agent's descriptors (tests/test_agent_fds.c) --------------------
# A daemon-style program that closes, dup2s and raw-closes descriptors.
$(BUILD)/fdguest: tests/workloads/fdguest.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $<

all: $(BUILD)/fdguest
$(BUILD)/tests/test_agent_fds: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/fdguest

# ---- threads created with every signal blocked (tests/test_threads.c) ----
$(BUILD)/maskedworkers: tests/workloads/maskedworkers.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $<

all: $(BUILD)/maskedworkers
$(BUILD)/tests/test_threads: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/maskedworkers
# A small real program whose zlib workers block every signal once running
# (docs/PERFORMANCE.md "Threads that block the capture signal").
$(BUILD)/blockzip: tests/workloads/blockzip.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $< -lz

all: $(BUILD)/blockzip
# Threads that block every signal once running: the perf-event fallback,
# and its refusal under a seccomp filter (test_blocked_perf).
$(BUILD)/tests/test_blocked_perf: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/maskedworkers \
	$(BUILD)/noperf

# A workload periodic at F, for the wall-mode aliasing test (test_aliasing).
$(BUILD)/phased: tests/workloads/phased.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -o $@ $<

all: $(BUILD)/phased
$(BUILD)/tests/test_aliasing: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/phased

# Known CPU splits, for cpu mode's accuracy (test_cpuclock, bench/cpuclock.sh).
$(BUILD)/cpusplit: tests/workloads/cpusplit.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $<

# Runs a command with perf_event_open forbidden (seccomp), as containers do.
$(BUILD)/noperf: tests/workloads/noperf.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -o $@ $<

all: $(BUILD)/cpusplit $(BUILD)/noperf

# exit() from a plugin's constructor inside dlopen (test_failure_modes).
$(BUILD)/dlexit: tests/workloads/dlexit.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -o $@ $< -ldl
$(BUILD)/dlexit_plugin.so: tests/workloads/dlexit_plugin.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -fPIC -shared -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -o $@ $<
all: $(BUILD)/dlexit $(BUILD)/dlexit_plugin.so
$(FAILMODE_TEST_BINS): $(BUILD)/dlexit $(BUILD)/dlexit_plugin.so
$(BUILD)/tests/test_cpuclock: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/cpusplit $(BUILD)/maskedworkers \
	$(BUILD)/noperf
