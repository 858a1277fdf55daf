# Windows backend: cross build with mingw-w64, tests run under wine.
#
#   make test-windows          build build/win/*, run the Windows tests under
#                              wine, write build/test-results/windows.res
#   make check-windows-arm64   clang -fsyntax-only of the Windows sources for
#                              aarch64-w64-mingw32 (no arm64 toolchain here)
#
# Only the portable sources and the Windows ones are compiled for Windows
# (WIN_LIB_SRCS below): the Linux backends are never fed to mingw. cmocka has
# no mingw package, so its single src/cmocka.c is built from Debian's source
# package (tools/win-cmocka-src.sh fetches it, adding a deb-src entry when
# apt has none). Wine runs with a prefix inside build/ (created on first use,
# ~6.5 s) and WINEDEBUG=-all; no X display is needed.

WIN_CC    ?= x86_64-w64-mingw32-gcc
WIN_AR    ?= x86_64-w64-mingw32-ar
WIN_CLANG ?= $(CLANG)
WINE      ?= $(shell command -v wine 2>/dev/null || echo /usr/lib/wine/wine64)
WIN       := $(BUILD)/win
WINEPFX   := $(abspath $(WIN))/wineprefix
WIN_ENV   := WINEPREFIX=$(WINEPFX) WINEDEBUG=-all WINEDLLOVERRIDES='mscoree,mshtml=' \
	     DISPLAY= WINEARCH=win64

# Portable library sources + the Windows ones. Wildcards so that a part that
# has not landed yet (table/, snapshot.c) simply is not there.
WIN_LIB_SRCS := $(sort $(wildcard backends/capture.c backends/snapshot.c backends/names.c table/table_writer.c table/table_reader.c userspace/common/version.c userspace/unwind/unwind_fp.c \
	backends/windows/*.c table/table_win.c))
WIN_OWN_SRCS := $(sort $(wildcard backends/windows/*.c \
	table/table_win.c))
WIN_LIB_OBJS := $(patsubst %.c,$(WIN)/obj/%.o,$(WIN_LIB_SRCS))
WIN_TEST_SRCS := $(sort $(wildcard tests/test_windows_*.c))
WIN_TEST_BINS := $(patsubst tests/%.c,$(WIN)/tests/%.exe,$(WIN_TEST_SRCS))

# Windows tests are not native tests: keep them out of the Linux lane.
TEST_BINS := $(filter-out $(BUILD)/tests/test_windows_%,$(TEST_BINS))

# Windows 7 API level (toolhelp, QueryPerformanceCounter, RtlVirtualUnwind).
WIN_CFLAGS := -O2 -g $(WARN) -std=gnu11 -D_WIN32_WINNT=0x0601 -DWIN32_LEAN_AND_MEAN \
	-DSPROBE_VERSION='"$(VERSION)"' -Iinclude -I.
# -static: no libgcc/libwinpthread DLLs to find under wine. --build-id makes
# ld emit a CodeView (RSDS) debug directory entry, which the module inventory
# reads back as the PDB GUID/age.
WIN_LDFLAGS := -static -Wl,--build-id
WIN_LIBS := -lntdll -lpthread

CMOCKA_WIN_SRC := $(WIN)/cmocka-src
CMOCKA_WIN_LIB := $(WIN)/cmocka/libcmocka.a
CMOCKA_WIN_INC := $(CMOCKA_WIN_SRC)/include

TEST_LANES += test-windows check-windows-arm64
.PHONY: win-lib win-tests test-windows check-windows-arm64

win-lib: $(WIN)/libstackprobe.a
win-tests: $(WIN_TEST_BINS)

$(WIN)/obj/%.o: %.c $(HDRS)
	$(call msg,WIN-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(WIN_CC) $(WIN_CFLAGS) -c $< -o $@

$(WIN)/libstackprobe.a: $(WIN_LIB_OBJS)
	$(call msg,WIN-AR,$@)
	$(Q)rm -f $@ && $(WIN_AR) rcs $@ $^

# cmocka for mingw: fetch once (tools/win-cmocka-src.sh is idempotent), then
# compile src/cmocka.c with a config.h describing mingw-w64's CRT.
$(CMOCKA_WIN_SRC)/src/cmocka.c:
	$(call msg,FETCH,cmocka source (Debian source package))
	$(Q)tools/win-cmocka-src.sh $(CMOCKA_WIN_SRC)

$(WIN)/cmocka/config.h: mk/windows.mk
	$(Q)mkdir -p $(@D)
	$(Q)printf '%s\n' '/* mingw-w64 config for cmocka, written by mk/windows.mk */' \
		'#define HAVE_ASSERT_H 1' '#define HAVE_INTTYPES_H 1' '#define HAVE_IO_H 1' \
		'#define HAVE_MALLOC_H 1' '#define HAVE_MEMORY_H 1' '#define HAVE_SETJMP_H 1' \
		'#define HAVE_SIGNAL_H 1' '#define HAVE_STDARG_H 1' '#define HAVE_STDDEF_H 1' \
		'#define HAVE_STDINT_H 1' '#define HAVE_STDIO_H 1' '#define HAVE_STDLIB_H 1' \
		'#define HAVE_STRINGS_H 1' '#define HAVE_STRING_H 1' '#define HAVE_SYS_STAT_H 1' \
		'#define HAVE_SYS_TYPES_H 1' '#define HAVE_TIME_H 1' '#define HAVE_UNISTD_H 1' \
		'#define HAVE_STRUCT_TIMESPEC 1' '#define HAVE_CALLOC 1' '#define HAVE_EXIT 1' \
		'#define HAVE_FPRINTF 1' '#define HAVE_SNPRINTF 1' '#define HAVE_VSNPRINTF 1' \
		'#define HAVE__SNPRINTF 1' '#define HAVE__VSNPRINTF 1' '#define HAVE_FREE 1' \
		'#define HAVE_LONGJMP 1' '#define HAVE_MALLOC 1' '#define HAVE_MEMCPY 1' \
		'#define HAVE_MEMSET 1' '#define HAVE_PRINTF 1' '#define HAVE_SETJMP 1' \
		'#define HAVE_SIGNAL 1' '#define HAVE_STRCMP 1' '#define HAVE_STRCPY 1' \
		'#define HAVE_GCC_THREAD_LOCAL_STORAGE 1' '#define WORDS_SIZEOF_VOID_P 8' > $@

$(CMOCKA_WIN_LIB): $(CMOCKA_WIN_SRC)/src/cmocka.c $(WIN)/cmocka/config.h
	$(call msg,WIN-CC,$@)
	$(Q)$(WIN_CC) -O2 -g -std=gnu11 -w -DHAVE_CONFIG_H -I$(WIN)/cmocka \
		-I$(CMOCKA_WIN_INC) -I$(CMOCKA_WIN_SRC)/src -c $< -o $(WIN)/cmocka/cmocka.o
	$(Q)rm -f $@ && $(WIN_AR) rcs $@ $(WIN)/cmocka/cmocka.o

$(WIN)/tests/%.exe: tests/%.c $(WIN)/libstackprobe.a $(CMOCKA_WIN_LIB) $(HDRS)
	$(call msg,WIN-LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(WIN_CC) $(WIN_CFLAGS) $(WIN_TEST_CFLAGS) -I$(CMOCKA_WIN_INC) -Itests -o $@ $< \
		$(WIN)/libstackprobe.a $(CMOCKA_WIN_LIB) $(WIN_LDFLAGS) $(WIN_LIBS)

# The prefix is created once, explicitly, so that its ~6.5 s and any failure
# show up here and not as a test timeout. wineboot -i returns before the
# prefix is finished: wineserver -w waits for it.
$(WINEPFX)/system.reg:
	$(call msg,WINE,creating prefix $(WINEPFX))
	$(Q)mkdir -p $(WINEPFX)
	$(Q)$(WIN_ENV) $(WINE) wineboot -i </dev/null >$(WIN)/wineboot.log 2>&1 || \
		{ cat $(WIN)/wineboot.log; exit 1; }
	$(Q)$(WIN_ENV) wineserver -w
	$(Q)test -f $@ || { echo "wine: prefix $(WINEPFX) not created"; cat $(WIN)/wineboot.log; exit 1; }

# The capture test checks the PDB GUID/age it reads from its own image in
# memory against what objdump reads from the file.
WIN_OBJDUMP ?= x86_64-w64-mingw32-objdump
test-windows: $(WIN_TEST_BINS) $(WINEPFX)/system.reg
	$(Q)rsds=$$($(WIN_OBJDUMP) -p $(WIN)/tests/test_windows_capture.exe | \
		sed -n 's/.*RSDS signature \([0-9a-f]*\) age \([0-9]*\).*/\1 \2/p'); \
	set -- $$rsds; \
	SPROBE_TEST_SELF_PDB_GUID=$${1:-} SPROBE_TEST_SELF_PDB_AGE=$${2:-} \
	$(WIN_ENV) tools/run-tests.sh $(BUILD)/test-results/windows.res \
		$(foreach t,$(WIN_TEST_BINS),"$(WINE) $(t)") </dev/null

# Windows aarch64: no toolchain to link or run here, so the check is that
# every Windows source compiles for aarch64-w64-mingw32 against the mingw-w64
# headers. Counts as one test. The library sources only: the test program
# is x86_64 (it has an assembly leaf), and version.c needs a quoted -D that
# run-tests.sh's word splitting cannot carry (it is plain portable C).
WIN_ARM64_SRCS := $(filter-out userspace/common/version.c,$(WIN_LIB_SRCS))
WIN_ARM64_FLAGS := --target=aarch64-w64-mingw32 -fsyntax-only -isystem /usr/share/mingw-w64/include \
	-std=gnu11 $(WARN) -D_WIN32_WINNT=0x0A00 -DWIN32_LEAN_AND_MEAN -Iinclude -I.
check-windows-arm64:
	$(Q)mkdir -p $(BUILD)/test-results
	$(Q)tools/run-tests.sh $(BUILD)/test-results/windows-arm64.res \
		"$(WIN_CLANG) $(WIN_ARM64_FLAGS) $(WIN_ARM64_SRCS)"
