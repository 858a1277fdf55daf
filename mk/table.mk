# Node table (table/): the libFuzzer lane for the reader.
#
# The fuzz target compiles table/table.c (and the POSIX backend it links
# against) directly with clang's fuzzer and sanitizers, separately from the
# library build. `make test` runs it briefly as lane test-fuzz-table; new
# inputs go to build/fuzz/corpus-table, the committed seeds stay read-only.
#   make fuzz-table FUZZ_ARGS=-max_total_time=600     a longer run

FUZZ_TABLE      := $(BUILD)/fuzz/fuzz_table
FUZZ_TABLE_SRCS := tests/fuzz_table.c table/table_writer.c table/table_reader.c table/table_posix.c userspace/common/fds.c
FUZZ_TABLE_RUN  ?= -runs=200000 -max_total_time=20
FUZZ_ARGS       ?= $(FUZZ_TABLE_RUN)

$(FUZZ_TABLE): $(FUZZ_TABLE_SRCS) table/table_os.h include/stackprobe/table.h
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(WARN) -Iinclude -I. -Itable \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-o $@ $(FUZZ_TABLE_SRCS)

.PHONY: test-fuzz-table fuzz-table
TEST_LANES += test-fuzz-table
test-fuzz-table: $(FUZZ_TABLE)
	$(Q)mkdir -p $(BUILD)/fuzz/corpus-table
	$(Q)tools/run-tests.sh $(BUILD)/test-results/fuzz-table.res \
		"$(FUZZ_TABLE) $(FUZZ_TABLE_RUN) $(BUILD)/fuzz/corpus-table tests/corpus/table"

fuzz-table: $(FUZZ_TABLE)
	$(Q)mkdir -p $(BUILD)/fuzz/corpus-table
	$(FUZZ_TABLE) $(FUZZ_ARGS) $(BUILD)/fuzz/corpus-table tests/corpus/table
