# Captures cause no EINTR in the program (tests/test_eintr.c,
# userspace/agent/wait_wrappers.c, userspace/agent/handler_table.c).
#
# build/waiter: threads waiting in each call a handler interrupts whatever
# SA_RESTART says; the test runs it under `stackprobe record -F 999`.
$(BUILD)/waiter: tests/workloads/waiter.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $<

all: $(BUILD)/waiter
$(BUILD)/tests/test_eintr: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/waiter

