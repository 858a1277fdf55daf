# Data file, stream and reports: userspace/datafile/ (format.c, writer.c, reader.c, stream.c), userspace/report/,
# userspace/cli/cmd_report.c (library and CLI objects come from the top
# Makefile's wildcards; tests/test_{datafile,stream,report}.c likewise).
#
# Extra lane: test-fuzz-datafile, a bounded libFuzzer run of the reader and
# the reports (ASan + UBSan), seeded from tests/corpus/datafile. New inputs
# go to build/fuzz/corpus-datafile, never into the source tree. The per-input
# timeout is generous (60 s; a real input takes milliseconds) because on a
# loaded shared VM the ASan allocator can stall for seconds returning memory.
#   make test-fuzz-datafile FUZZ_SECONDS=600   (a longer run by hand)

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 20
FUZZ_DATAFILE := $(BUILD)/fuzz/fuzz_datafile
FUZZ_DATAFILE_SRCS := tests/fuzz_datafile.c userspace/datafile/format.c userspace/datafile/writer.c userspace/datafile/reader.c userspace/common/fds.c userspace/report/model.c userspace/report/bytemap.c userspace/report/filter.c userspace/report/aggregate.c userspace/report/access.c userspace/report/load.c userspace/report/formats.c userspace/report/text.c userspace/report/folded.c userspace/report/json.c userspace/report/trace_format.c userspace/report/html.c userspace/report/html_tree.c userspace/report/html_timeline.c userspace/report/html_page.c \
	userspace/pause/pause_merge.c userspace/report/trace.c userspace/report/inline.c \
	userspace/report/coverage.c userspace/report/shares.c userspace/report/stats.c backends/names.c

$(FUZZ_DATAFILE): $(FUZZ_DATAFILE_SRCS) include/stackprobe/datafile.h \
		  include/stackprobe/report.h include/stackprobe/capture.h userspace/datafile/datafile_crc.h \
		  userspace/datafile/datafile_internal.h userspace/report/report_internal.h \
		  userspace/report/html_tree.h userspace/report/html_timeline.h
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(FUZZ_CC) -g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter \
		-Iinclude -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		$(FUZZ_DATAFILE_SRCS) -o $@

.PHONY: test-fuzz-datafile
test-fuzz-datafile: $(FUZZ_DATAFILE)
	$(Q)rm -rf $(BUILD)/fuzz/corpus-datafile && mkdir -p $(BUILD)/fuzz/corpus-datafile
	$(Q)tools/run-tests.sh $(BUILD)/test-results/fuzz-datafile.res \
		"$(FUZZ_DATAFILE) -max_total_time=$(FUZZ_SECONDS) -timeout=60 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/ $(BUILD)/fuzz/corpus-datafile tests/corpus/datafile"

TEST_LANES += test-fuzz-datafile

# Extra lane: test-tsan-stream, the stream's tests under ThreadSanitizer
# (the queue's acquire/release pairs and the futex handshake, checked).
TSAN_STREAM := $(BUILD)/tsan/test_stream
TSAN_STREAM_SRCS := tests/test_stream.c userspace/datafile/stream.c userspace/datafile/format.c userspace/datafile/writer.c userspace/datafile/reader.c userspace/common/fds.c

$(TSAN_STREAM): $(TSAN_STREAM_SRCS) include/stackprobe/stream.h include/stackprobe/datafile.h \
		include/stackprobe/capture.h tests/datafile_fixture.h tests/sprobe_test.h
	$(call msg,TSAN-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(FUZZ_CC) -g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter \
		-Iinclude -I. -Itests -fsanitize=thread $(TSAN_STREAM_SRCS) -lcmocka -lpthread -o $@

.PHONY: test-tsan-stream
test-tsan-stream: $(TSAN_STREAM)
	$(Q)TSAN_OPTIONS=halt_on_error=1:exitcode=66 tools/run-tests.sh \
		$(BUILD)/test-results/tsan-stream.res $(TSAN_STREAM)

TEST_LANES += test-tsan-stream
