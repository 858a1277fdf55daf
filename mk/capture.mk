# Capture backend (backends/, userspace/unwind_fp.c): per-test flags, the
# aarch64 lane under qemu-user, the unsupported-platform lane, make soak.

# The known-stack test needs frame pointers in the test's own functions.
$(BUILD)/tests/test_capture: TEST_CFLAGS += -fno-omit-frame-pointer
$(BUILD)/tests/test_capture_torture: TEST_CFLAGS += -fno-omit-frame-pointer
