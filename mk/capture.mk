# Capture backend (backends/, userspace/unwind/unwind_fp.c): per-test flags, the
# aarch64 lane under qemu-user, the unsupported-platform lane, the handler
# check, make soak.

# The known-stack test needs frame pointers in the test's own functions.
$(BUILD)/tests/test_capture $(BUILD)/tests/test_capture_copy $(BUILD)/tests/test_capture_cpu: \
	TEST_CFLAGS += -fno-omit-frame-pointer
$(BUILD)/tests/test_capture_torture: TEST_CFLAGS += -fno-omit-frame-pointer

# --- aarch64 under qemu-user -------------------------------------------
# Cross-builds only the capture part (backend + snapshot + FP unwinder) and
# its tests: the rest of the library needs arm64 libbpf/libdw we do not
# install. qemu-user delivers a signal in up to ~0.5 s: SPROBE_TEST_SLOW=1
# makes the tests use long deadlines and small counts; nothing is timed.
AARCH64_CC   ?= aarch64-linux-gnu-gcc
QEMU_AARCH64 ?= qemu-aarch64
CAPTURE_PORTABLE_SRCS := backends/capture.c backends/snapshot.c backends/names.c userspace/unwind/unwind_fp.c
# The Linux backend, one mechanism per file (backends/linux/linux.h). Used
# by the lanes of mk/unwind.mk and mk/zeropause.mk too (included after this).
CAPTURE_LINUX_SRCS := $(sort $(wildcard backends/linux/*.c))
CAPTURE_A64_SRCS := $(CAPTURE_PORTABLE_SRCS) $(CAPTURE_LINUX_SRCS) userspace/common/fds.c userspace/common/zalloc.c
CAPTURE_A64_CFLAGS = -O2 -g $(WARN) -std=gnu11 -pthread -D_GNU_SOURCE \
	-Iinclude -I. -Ibackends -Itests -fno-omit-frame-pointer

# The capture tests, one theme per program (tests/test_capture*.c but the
# torture, which has no aarch64 build).
CAPTURE_A64_TESTS := test_capture test_capture_copy test_capture_cpu
CAPTURE_A64_BINS := $(addprefix $(BUILD)/aarch64/,$(CAPTURE_A64_TESTS))

$(CAPTURE_A64_BINS): $(BUILD)/aarch64/%: tests/%.c $(CAPTURE_A64_SRCS) $(HDRS) tests/capture_fixture.h
	$(call msg,A64-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(AARCH64_CC) $(CAPTURE_A64_CFLAGS) -o $@ $< $(CAPTURE_A64_SRCS) -lcmocka

.PHONY: test-aarch64
test-aarch64: $(CAPTURE_A64_BINS)
	$(Q)SPROBE_TEST_SLOW=1 SPROBE_TEST_QEMU=1 tools/run-tests.sh $(BUILD)/test-results/aarch64.res \
		$(foreach t,$(CAPTURE_A64_BINS),"$(QEMU_AARCH64) -L / $(t)")
TEST_LANES += test-aarch64

# --- unsupported platforms ----------------------------------------------
# Builds the portable half with backends/unsupported/ instead of backends/linux/
# and checks that every capture says -ENOTSUP (never an empty snapshot).
$(BUILD)/unsupported/capture_unsupported: tests/capture_unsupported.c $(CAPTURE_PORTABLE_SRCS) backends/unsupported/capture.c $(HDRS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g $(WARN) -std=gnu11 -pthread -D_GNU_SOURCE \
		-Iinclude -I. -Ibackends -Itests -o $@ $< $(CAPTURE_PORTABLE_SRCS) backends/unsupported/capture.c -lcmocka

.PHONY: test-unsupported
test-unsupported: $(BUILD)/unsupported/capture_unsupported
	$(Q)tools/run-tests.sh $(BUILD)/test-results/unsupported.res $<
TEST_LANES += test-unsupported

# --- the handler calls only async-signal-safe functions -------------------
# backends/linux/handler.c holds the suspend window's code and nothing else
# (the rule in backends/linux/linux.h), so what it calls is what `nm -u`
# lists for its object: each name must be in backends/linux/handler.allow.
# Checked on the library's object and on an aarch64 build of it (outline
# atomics, other inlining); the self-test shows the check fails, naming the
# call, on an object that calls malloc.
HANDLER_OBJ := $(BUILD)/obj/backends/linux/handler.o
HANDLER_A64_OBJ := $(BUILD)/aarch64/handler.o
HANDLER_ALLOW := backends/linux/handler.allow

$(HANDLER_A64_OBJ): backends/linux/handler.c $(HDRS)
	$(call msg,A64-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(AARCH64_CC) $(CAPTURE_A64_CFLAGS) -c $< -o $@

.PHONY: test-handler-nm
test-handler-nm: $(HANDLER_OBJ) $(HANDLER_A64_OBJ) $(HANDLER_ALLOW) tests/handler_nm_test.sh
	$(Q)tools/run-tests.sh $(BUILD)/test-results/handler-nm.res \
		"tests/handler_nm_test.sh check $(HANDLER_ALLOW) $(HANDLER_OBJ)" \
		"tests/handler_nm_test.sh check $(HANDLER_ALLOW) $(HANDLER_A64_OBJ)" \
		"tests/handler_nm_test.sh selftest $(HANDLER_ALLOW)"
TEST_LANES += test-handler-nm

# --- soak: 10^5 torture captures (not part of make test; `make soak` runs
# it before the service soak of mk/hardening.mk) ---------------------------
.PHONY: soak-capture
soak: soak-capture
soak-capture: $(BUILD)/tests/test_capture_torture
	$(Q)SPROBE_TORTURE_CAPTURES=100000 SPROBE_TEST_TIMEOUT=14400 \
		tools/run-tests.sh $(BUILD)/soak-results/soak.res $<
