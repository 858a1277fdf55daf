# Outputs people open (docs/OUTPUTS.md): pprof, speedscope and SVG writers
# (userspace/report/{pprof,speedscope,svg}.c, picked up by the library
# wildcard), the embedding example, the man pages and the install test.
#
#   make                      also builds build/examples/embed
#   make install              also installs stackprobe(1) and libstackprobe(3)
#   make test-install         install into a temporary DESTDIR, build the
#                             example against the installed pkg-config file
#                             (shared and static) and run it (a test lane)
#   make node-deps            the npm readers tests/test_outputs.c uses
#                             (pprof-format, speedscope's schema, ajv), from
#                             tests/node/package-lock.json into build/node

MANDIR ?= $(PREFIX)/share/man

# ---- the embedding example ---------------------------------------------------
EXAMPLE_SRCS := $(sort $(wildcard examples/*.c))
EXAMPLE_BINS := $(patsubst examples/%.c,$(BUILD)/examples/%,$(EXAMPLE_SRCS))

$(BUILD)/examples/%: examples/%.c $(BUILD)/libstackprobe.a $(HDRS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(WARN) -std=gnu11 -pthread -Iinclude -I. -o $@ $< \
		$(BUILD)/libstackprobe.a $(LDFLAGS) $(LIBS)

all: $(EXAMPLE_BINS)

# ---- man pages -----------------------------------------------------------------
# One shell line ending in ';', so other parts can append their own
# commands to INSTALL_EXTRA with += (make joins with a space).
INSTALL_EXTRA += install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 && \
	install -m 0644 docs/man/stackprobe.1 $(DESTDIR)$(MANDIR)/man1/stackprobe.1 && \
	install -m 0644 docs/man/libstackprobe.3 $(DESTDIR)$(MANDIR)/man3/libstackprobe.3;

# ---- npm readers for the output tests --------------------------------------
# npm ci installs exactly the versions in the committed lock file. It runs
# only when the lock file changes (the stamp), tries the local npm cache
# first (--prefer-offline), and the test skips with the reason when node or
# the modules are missing instead of failing on a machine without them.
NODE_DIR := $(BUILD)/node
NODE_STAMP := $(NODE_DIR)/node_modules/.stackprobe-stamp
NPM ?= npm

$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	$(call msg,NPM-CI,$(NODE_DIR))
	$(Q)mkdir -p $(NODE_DIR)
	$(Q)cp tests/node/package.json tests/node/package-lock.json $(NODE_DIR)/
	$(Q)if command -v $(NPM) >/dev/null 2>&1; then \
		cd $(NODE_DIR) && $(NPM) ci --prefer-offline --no-audit --no-fund --loglevel=error \
		&& touch $(CURDIR)/$@; \
	else echo "  npm not found: tests/test_outputs.c will skip the npm readers"; fi

.PHONY: node-deps deps-npm
node-deps: $(NODE_STAMP)

# `make deps` (and so `make test`) also gets npm where it is missing, i.e.
# with Debian's nodejs; see tools/deps.d/outputs.list for why not there.
deps: deps-npm
deps-npm:
	$(Q)if ! command -v $(NPM) >/dev/null 2>&1; then \
		if [ "$$(id -u)" -eq 0 ]; then echo "deps: installing nodejs npm"; \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >/dev/null; \
		else echo "deps: npm missing: run 'sudo apt-get install nodejs npm'" >&2; fi; fi

# The output tests record the demo with the CLI, then read every format
# with the independent readers.
# (tests/test_outputs*.c, one theme per program).
OUTPUTS_TEST_BINS := $(BUILD)/tests/test_outputs $(BUILD)/tests/test_outputs_html
$(OUTPUTS_TEST_BINS): $(BUILD)/stackprobe $(BUILD)/libstackprobe.so $(BUILD)/demo
$(OUTPUTS_TEST_BINS): | node-deps
$(OUTPUTS_TEST_BINS): TEST_CFLAGS += -DSPROBE_NODE_MODULES='"$(CURDIR)/$(NODE_DIR)/node_modules"'

# ---- install test lane ------------------------------------------------------
.PHONY: test-install
test-install: all
	$(Q)tools/run-tests.sh $(BUILD)/test-results/install.res "tests/outputs/install_test.sh $(MAKE)"

TEST_LANES += test-install

# ---- the report part's fuzz lane ---------------------------------------------
# formats.c (userspace/report/) dispatches to the writers above, so the fuzzer (mk/report.mk)
# must link them too, with zlib and the version string. mk/report.mk sets
# FUZZ_DATAFILE_SRCS with := after this file is read, hence a target-specific
# append (applied when the recipe runs). Better: list these in mk/report.mk.
OUTPUTS_SRCS := userspace/report/outputs.c userspace/report/pprof.c userspace/report/protobuf.c \
	userspace/report/speedscope.c userspace/report/svg.c userspace/common/version.c userspace/common/zlib_dl.c userspace/common/dl_table.c
$(BUILD)/fuzz/fuzz_datafile: $(OUTPUTS_SRCS) userspace/report/outputs.h
$(BUILD)/fuzz/fuzz_datafile: FUZZ_DATAFILE_SRCS += -DSPROBE_VERSION='"$(VERSION)"' $(OUTPUTS_SRCS) -lz
