# On demand: `stackprobe record -p PID` against a service whose agent is
# idle (tests/test_ondemand*.c, docs/AGENT.md "On demand").
$(BUILD)/odservice: tests/workloads/odservice.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $<

all: $(BUILD)/odservice
$(BUILD)/tests/test_ondemand $(BUILD)/tests/test_ondemand_continuous $(BUILD)/tests/test_ondemand_agent: \
	$(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/odservice
