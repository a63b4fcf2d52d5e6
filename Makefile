# vramguard: plain make. `make` builds build/vramguard; `make check` builds and runs every test
# (unit + CLI) under one prove call; `make SANITIZE=1 check` does the same with ASan+UBSan in
# build-san/. See README.md.

PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DESTDIR ?=

CC      ?= cc
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

ifeq ($(SANITIZE),1)
BUILD   ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
BUILD   ?= build
SANFLAGS :=
endif

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wformat=2 -Wno-format-nonliteral -Wvla
CFLAGS   ?= -O2 -g
ALLCFLAGS := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 $(WARN) $(CFLAGS) $(SANFLAGS) \
            -Isrc -DVG_VERSION='"$(VERSION)"' -MMD -MP
LDLIBS   := -ldl -lpthread -lm

SRC      := $(filter-out src/main.c,$(wildcard src/*/*.c))
OBJ      := $(SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libvramguard.a
BIN      := $(BUILD)/vramguard

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

FAKE_SRC := $(wildcard tests/fake-nvml/*.c)
FAKE_LIBS := $(BUILD)/fake-nvml/full/libnvidia-ml.so.1 \
             $(BUILD)/fake-nvml/legacy/libnvidia-ml.so.1 \
             $(BUILD)/fake-nvml/r535/libnvidia-ml.so.1

HELPER_SRC := $(wildcard tests/helpers/*.c)
HELPER   := $(BUILD)/tests/vg-helper

.PHONY: all check unit cli test-deps install uninstall clean fake helper

# The demo needs the fake driver and the process helper beside the binary.
all: $(BIN) $(FAKE_LIBS) $(HELPER)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -c -o $@ $<

$(LIB): $(OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BIN): $(BUILD)/src/main.o $(LIB)
	$(CC) $(CFLAGS) $(SANFLAGS) -o $@ $^ $(LDLIBS)

# The fake driver: one source, three builds with the real SONAME (see tests/fake-nvml/README.md).
FAKE_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) -Wno-missing-prototypes $(CFLAGS) $(SANFLAGS) \
              -Isrc -fPIC -shared -Wl,-soname,libnvidia-ml.so.1
$(BUILD)/fake-nvml/full/libnvidia-ml.so.1: $(FAKE_SRC) tests/fake-nvml/*.h src/gpu/nvml_abi.h
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -o $@ $(FAKE_SRC) -lpthread
$(BUILD)/fake-nvml/legacy/libnvidia-ml.so.1: $(FAKE_SRC) tests/fake-nvml/*.h src/gpu/nvml_abi.h
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -DFAKE_NVML_LEGACY -o $@ $(FAKE_SRC) -lpthread
$(BUILD)/fake-nvml/r535/libnvidia-ml.so.1: $(FAKE_SRC) tests/fake-nvml/*.h src/gpu/nvml_abi.h
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -DFAKE_NVML_535 -o $@ $(FAKE_SRC) -lpthread

fake: $(FAKE_LIBS)

$(HELPER): $(HELPER_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -o $@ $(HELPER_SRC) $(LDLIBS)

helper: $(HELPER)

$(BUILD)/tests/test_%: tests/unit/test_%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -Itests/unit -DVG_TEST_BUILD_DIR='"$(abspath $(BUILD))"' -DVG_TEST_SRC_DIR='"$(abspath .)"' -o $@ $< $(LIB) -lcmocka $(LDLIBS)

unit: $(UNIT_BIN)

# Everything the tests need, then one prove call over unit binaries and bats files.
check: $(BIN) $(UNIT_BIN) $(FAKE_LIBS) $(HELPER)
	VG_BUILD=$(abspath $(BUILD)) tests/run

install: $(BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/vramguard
	install -m 0644 man/vramguard.1 $(DESTDIR)$(MANDIR)/man1/vramguard.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/vramguard $(DESTDIR)$(MANDIR)/man1/vramguard.1

clean:
	rm -rf build build-san

-include $(OBJ:.o=.d) $(BUILD)/src/main.d
