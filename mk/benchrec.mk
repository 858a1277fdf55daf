# The record benchmark: stackprobe record against perf and
# gperftools on one workload. Timing only: `make bench` runs it, `make test`
# never does.
#
#   make bench-record                 full run (~several minutes)
#   make bench-record BENCH_RECORD_ARGS=--quick
#   make bench-record-overhead        stackprobe's own threads' share of the
#                                     workload's CPU (schedstat), 5 runs
#   make bench-record-breakdown       where stackprobe's own CPU goes (perf
#                                     profile of stackprobe record + the probe
#                                     thread's schedstat); not in `make bench`
#
# The driver is bench/record_vs.py; its packages (linux-perf,
# google-perftools, python3) are in tools/deps.d/benchrec.list, which the
# `deps` prerequisite of `make bench` installs.
BENCH_RECORD_ARGS ?=

$(BUILD)/benchload: tests/workloads/benchload.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes -pthread -o $@ $<

.PHONY: bench-record
bench-record: $(BUILD)/benchload $(BUILD)/stackprobe $(BUILD)/libstackprobe.so
	$(Q)python3 bench/record_vs.py --build $(BUILD) $(BENCH_RECORD_ARGS)

BENCH_BREAKDOWN_ARGS ?= --breakdown wall@999,cpu@999,cpu@99

.PHONY: bench-record-breakdown
bench-record-breakdown: $(BUILD)/benchload $(BUILD)/stackprobe $(BUILD)/libstackprobe.so
	$(Q)python3 bench/record_vs.py --build $(BUILD) $(BENCH_BREAKDOWN_ARGS)

# stackprobe's own threads (probe + writer) as a share of the workload's
# CPU, from schedstat, no perf: 5 runs per mode and rate, medians.
BENCH_OVERHEAD_ARGS ?= --overhead cpu@99,wall@99,cpu@999,wall@999 --rounds 5

.PHONY: bench-record-overhead
bench-record-overhead: $(BUILD)/benchload $(BUILD)/stackprobe $(BUILD)/libstackprobe.so
	$(Q)python3 bench/record_vs.py --build $(BUILD) $(BENCH_OVERHEAD_ARGS)

BENCH_LANES += bench-record bench-record-overhead

# cpu mode's engines against the truth and perf record --call-graph dwarf,
# and their CPU per sample (docs/PERFORMANCE.md "CPU engines").
BENCH_CPUCLOCK_ARGS ?=

.PHONY: bench-cpuclock
bench-cpuclock: $(BUILD)/benchload $(BUILD)/cpusplit $(BUILD)/stackprobe $(BUILD)/libstackprobe.so
	$(Q)python3 bench/cpuclock.py --build $(BUILD) $(BENCH_CPUCLOCK_ARGS)

BENCH_LANES += bench-cpuclock

# What the agent costs the program it is in: cpu
# mode's CPU per sample against perf record --call-graph dwarf (recording
# alone, and record + report) at 99 and 999 Hz, and the RSS the agent adds
# to a program whose 10 or 200 threads wait in a condition variable.
# Interleaved rounds, medians; docs/PERFORMANCE.md "What the agent costs".
BENCH_AGENT_COST_ARGS ?=

$(BUILD)/idlethreads: tests/workloads/idlethreads.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -pthread -o $@ $<

.PHONY: bench-agent-cost
bench-agent-cost: $(BUILD)/benchload $(BUILD)/idlethreads $(BUILD)/stackprobe $(BUILD)/libstackprobe.so
	$(Q)python3 bench/agent_cost.py --build $(BUILD) $(BENCH_AGENT_COST_ARGS)

BENCH_LANES += bench-agent-cost
