# vramguard: plain make. `make` builds build/vramguard; `make check` builds and runs every test
# (unit + CLI) under one prove call; `make SANITIZE=1 check` does the same with ASan+UBSan in
# build-san/. See README.md.

# Where `make install` puts things (DESTDIR for staging). PKGLIBDIR, where demo's helper and the
# fake driver go, is compiled into the binary: demo looks there after the build tree.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share/vramguard
DOCDIR  ?= $(PREFIX)/share/doc/vramguard
PKGLIBDIR ?= $(PREFIX)/lib/vramguard
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
# Shell completions, where bash-completion, zsh (Debian's vendor directory) and fish look.
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/vendor-completions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
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

# The project's warnings stay whatever CFLAGS a packager gives; -Werror is for the project's own
# builds and checks (on by default, so CI keeps it): `make WERROR=0` turns it off. CPPFLAGS,
# CFLAGS and LDFLAGS from the environment or the command line (dpkg-buildflags' hardening flags)
# reach every compile and link.
WERROR   ?= 1
WARN     := -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror) -Wshadow -Wstrict-prototypes \
            -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -Wvla
CFLAGS   ?= -O2 -g
ALLCFLAGS := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 $(CPPFLAGS) $(WARN) $(CFLAGS) \
            $(SANFLAGS) -Isrc -DVG_VERSION='"$(VERSION)"' -MMD -MP
LDLIBS   := -ldl -lpthread -lm

# libmicrohttpd, for `vramguard serve` only: its flags go to the one file that includes it and
# to the binary's link line, so the library, unit tests and fuzz targets do not need it.
MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS   := $(or $(shell pkg-config --libs libmicrohttpd 2>/dev/null),-lmicrohttpd)
# ncursesw, for `vramguard top` only (src/cmd/top.c): on the binary's link line alone.
CURSES_LIBS := $(or $(shell pkg-config --libs ncursesw 2>/dev/null),-lncursesw)

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

.PHONY: all check unit cli test-deps install uninstall clean fake helper bench

# The demo needs the fake driver and the process helper beside the binary.
all: $(BIN) $(FAKE_LIBS) $(HELPER)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -c -o $@ $<

$(LIB): $(OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/src/cmd/serve_http.o: ALLCFLAGS += $(MHD_CFLAGS)

# The in-kernel holder scan (src/proc/kscan.c): its BPF program is built with clang's BPF
# target against libbpf's headers (libbpf-dev) and embedded in kscan.o; libbpf itself is loaded
# with dlopen at run time, so the binary never links it. Without that toolchain (or with
# BPF=0) the binary has the /proc scan only. The program needs no BTF at build time: its CO-RE
# types are src/proc/bpf/vg_core.h.
BPF_CLANG ?= clang
BPF ?= $(shell $(BPF_CLANG) -target bpf -print-targets >/dev/null 2>&1 && \
         test -f /usr/include/bpf/bpf_helpers.h && echo 1 || echo 0)
ifeq ($(BPF),1)
KSCAN_OBJ := $(BUILD)/bpf/holders.bpf.o
$(KSCAN_OBJ): src/proc/bpf/holders.bpf.c src/proc/bpf/vg_core.h src/proc/kscan_rec.h
	@mkdir -p $(dir $@)
	$(BPF_CLANG) -target bpf -O2 -g -Wall -Werror -Isrc -c -o $@ $<
$(BUILD)/src/proc/kscan.o: $(KSCAN_OBJ)
$(BUILD)/src/proc/kscan.o: ALLCFLAGS += -DVG_HAVE_BPF -DVG_KSCAN_OBJ='"$(KSCAN_OBJ)"'
endif

# demo looks for its helper and the fake driver in PKGLIBDIR (after the build tree); the stamp
# rebuilds demo.o when PKGLIBDIR changes (cmd/demo.c passes it to act/demo.c's search).
$(BUILD)/pkglibdir.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(PKGLIBDIR)' | cmp -s - $@ || echo '$(PKGLIBDIR)' >$@
$(BUILD)/src/cmd/demo.o: $(BUILD)/pkglibdir.stamp
$(BUILD)/src/cmd/demo.o: ALLCFLAGS += -DVG_PKGLIBDIR='"$(PKGLIBDIR)"'
.PHONY: FORCE
FORCE:

$(BIN): $(BUILD)/src/main.o $(LIB)
	$(CC) $(CFLAGS) $(SANFLAGS) $(LDFLAGS) -o $@ $^ $(MHD_LIBS) $(CURSES_LIBS) $(LDLIBS)

# The fake driver: one source, three builds with the real SONAME (see tests/fake-nvml/README.md).
FAKE_CFLAGS = -std=c11 -D_GNU_SOURCE $(CPPFLAGS) $(WARN) -Wno-missing-prototypes $(CFLAGS) \
              $(SANFLAGS) -Isrc -fPIC -shared $(LDFLAGS) -Wl,-soname,libnvidia-ml.so.1
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
	$(CC) $(ALLCFLAGS) $(LDFLAGS) -o $@ $(HELPER_SRC) $(LDLIBS)

helper: $(HELPER)

# vg-churn: forks short-lived processes for the churn test (tests/cli/t0805-churn.bats).
CHURN    := $(BUILD)/tests/vg-churn
$(CHURN): tests/reliability/vg-churn.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $(LDFLAGS) -o $@ $<

check: $(CHURN)

# vg-flood: connection floods for the serve tests (tests/cli/t0706-serve-flood.bats).
FLOOD    := $(BUILD)/tests/vg-flood
$(FLOOD): tests/reliability/vg-flood.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $(LDFLAGS) -o $@ $<

check: $(FLOOD)

$(BUILD)/tests/test_%: tests/unit/test_%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -Itests/unit -DVG_TEST_BUILD_DIR='"$(abspath $(BUILD))"' -DVG_TEST_SRC_DIR='"$(abspath .)"' $(LDFLAGS) -o $@ $< $(LIB) -lcmocka $(LDLIBS)

unit: $(UNIT_BIN)

# Everything the tests need, then one prove call over unit binaries and bats files.
check: $(BIN) $(UNIT_BIN) $(FAKE_LIBS) $(HELPER)
	VG_BUILD=$(abspath $(BUILD)) tests/run $(PROVE_ARGS)

# The unit tests alone (the binary, the fake drivers and the helper are built too, as the unit
# tests load them).
.PHONY: unit-check
unit-check: $(BIN) $(UNIT_BIN) $(FAKE_LIBS) $(HELPER)
	VG_BUILD=$(abspath $(BUILD)) tests/run --unit $(PROVE_ARGS)

# Static checks over src/ (scripts/lint): the layer order of includes, banned functions,
# functions over 80 lines without a "long:" reason, and clang-format (.clang-format) over
# LINT_FORMAT_FILES (every C file of src/). `clang-format -i FILE` formats one.
LINT_FORMAT_FILES ?= $(sort $(wildcard src/*/*.c src/*/*.h)) src/main.c
.PHONY: lint
lint:
	@LINT_FORMAT_FILES='$(LINT_FORMAT_FILES)' scripts/lint src && echo "lint: layers, banned functions, function length and format: clean"

# Benchmarks (docs/performance.md): vramguard against fuser, lsof and a C floor on a synthetic
# host of real processes. Never part of `check` or CI. BENCH_ARGS passes options to bench/run
# ("--scale-max 10000", "-n 5000 -r 3"; see bench/run --help).
BENCH_BIN := $(BUILD)/bench/spawner $(BUILD)/bench/floor $(BUILD)/bench/timeit

$(BUILD)/bench/%: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(CPPFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $<

bench: $(BIN) $(FAKE_LIBS) $(BENCH_BIN)
	VG_BUILD=$(abspath $(BUILD)) bench/run $(BENCH_ARGS)

# Fuzzing (docs/reliability.md): one libFuzzer target per parser, fuzz/fuzz_*.c, built with clang
# against the library compiled with ASan + UBSan + sanitizer coverage in build-fuzz/. `make fuzz`
# runs each target for FUZZ_SECONDS over its committed seeds (fuzz/corpus/TARGET/); `make
# fuzz-smoke` is the few seconds each that CI runs. FUZZ_TARGETS picks some ("stat visible").
FUZZ_BUILD   ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_RSS_MB  ?= 2048
FUZZ_SRC     := $(wildcard fuzz/fuzz_*.c)
FUZZ_TARGETS ?= $(FUZZ_SRC:fuzz/fuzz_%.c=%)
FUZZ_SANFLAGS := -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all \
                 -fno-omit-frame-pointer

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-bins
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) SANFLAGS='$(FUZZ_SANFLAGS)' \
		CFLAGS='-O1 -g' fuzz-bins

fuzz-bins: $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fuzz/%)

$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

fuzz: fuzz-build
	fuzz/run --build $(FUZZ_BUILD) --seconds $(FUZZ_SECONDS) --rss $(FUZZ_RSS_MB) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	fuzz/run --build $(FUZZ_BUILD) --seconds 2 --rss $(FUZZ_RSS_MB) $(FUZZ_TARGETS)

# Valgrind memcheck over the unit tests and a set of CLI runs (tests/reliability/valgrind):
# no error, no definite or indirect leak. The plain build only (valgrind cannot run ASan).
.PHONY: valgrind valgrind-quick
valgrind valgrind-quick: $(BIN) $(UNIT_BIN) $(FAKE_LIBS) $(HELPER)
	@if [ "$(SANITIZE)" = 1 ]; then echo "make $@: not with SANITIZE=1" >&2; exit 2; fi
	VG_BUILD=$(abspath $(BUILD)) tests/reliability/valgrind $(if $(filter valgrind-quick,$@),--quick)

# Shell completions, generated by the binary from the option tables its --help is made from
# (`vramguard completion bash|zsh|fish`).
COMPLETIONS := $(BUILD)/completions/vramguard $(BUILD)/completions/_vramguard \
               $(BUILD)/completions/vramguard.fish
.PHONY: completions
completions: $(COMPLETIONS)
$(BUILD)/completions/vramguard: $(BIN)
	@mkdir -p $(dir $@)
	$(BIN) completion bash >$@.tmp && mv $@.tmp $@
$(BUILD)/completions/_vramguard: $(BIN)
	@mkdir -p $(dir $@)
	$(BIN) completion zsh >$@.tmp && mv $@.tmp $@
$(BUILD)/completions/vramguard.fish: $(BIN)
	@mkdir -p $(dir $@)
	$(BIN) completion fish >$@.tmp && mv $@.tmp $@

all: $(COMPLETIONS)

# `make install` (DESTDIR, PREFIX and the directories above; `make install-strip` strips the
# programs) and `make uninstall`, which removes exactly what install puts there. The systemd
# units are generated at install time from the templates contrib/systemd/*.service.in, whose
# @BINDIR@ becomes BINDIR.
INST_FAKE  := $(BUILD)/fake-nvml/full/libnvidia-ml.so.1
UNITS      := vramguard-watch.service vramguard-exporter.service
DOCS       := README.md LICENSE $(wildcard docs/*.md)
DATA       := contrib/vramguard/watch.conf contrib/prometheus/alerts.yml
DATA_EXEC  := contrib/slurm/vramguard-prolog contrib/slurm/vramguard-epilog
K8S        := contrib/kubernetes/daemonset.yaml contrib/kubernetes/podmonitor.yaml
NPD        := contrib/kubernetes/npd/vramguard-monitor.json
NPD_EXEC   := contrib/kubernetes/npd/vramguard-npd
GRAFANA    := contrib/grafana/vramguard.json
INSTALL_STRIP ?=

.PHONY: install-strip
install: $(BIN) $(HELPER) $(INST_FAKE) $(COMPLETIONS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(PKGLIBDIR) \
		$(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(DATADIR)/slurm \
		$(DESTDIR)$(DATADIR)/kubernetes/npd $(DESTDIR)$(DATADIR)/grafana \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 $(INSTALL_STRIP) $(BIN) $(DESTDIR)$(BINDIR)/vramguard
	gzip -9n <man/vramguard.1 >$(DESTDIR)$(MANDIR)/man1/vramguard.1.gz
	chmod 0644 $(DESTDIR)$(MANDIR)/man1/vramguard.1.gz
	install -m 0755 $(INSTALL_STRIP) $(HELPER) $(DESTDIR)$(PKGLIBDIR)/vg-helper
	install -m 0644 $(INSTALL_STRIP) $(INST_FAKE) $(DESTDIR)$(PKGLIBDIR)/libnvidia-ml.so.1
	for u in $(UNITS); do \
		sed 's|@BINDIR@|$(BINDIR)|g' contrib/systemd/$$u.in \
			>$(DESTDIR)$(SYSTEMDUNITDIR)/$$u && chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$u || exit 1; \
	done
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	install -m 0644 $(DATA) $(DESTDIR)$(DATADIR)/
	install -m 0755 $(DATA_EXEC) $(DESTDIR)$(DATADIR)/slurm/
	install -m 0644 $(K8S) $(DESTDIR)$(DATADIR)/kubernetes/
	install -m 0644 $(NPD) $(DESTDIR)$(DATADIR)/kubernetes/npd/
	install -m 0755 $(NPD_EXEC) $(DESTDIR)$(DATADIR)/kubernetes/npd/
	install -m 0644 $(GRAFANA) $(DESTDIR)$(DATADIR)/grafana/
	install -m 0644 $(BUILD)/completions/vramguard $(DESTDIR)$(BASHCOMPDIR)/vramguard
	install -m 0644 $(BUILD)/completions/_vramguard $(DESTDIR)$(ZSHCOMPDIR)/_vramguard
	install -m 0644 $(BUILD)/completions/vramguard.fish $(DESTDIR)$(FISHCOMPDIR)/vramguard.fish

install-strip:
	$(MAKE) INSTALL_STRIP=-s install

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/vramguard $(DESTDIR)$(MANDIR)/man1/vramguard.1.gz \
		$(DESTDIR)$(PKGLIBDIR)/vg-helper $(DESTDIR)$(PKGLIBDIR)/libnvidia-ml.so.1 \
		$(UNITS:%=$(DESTDIR)$(SYSTEMDUNITDIR)/%) $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS))) \
		$(addprefix $(DESTDIR)$(DATADIR)/,$(notdir $(DATA))) \
		$(addprefix $(DESTDIR)$(DATADIR)/slurm/,$(notdir $(DATA_EXEC))) \
		$(addprefix $(DESTDIR)$(DATADIR)/kubernetes/,$(notdir $(K8S))) \
		$(addprefix $(DESTDIR)$(DATADIR)/kubernetes/npd/,$(notdir $(NPD) $(NPD_EXEC))) \
		$(addprefix $(DESTDIR)$(DATADIR)/grafana/,$(notdir $(GRAFANA))) \
		$(DESTDIR)$(BASHCOMPDIR)/vramguard $(DESTDIR)$(ZSHCOMPDIR)/_vramguard \
		$(DESTDIR)$(FISHCOMPDIR)/vramguard.fish
	-rmdir $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(DATADIR)/slurm \
		$(DESTDIR)$(DATADIR)/kubernetes/npd $(DESTDIR)$(DATADIR)/kubernetes \
		$(DESTDIR)$(DATADIR)/grafana $(DESTDIR)$(DATADIR) \
		2>/dev/null

clean:
	rm -rf build build-san
	rm -rf build-fuzz

-include $(OBJ:.o=.d) $(BUILD)/src/main.d
-include $(wildcard $(BUILD)/fuzz/*.d)
