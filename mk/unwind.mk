# Deferred unwinding, module inventory and symbolization (userspace/unwind/unwind.c,
# modules.c, symbolize.c): test libraries, per-test flags, the aarch64 lane.

UNWIND_LIBDIR := $(BUILD)/tests/unwind_testlib
UNWIND_LIBSRC := tests/unwind_testlib/testlib.c
UNWIND_LIBCFLAGS := -O2 -g -fPIC -shared -fomit-frame-pointer -fasynchronous-unwind-tables
OBJCOPY ?= objcopy
STRIP ?= strip
READELF ?= readelf

# The same code four ways: full .symtab; stripped (.dynsym only); stripped
# with its debug file under debug/.build-id/; stripped with a .gnu_debuglink
# and no build-id (so only the link can find the debug file).
UNWIND_TESTLIBS := $(UNWIND_LIBDIR)/libsprobe_testlib.so \
		   $(UNWIND_LIBDIR)/libsprobe_testlib_stripped.so \
		   $(UNWIND_LIBDIR)/libsprobe_testlib_bid.so \
		   $(UNWIND_LIBDIR)/libsprobe_testlib_link.so

$(UNWIND_LIBDIR)/libsprobe_testlib.so: $(UNWIND_LIBSRC)
	$(call msg,TESTLIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNWIND_LIBCFLAGS) -Wl,-soname,$(@F) -o $@ $<

$(UNWIND_LIBDIR)/libsprobe_testlib_stripped.so: $(UNWIND_LIBSRC)
	$(call msg,TESTLIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNWIND_LIBCFLAGS) -Wl,-soname,$(@F) -o $@.tmp $<
	$(Q)$(STRIP) --strip-all -o $@ $@.tmp && rm -f $@.tmp

$(UNWIND_LIBDIR)/libsprobe_testlib_bid.so: $(UNWIND_LIBSRC)
	$(call msg,TESTLIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNWIND_LIBCFLAGS) -Wl,--build-id=sha1 -Wl,-soname,$(@F) -o $@.tmp $<
	$(Q)id=$$($(READELF) -n $@.tmp | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p'); \
	  test -n "$$id" || { echo "no build-id in $@.tmp" >&2; exit 1; }; \
	  dir=$(UNWIND_LIBDIR)/debug/.build-id/$$(echo $$id | cut -c1-2); \
	  mkdir -p $$dir && \
	  $(OBJCOPY) --only-keep-debug $@.tmp $$dir/$$(echo $$id | cut -c3-).debug
	$(Q)$(STRIP) --strip-all -o $@ $@.tmp && rm -f $@.tmp

$(UNWIND_LIBDIR)/libsprobe_testlib_link.so: $(UNWIND_LIBSRC)
	$(call msg,TESTLIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNWIND_LIBCFLAGS) -Wl,--build-id=none -Wl,-soname,$(@F) -o $@.tmp $<
	$(Q)$(OBJCOPY) --only-keep-debug $@.tmp $(UNWIND_LIBDIR)/libsprobe_testlib_link.debug
	$(Q)$(STRIP) --strip-all $@.tmp
	$(Q)cd $(UNWIND_LIBDIR) && $(OBJCOPY) \
	  --add-gnu-debuglink=libsprobe_testlib_link.debug $(@F).tmp $(@F) && rm -f $(@F).tmp

# PLT stubs named "<function>@plt" (userspace/symbols/plt.c): a stripped
# library calling libc through its lazy .plt, and on x86_64 the same with
# IBT stubs in .plt.sec (-z ibtplt: ld makes them whatever the inputs say).
UNWIND_PLTSRC := tests/unwind_testlib/pltlib.c
UNWIND_PLTLIBS := $(UNWIND_LIBDIR)/libsprobe_pltlib.so
ifeq ($(ARCH),x86)
UNWIND_PLTLIBS += $(UNWIND_LIBDIR)/libsprobe_pltlib_ibt.so
$(UNWIND_LIBDIR)/libsprobe_pltlib_ibt.so: PLTLIB_LDFLAGS := -Wl,-z,ibtplt
endif

$(UNWIND_PLTLIBS): $(UNWIND_PLTSRC)
	$(call msg,TESTLIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -fPIC -shared $(PLTLIB_LDFLAGS) -Wl,-soname,$(@F) -o $@.tmp $<
	$(Q)$(STRIP) --strip-all -o $@ $@.tmp && rm -f $@.tmp

$(BUILD)/tests/test_symbolize: $(UNWIND_TESTLIBS) $(UNWIND_PLTLIBS)
# The unwind tests, one theme per program (tests/test_unwind*.c).
UNWIND_TEST_NAMES := test_unwind test_unwind_limits test_unwind_storage
$(addprefix $(BUILD)/tests/,$(UNWIND_TEST_NAMES)): $(UNWIND_TESTLIBS)
# The known-stack test: callers must be found by CFI, not frame pointers.
$(addprefix $(BUILD)/tests/,$(UNWIND_TEST_NAMES)): TEST_CFLAGS += -O2 -fomit-frame-pointer -fasynchronous-unwind-tables
$(BUILD)/tests/test_symbolize: TEST_CFLAGS += -O2 -DSPROBE_TEST_CORPUS='"$(CURDIR)/tests/corpus"'
# Both walkers must see the same 35 frames: frame pointers on.
$(BUILD)/bench/bench_unwind: BENCH_CFLAGS += -O2 -fno-omit-frame-pointer

# --- aarch64 under qemu-user ----------------------------------------------
# Cross-builds the capture backend, the FP walker and this part against the
# arm64 libunwind/libelf/cmocka (tools/deps.d/unwind.list), then runs the
# unwind tests under qemu-aarch64: the DWARF known-stack test and the rest
# (blocked in libc, dlopen'ed library, no-CFI fallback, truncation, random
# bytes...). Signals take up to ~0.5 s there: SPROBE_TEST_SLOW=1 gives
# generous deadlines; nothing is timed. SPROBE_TEST_QEMU=1 skips, saying why,
# the tests qemu-user cannot host (its signal trampoline has no CFI; another
# process's /proc/PID/maps is the host's view).
UNWIND_A64_CC   ?= aarch64-linux-gnu-gcc
UNWIND_A64_STRIP ?= aarch64-linux-gnu-strip
UNWIND_QEMU     ?= qemu-aarch64
UNWIND_A64_DIR  := $(BUILD)/aarch64-unwind
UNWIND_A64_SRCS := backends/capture.c backends/snapshot.c backends/names.c $(CAPTURE_LINUX_SRCS) userspace/unwind/unwind_fp.c \
		   userspace/unwind/unwind.c userspace/unwind/access.c userspace/unwind/access_file.c userspace/unwind/libunwind_dl.c userspace/unwind/go_preempt.c userspace/symbols/modules.c userspace/symbols/symbolize.c userspace/symbols/build_id.c userspace/symbols/plt.c userspace/symbols/debug_file.c userspace/common/fds.c userspace/common/zalloc.c \
		   userspace/symbols/demangle_rust.c userspace/symbols/demangle_rust_v0.c userspace/symbols/demangle_out.c userspace/symbols/perfmap.c userspace/symbols/inline.c userspace/symbols/libdw_dl.c userspace/symbols/libelf_dl.c userspace/common/zlib_dl.c userspace/common/dl_table.c userspace/symbols/cfi_names.c userspace/symbols/debug_frame.c userspace/symbols/debuginfod.c \
		   userspace/symbols/dwarf_load.c userspace/symbols/dwarf_cache.c userspace/sampler/resolve.c
UNWIND_A64_CFLAGS = -O2 -g $(WARN) -std=gnu11 -pthread -D_GNU_SOURCE -Iinclude -I. -Ibackends \
		    -Itests -fomit-frame-pointer -fasynchronous-unwind-tables

$(UNWIND_A64_DIR)/unwind_testlib/libsprobe_testlib_stripped.so: $(UNWIND_LIBSRC)
	$(call msg,A64-LIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(UNWIND_A64_CC) $(UNWIND_LIBCFLAGS) -Wl,-soname,$(@F) -o $@.tmp $<
	$(Q)$(UNWIND_A64_STRIP) --strip-all -o $@ $@.tmp && rm -f $@.tmp

UNWIND_A64_BINS := $(addprefix $(UNWIND_A64_DIR)/,$(UNWIND_TEST_NAMES))
$(UNWIND_A64_BINS): $(UNWIND_A64_DIR)/%: tests/%.c $(UNWIND_A64_SRCS) $(HDRS) \
		$(UNWIND_A64_DIR)/unwind_testlib/libsprobe_testlib_stripped.so
	$(call msg,A64-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(UNWIND_A64_CC) $(UNWIND_A64_CFLAGS) -o $@ $< $(UNWIND_A64_SRCS) \
		-lunwind-generic -lunwind -ldw -lelf -lz -lcmocka -ldl

.PHONY: test-aarch64-unwind
test-aarch64-unwind: $(UNWIND_A64_BINS)
	$(Q)SPROBE_TEST_SLOW=1 SPROBE_TEST_QEMU=1 tools/run-tests.sh \
		$(BUILD)/test-results/aarch64-unwind.res \
		$(foreach t,$(UNWIND_A64_BINS),"$(UNWIND_QEMU) -L / $(t)")
TEST_LANES += test-aarch64-unwind

# A C++ chain through frames with cleanups (personality + LSDA FDEs):
# test_record_agent checks walks go through them.
# No frame pointers: the walk must come from the CFI.
$(BUILD)/cxxcleanup: tests/workloads/cxxcleanup.cc | $(BUILD)
	$(call msg,CXX,$@)
	$(Q)g++ -O2 -g -fomit-frame-pointer -fasynchronous-unwind-tables -o $@ $<
all: $(BUILD)/cxxcleanup
$(BUILD)/tests/test_record_agent: $(BUILD)/cxxcleanup
