# The capture signal shared with the program: the C workload that
# takes it (tests/test_signal_share.c) and the cgo Go workload
# (tests/test_go.c, bench/go_vs_perf.py); the JVM, which does not share it
# but has a signal table of its own (tests/test_jvm.c, javac at test time).

$(BUILD)/sigshare: tests/workloads/sigshare.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes \
		-fno-omit-frame-pointer -o $@ $<

all: $(BUILD)/sigshare
$(BUILD)/tests/test_signal_share: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/sigshare

# Go (Debian golang-go, tools/deps.d/share.list): built offline, one file,
# no module (GO111MODULE=off), every cache under $(BUILD)/go so nothing is
# written outside the tree. cgo is what makes the program load libc, and so
# the LD_PRELOAD agent.
GO ?= go
GO_ENV = GOCACHE=$(abspath $(BUILD))/go/cache GOPATH=$(abspath $(BUILD))/go/path \
	GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=1 HOME=$(abspath $(BUILD))/go

$(BUILD)/gomix: tests/workloads/gomix/main.go | $(BUILD)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(BUILD)/go
	$(Q)cd tests/workloads/gomix && $(GO_ENV) $(GO) build -o $(abspath $@) main.go

$(BUILD)/tests/test_go: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/gomix $(BUILD)/sigshare
$(BUILD)/tests/test_jvm: $(BUILD)/stackprobe $(BUILD)/libstackprobe.so

# bench: the Go program's shares under stackprobe (cpu, wall) against perf's
# (linux-perf: tools/deps.d/benchrec.list). Not in `make test`.
.PHONY: bench-go
bench-go: $(BUILD)/gomix $(BUILD)/stackprobe $(BUILD)/libstackprobe.so
	$(Q)python3 bench/go_vs_perf.py --build $(BUILD) $(BENCH_GO_ARGS)
BENCH_LANES += bench-go
