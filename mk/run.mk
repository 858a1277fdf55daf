# make run: the main job on the bundled demo workload.
#
# The demo is built -O2 without frame pointers on purpose: its function
# names only come out through DWARF unwinding.
DEMO_SECONDS ?= 3

$(BUILD)/demo: tests/workloads/demo.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -fomit-frame-pointer -std=gnu11 -D_GNU_SOURCE $(WARN) -pthread -o $@ $<

all: $(BUILD)/demo

.PHONY: run-demo
run-demo: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/demo
	$(Q)echo "== stackprobe record -o $(BUILD)/demo.data -- $(BUILD)/demo $(DEMO_SECONDS)"
	$(Q)$(BUILD)/stackprobe record -o $(BUILD)/demo.data -- $(BUILD)/demo $(DEMO_SECONDS)
	$(Q)echo
	$(Q)echo "== the same data as folded stacks (first lines): stackprobe report -i $(BUILD)/demo.data --format folded"
	$(Q)$(BUILD)/stackprobe report -i $(BUILD)/demo.data --format folded | sort -t' ' -k2 -nr | head -n 8

# Workloads the end-to-end tests run (tests/test_record*.c).
$(BUILD)/victim: tests/workloads/victim.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -Wno-missing-prototypes -pthread -o $@ $<

all: $(BUILD)/victim
$(BUILD)/tests/test_record $(BUILD)/tests/test_record_agent: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/demo $(BUILD)/victim
