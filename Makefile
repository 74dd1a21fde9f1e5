# SPDX-License-Identifier: GPL-2.0-only
#
# agg: one Makefile for the library, the tools, the BPF objects, the tests,
# the demo and the benchmarks.  `make V=1` shows the commands.

VERSION    := 0.1.0
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
COMPDIR    ?= $(PREFIX)/share/bash-completion/completions
INCLUDEDIR ?= $(PREFIX)/include
LIBDIR     ?= $(PREFIX)/lib
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# Where Debian's python3 looks: /usr/lib/python3/dist-packages for
# PREFIX=/usr, else PREFIX/lib/python3.X/dist-packages (its version's).
PYTHON     ?= /usr/bin/python3
PYTHONDIR  ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)/dist-packages)
# The defaults built in: the pin directory, the cache, the secret of
# agg-plan's job tokens.  Not ?=: the environment variables of these names
# are the tools' own run-time settings (the test suite and the benchmarks
# set them, and t/0700's "make install" ran with a test's AGG_PIN_DIR once,
# baking it into build/), so only "make VAR=..." changes them.
AGG_PIN_DIR = /sys/fs/bpf/agg
AGG_CACHE_DIR = /var/cache/agg
AGG_SECRET_FILE = /etc/agg/secret

CC         ?= cc
CLANG      ?= clang
BPFTOOL    ?= bpftool
ARCH_INC   ?= /usr/include/$(shell $(CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

CFLAGS     ?= -O2 -g
CFLAGS     += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wshadow \
              -Wstrict-prototypes -Wmissing-prototypes -fno-common
CPPFLAGS   += $(LAYERS:%=-Ilib/%) -Ilib/api -Ibpf -Ibuild -D_GNU_SOURCE \
              -DAGG_VERSION='"$(VERSION)"' \
              -DAGG_PIN_DIR='"$(AGG_PIN_DIR)"' \
              -DAGG_CACHE_DIR='"$(AGG_CACHE_DIR)"' \
              -DAGG_SECRET_FILE='"$(AGG_SECRET_FILE)"'
# What each layer's code needs besides libc (see "lib/: layers" below).
LIBS_BASE  := -lm
LIBS_DP    := -lbpf -lelf -lz -lnuma -lm -lpthread
LDLIBS     += -lbpf -lelf -lz -lpcap -lnuma -lm -lpthread
BPF_CFLAGS ?= -O2 -g -Wall -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -I$(ARCH_INC) -Ibpf

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
MAKEFLAGS += --no-print-directory
endif

.DELETE_ON_ERROR:
.SUFFIXES:

# lib/: layers, each a static library, lowest first; a layer uses only
# those before it, and the linker checks it: every tool links only the
# layers it needs, with only their system libraries (agg-plan and agg-hot
# without libbpf or libpcap), and libagg.so without libpcap.
#   util  logging, options, text, JSON, randomness, SipHash
#   plan  hosts files, plans, trees, the site secret
#   ops   block floating point, gradient files
#   hot   the sparse path's hot-set tools
#   tune  auto-tuning (AIACC Sec. VI): the bandit over search techniques,
#         the cache of tuned settings per plan fingerprint (util only)
#   dp    the data plane: loading, the node, sending, receiving, probes,
#         counters, live and captured checks (libbpf; checkpcap: libpcap)
#   api   the public C API (agg/agg.h) of libagg.so
LAYERS     := util plan ops hot tune dp
LAYER_LIBS  = $(foreach l,$(1),build/libagg-$(l).a)
LIB_SRC    := $(sort $(foreach l,$(LAYERS),$(wildcard lib/$(l)/*.c)))
API_OBJ    := build/lib/api/libagg.o build/lib/api/tuning.o
LIB_OBJ    := $(LIB_SRC:lib/%.c=build/lib/%.o) $(API_OBJ)
CMD_SRC    := $(sort $(wildcard cmd/agg-*.c))
TOOLS      := $(CMD_SRC:cmd/%.c=build/%)
BPF_SRC    := $(sort $(wildcard bpf/*.bpf.c))
BPF_OBJ    := $(BPF_SRC:bpf/%.bpf.c=build/%.bpf.o)
BPF_SKEL   := $(BPF_SRC:bpf/%.bpf.c=build/%.skel.h)
TEST_SRC   := $(sort $(wildcard t/unit/*.c))
TEST_BIN   := $(TEST_SRC:t/unit/%.c=build/t/%)
BENCH_SRC  := $(sort $(wildcard bench/*.c))
BENCH_BIN  := $(BENCH_SRC:bench/%.c=build/bench/%)
SO_MAJOR   := 1
SONAME     := libagg.so.$(SO_MAJOR)
SO_LIB     := build/$(SONAME).0.0
MAN_PAGES  := $(sort $(wildcard man/*.[1-8]))
# man 3 agg_open and the others: the exported names, each a link to libagg(3)
MAN3_LINKS := $(shell sed -n 's/^[[:space:]]*\(agg_[a-z_]*\);$$/\1/p' lib/api/libagg.map)
COMPLETIONS := $(sort $(wildcard completions/*.bash))
FUZZ_SRC   := $(sort $(wildcard t/fuzz/*.c))

all: $(BPF_OBJ) $(BPF_SKEL) $(TOOLS) $(TEST_BIN) $(BENCH_BIN) build/libagg.so build/agg.pc

# Skeletons are generated headers, and the tools' objects are named by
# their .d files once built: none is an intermediate file to delete (a
# deleted object made the next make, t/0920's make install among them,
# relink every tool under the tests running them).
.SECONDARY: $(BPF_OBJ) $(BPF_SKEL) $(TOOLS:%=%.o)

build build/t build/fuzz build/bench $(LAYERS:%=build/lib/%) build/lib/api:
	$(Q)mkdir -p $@

# BPF objects -> skeletons; every C file may include any skeleton.
build/%.bpf.o: bpf/%.bpf.c | build
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -c $< -o $@

build/%.skel.h: build/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*) > $@

# -fPIC: libagg.so is made of the same objects as libagg.a.
build/lib/%.o: lib/%.c $(BPF_SKEL) | $(LAYERS:%=build/lib/%) build/lib/api
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

define LAYER_RULE
build/libagg-$(1).a: $(patsubst lib/%.c,build/lib/%.o,$(wildcard lib/$(1)/*.c))
	$$(call msg,AR,$$@)
	$$(Q)rm -f $$@ && $$(AR) rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call LAYER_RULE,$(l))))

# libagg.so: the public API (lib/api) over the layers, whose objects the
# linker takes as needed; only agg/agg.h's symbols are exported, versioned
# (lib/api/libagg.map).
DP_LIBS    := $(call LAYER_LIBS,dp tune ops plan util)
$(SO_LIB): $(API_OBJ) $(DP_LIBS) lib/api/libagg.map
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) \
		-Wl,--version-script=lib/api/libagg.map -Wl,--no-undefined -Wl,--as-needed \
		-o $@ $(API_OBJ) $(DP_LIBS) $(LIBS_DP)

build/$(SONAME): $(SO_LIB)
	$(Q)ln -sf $(notdir $<) $@

build/libagg.so: build/$(SONAME)
	$(Q)ln -sf $(SONAME) $@

# agg.pc: build/agg.pc points into the build tree (PKG_CONFIG_PATH=build
# builds against it); `make install` writes its own with the install's paths.
AGG_PC = sed -e 's|@PREFIX@|$(1)|' -e 's|@INCLUDEDIR@|$(2)|' -e 's|@LIBDIR@|$(3)|' \
	-e 's|@VERSION@|$(VERSION)|' lib/api/agg.pc.in
build/agg.pc: lib/api/agg.pc.in Makefile | build
	$(Q)$(call AGG_PC,$(CURDIR),$(CURDIR)/lib/api,$(CURDIR)/build) >$@

# lib/ops/quant.c's loops vectorize at -O3 (gcc's -O2 cost model leaves them
# scalar): 4-8x faster conversion of every gradient (make bench, quant).
QUANT_CFLAGS ?= -O3
build/lib/ops/quant.o: CFLAGS += $(QUANT_CFLAGS)

# Every layer and the API in one, for the unit tests and the benchmarks.
build/libagg.a: $(LIB_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

build/%.o: cmd/%.c $(BPF_SKEL) | build
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# Each tool with its layers and their system libraries only.
TOOL_LIBS_plan := $(call LAYER_LIBS,plan util) $(LIBS_BASE)
TOOL_LIBS_hot  := $(call LAYER_LIBS,hot ops plan util) $(LIBS_BASE)
TOOL_LIBS_dp   := $(DP_LIBS) $(LIBS_DP)
TOOL_LIBS_check := $(DP_LIBS) -lpcap $(LIBS_DP)
TOOL_LIBS_agg-plan  = $(TOOL_LIBS_plan)
TOOL_LIBS_agg-hot   = $(TOOL_LIBS_hot)
TOOL_LIBS_agg-check = $(TOOL_LIBS_check)
build/agg-%: build/agg-%.o $(call LAYER_LIBS,$(LAYERS))
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(or $(TOOL_LIBS_agg-$*),$(TOOL_LIBS_dp))

build/t/%: t/unit/%.c build/libagg.a | build/t
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) -It/lib $(CFLAGS) -MMD -MP -o $@ $< build/libagg.a $(LDLIBS)

build/bench/%: bench/%.c build/libagg.a | build/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -o $@ $< build/libagg.a $(LDLIBS)

-include $(wildcard build/*.d build/lib/*/*.d build/t/*.d build/bench/*.d)

# ---- dependencies ------------------------------------------------------
# Debian packages needed to build and test; only the missing ones are
# installed (apt-get needs root; without it we say what to install).
DEB_PKGS := make gcc clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev \
            libpcap-dev libnuma-dev pkg-config iproute2 perl man-db \
            bash-completion jq libclang-rt-14-dev procps util-linux \
            iputils-ping netcat-openbsd tcpdump ethtool \
            python3 python3-numpy python3-torch python3-sklearn

deps:
	$(Q)missing=$$(for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -z "$$missing" ]; then echo "deps: all build dependencies present"; exit 0; fi; \
	echo "deps: installing" $$missing; \
	if [ "$$(id -u)" != 0 ]; then echo "deps: need root: apt-get install $$missing" >&2; exit 3; fi; \
	{ [ -n "$$(find /var/lib/apt/lists -name '*Packages*' -newermt '-7 days' 2>/dev/null | head -1)" ] || \
	  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 update -qq; } && \
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends $$missing

# ---- tests ---------------------------------------------------------------
check: deps
	$(Q)$(MAKE) all
	$(Q)AGG_BUILD=$(CURDIR)/build prove -j2 --timer $(PROVE_FLAGS) t/*.t

# Soak-sized runs, not in CI: the loss test at 100 + 100 + 20 iterations
# and the packet fuzzers at 5 and 1 million packets, with a time bound
# per file of 90 minutes.
soak: deps
	$(Q)$(MAKE) all
	$(Q)AGG_BUILD=$(CURDIR)/build AGG_TEST_TIMEOUT=5400 AGG_LOSS_ITERS_1=100 \
		AGG_LOSS_ITERS_10=100 AGG_LOSS_ITERS_RESULT=20 \
		prove --timer $(PROVE_FLAGS) t/0400-dp-loss.t
	$(Q)AGG_BUILD=$(CURDIR)/build AGG_TEST_TIMEOUT=5400 AGG_FUZZ_COUNT=5000000 \
		prove --timer $(PROVE_FLAGS) t/0430-dp-fuzz.t
	$(Q)AGG_BUILD=$(CURDIR)/build AGG_TEST_TIMEOUT=5400 AGG_FUZZ_COUNT=1000000 \
		prove --timer $(PROVE_FLAGS) t/0431-dp-fuzz-chunks.t
	$(Q)AGG_BUILD=$(CURDIR)/build AGG_TEST_TIMEOUT=5400 AGG_FLOOD_COUNT=5000 \
		prove --timer $(PROVE_FLAGS) t/0440-dp-intruders.t
	$(Q)AGG_BUILD=$(CURDIR)/build AGG_TEST_TIMEOUT=5400 AGG_LOSS_ITERS=12 \
		prove --timer $(PROVE_FLAGS) t/0305-dp-jumbo.t
	$(Q)AGG_BUILD=$(CURDIR)/build AGG_TEST_TIMEOUT=5400 AGG_LOSS_ITERS=20 \
		prove --timer $(PROVE_FLAGS) t/0315-dp-rat.t t/0316-dp-rat-regions.t
	$(Q)AGG_BUILD=$(CURDIR)/build AGG_TEST_TIMEOUT=5400 AGG_KILL_RUNS=60 \
		prove --timer $(PROVE_FLAGS) t/0410-dp-jobs.t

# Coverage-guided fuzzing of the parsers with libFuzzer (clang).
FUZZ_SECONDS ?= 60
fuzz: $(FUZZ_SRC:t/fuzz/%.c=build/fuzz/%)
	$(Q)for f in $^; do echo "fuzz: $$f for $(FUZZ_SECONDS)s"; \
		mkdir -p build/fuzz/corpus-$${f##*/}; \
		$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
		    -artifact_prefix=build/fuzz/ \
		    build/fuzz/corpus-$${f##*/} t/fuzz/seeds || exit 1; done

# The parsers' layers only, without libbpf or libpcap.
FUZZ_LIB_SRC := $(sort $(wildcard lib/util/*.c lib/plan/*.c lib/ops/*.c lib/hot/*.c))
build/fuzz/%: t/fuzz/%.c $(FUZZ_LIB_SRC) | build/fuzz
	$(call msg,FUZZ-CC,$@)
	$(Q)$(CLANG) $(CPPFLAGS) -g -O1 -fsanitize=fuzzer,address,undefined \
		-o $@ $< $(FUZZ_LIB_SRC) $(LIBS_BASE)

bench: deps
	$(Q)$(MAKE) all
	$(Q)AGG_BUILD=$(CURDIR)/build sh bench/run.sh

demo: deps
	$(Q)$(MAKE) all
	$(Q)AGG_BUILD=$(CURDIR)/build sh demo/run.sh

# A model trained by DDP on the virtual cluster through agg, then Gloo.
train: deps
	$(Q)$(MAKE) all
	$(Q)AGG_BUILD=$(CURDIR)/build sh demo/train.sh

# ---- install -------------------------------------------------------------
install: $(TOOLS) $(SO_LIB)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(COMPDIR) \
		$(DESTDIR)$(INCLUDEDIR)/agg $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 0755 $(TOOLS) $(DESTDIR)$(BINDIR)/
	install -m 0644 lib/api/agg/agg.h $(DESTDIR)$(INCLUDEDIR)/agg/
	install -m 0755 $(SO_LIB) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(SO_LIB)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libagg.so
	$(call AGG_PC,$(PREFIX),$(INCLUDEDIR),$(LIBDIR)) >$(DESTDIR)$(PKGCONFIGDIR)/agg.pc
	if [ -d python/agg ]; then install -d $(DESTDIR)$(PYTHONDIR)/agg && \
		install -m 0644 python/agg/*.py $(DESTDIR)$(PYTHONDIR)/agg/; fi
	for m in $(MAN_PAGES); do \
		install -m 0644 $$m $(DESTDIR)$(MANDIR)/man$${m##*.}/; done
	for f in $(MAN3_LINKS); do \
		echo .so man3/libagg.3 >$(DESTDIR)$(MANDIR)/man3/$$f.3; done
	for c in $(COMPLETIONS); do \
		n=$${c##*/}; install -m 0644 $$c $(DESTDIR)$(COMPDIR)/$${n%.bash}; done

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(TOOLS)))
	rm -f $(DESTDIR)$(INCLUDEDIR)/agg/agg.h $(DESTDIR)$(LIBDIR)/$(notdir $(SO_LIB)) \
		$(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libagg.so \
		$(DESTDIR)$(PKGCONFIGDIR)/agg.pc
	rm -rf $(DESTDIR)$(PYTHONDIR)/agg
	-rmdir $(DESTDIR)$(INCLUDEDIR)/agg 2>/dev/null
	for m in $(notdir $(MAN_PAGES)); do \
		rm -f $(DESTDIR)$(MANDIR)/man$${m##*.}/$$m; done
	for f in $(MAN3_LINKS); do rm -f $(DESTDIR)$(MANDIR)/man3/$$f.3; done
	for c in $(notdir $(COMPLETIONS)); do \
		rm -f $(DESTDIR)$(COMPDIR)/$${c%.bash}; done

clean:
	rm -rf build

.PHONY: all deps check soak fuzz bench demo train install uninstall clean
