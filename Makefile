# fedsvd — build, test, bench, demo.
#
#   make deps    install the Debian packages we build and test with (only missing ones)
#   make         binaries in build/bin/, the library in build/lib/
#   make test    everything: unit tests, the same under ASan/UBSan, CLI, integration
#                (real processes), contract (OpenAPI) tests and the dashboard in a
#                real browser (Debian's chromium)
#   make bench   benchmarks (print figures and ratios; assert nothing)
#   make demo    the main job (see README.md)
#   make clean

SHELL := /bin/bash
.DEFAULT_GOAL := all

# Debian 12 packages: build, test, demo.
DEB_BUILD := build-essential pkg-config libssl-dev libgmp-dev liblapacke-dev libopenblas-dev \
             libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev zlib1g-dev
DEB_TEST  := valgrind clang-format nodejs npm docker-compose chromium openssl curl sqlite3 iproute2 strace
DEB_DEMO  := dataset-fashion-mnist fortunes
DEB_ALL   := $(DEB_BUILD) $(DEB_TEST) $(DEB_DEMO)
# only for `make fuzz` (libFuzzer is part of clang's runtime libraries)
DEB_FUZZ  := clang libclang-rt-14-dev

PKGS := openblas lapacke gmp libcrypto zlib jansson libmicrohttpd libcurl sqlite3

BUILD ?= build
SAN   ?= 0

CC      ?= cc
WARN    := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Werror
DEFS    := -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L
# no errno from libm calls (we test isfinite instead): llrint, sqrt, ... then
# compile to single instructions (fixed-point encoding: cvtsd2si, not a call);
# GCC 12's -O2 vectorizes only loops whose trip count needs no epilogue: the
# "cheap" model also takes the PRG and fixed-point loops (element-wise, so
# floating-point results are unchanged)
MATH    := -fno-math-errno -fvect-cost-model=cheap
OPT     := -O2 -g
ifeq ($(SAN),1)
OPT     := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
# The fuzzing build (make fuzz runs this Makefile again with FUZZING=1 and
# BUILD=$(BUILD)/fuzz): clang, coverage for libFuzzer, ASan and UBSan. No
# -Werror (gcc's build is the warnings gate) and no gcc-only flags.
ifeq ($(FUZZING),1)
CC      := clang
WARN    := -std=c11 -Wall -Wextra
MATH    := -fno-math-errno
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
           -fno-sanitize-recover=undefined
endif
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS  := $(WARN) $(DEFS) $(MATH) $(OPT) -Ilib -Iapi -I. $(PKG_CFLAGS) -MMD -MP
LDFLAGS := $(OPT)
LDLIBS   = $(PKG_LIBS) -lpthread -lmvec -lm

LIB_DIRS  ?= lib api
LIB_SRC   := $(shell find $(LIB_DIRS) -name '*.c' 2>/dev/null | sort)
CLI_SRC   := $(wildcard cli/*.c)
TEST_SRC  := $(wildcard tests/unit/test_*.c)
BENCH_SRC := $(wildcard bench/bench_*.c)
SERVICES  := $(notdir $(wildcard services/*))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
LIBA      := $(BUILD)/lib/libfedsvd.a
TESTS     := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# Fuzz harnesses (tests/fuzz/fuzz_*.c): with driver.c they replay their
# corpus in every build (make tests); with libFuzzer they fuzz (make fuzz).
FUZZ_SRC    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES  := $(FUZZ_SRC:tests/fuzz/%.c=%)
FUZZ_REPLAY := $(FUZZ_NAMES:%=$(BUILD)/fuzz-replay/%)
FUZZ_OBJ    := $(FUZZ_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tests/fuzz/driver.o
FUZZ_SECONDS ?= 60
BENCHES   := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
# Objects that only pattern rules name: make would take them for intermediate
# files and delete them after linking, so the next build (make demo after
# make, a change in the library) compiled every service, test and benchmark
# again. .SECONDARY keeps them.
SVC_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard services/*/*.c))
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)
SVC_BINS  := $(SERVICES:%=$(BUILD)/bin/%)
FEDSVD    := $(BUILD)/bin/fedsvd

# The version (--version, /healthz, User-Agent): the VERSION file, plus the
# checkout's `git describe --always --tags` ("g" before a bare commit,
# "-dirty" when tracked files changed) when this is a git checkout, none in a
# tarball or at exactly the release's tag. Only lib/core/version.c is compiled
# with it, and only when $(BUILD)/version.txt changes: a new commit recompiles
# that one file and relinks. (git status without optional locks, not describe
# --dirty, which would write the index.)
FS_VERSION  := $(shell tr -cd '0-9A-Za-z.+-' < VERSION 2>/dev/null)
FS_VERSION  := $(or $(FS_VERSION),unknown)
FS_REVISION := $(shell [ -e .git ] && d=$$(git describe --always --tags 2>/dev/null) || exit 0; \
                 case $$d in (*[!0-9a-f]*) ;; (*) d=g$$d;; esac; \
                 [ -z "$$(GIT_OPTIONAL_LOCKS=0 git status --porcelain --untracked-files=no 2>/dev/null)" ] || d=$$d-dirty; \
                 case $$d in ($(FS_VERSION)|v$(FS_VERSION)) ;; (*) printf '%s' "$$d" | tr -cd '0-9A-Za-z.+_-';; esac)
VERSION_STAMP := $(BUILD)/version.txt
$(shell mkdir -p $(BUILD) && v='$(FS_VERSION) $(FS_REVISION)' && \
        { [ "$$(cat $(VERSION_STAMP) 2>/dev/null)" = "$$v" ] || printf '%s\n' "$$v" > $(VERSION_STAMP); })

.PHONY: all deps lib tests benches fuzz fuzzers fuzz-deps test test-unit test-asan test-cli test-valgrind bench demo demo-lsa clean format format-check \
        contract-deps test-integration test-chaos test-contract deploy-deps test-deploy browser-deps test-browser

all: $(LIBA) $(FEDSVD) $(SVC_BINS)

lib: $(LIBA)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/lib/core/version.o: $(VERSION_STAMP)
$(BUILD)/obj/lib/core/version.o: CFLAGS += -DFS_VERSION='"$(FS_VERSION)"' -DFS_REVISION='"$(FS_REVISION)"'

.SECONDARY: $(SVC_OBJ) $(TEST_OBJ) $(BENCH_OBJ) $(FUZZ_OBJ)

$(LIBA): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(FEDSVD): $(CLI_OBJ) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIBA) $(LDLIBS)

.SECONDEXPANSION:
# (No patsubst here: make replaces every % of a pattern rule's prerequisites
# with the stem, also inside functions, so "%.c" would become "<service>.c".)
$(BUILD)/bin/%: $$(subst services/,$(BUILD)/obj/services/,$$(subst .c,.o,$$(wildcard services/%/*.c))) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBA) $(LDLIBS)

# The dashboard's page, script and style are compiled in (.incbin).
$(BUILD)/obj/services/aggregation-server/dashboard.o: $(wildcard services/aggregation-server/dashboard/*)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LDLIBS)

tests: $(TESTS) $(FUZZ_REPLAY)

$(BUILD)/fuzz-replay/%: $(BUILD)/obj/tests/fuzz/%.o $(BUILD)/obj/tests/fuzz/driver.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/obj/tests/fuzz/driver.o $(LIBA) $(LDLIBS)

# libFuzzer binaries (inside the FUZZING=1 build).
$(BUILD)/fuzzers/%: $(BUILD)/obj/tests/fuzz/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(LIBA) $(LDLIBS)

fuzzers: $(FUZZ_NAMES:%=$(BUILD)/fuzzers/%)

# Each harness for FUZZ_SECONDS (default 60), or for FUZZ_RUNS executions when
# that is set, from its corpus (tests/fuzz/corpus/<name>; new inputs go to
# $(BUILD)/fuzz/corpus/<name>, crashes to $(BUILD)/fuzz/crashes/).
# FUZZ_TARGETS="fuzz_npy fuzz_http" runs some only.
fuzz: fuzz-deps
	$(MAKE) BUILD=$(BUILD)/fuzz FUZZING=1 fuzzers
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) tests/fuzz/fuzz.sh $(BUILD)/fuzz $(FUZZ_TARGETS)

fuzz-deps:
	@$(MAKE) --no-print-directory deps DEB_ALL="$(DEB_FUZZ)"
benches: $(BENCHES)

# Install only what is missing; apt-get update only when something is.
# nodejs/npm (the contract tests' linter and validating proxy) count as present
# when an npm is on PATH: a NodeSource nodejs bundles npm and conflicts with
# Debian's npm package.
deps:
	@missing=""; for p in $(DEB_ALL); do \
	  case $$p in nodejs|npm) command -v npm >/dev/null 2>&1 && continue;; esac; \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	else echo "deps: all Debian packages present"; fi

# The two builds use every CPU unless make was given -j (CI runs plain
# `make test`: a serial build took minutes of its time budget).
TEST_MAKE_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))
test: deps contract-deps deploy-deps browser-deps
	$(MAKE) $(TEST_MAKE_JOBS) all tests
	$(MAKE) $(TEST_MAKE_JOBS) BUILD=build-asan SAN=1 all tests
	tests/run_all.sh

# The contract tests' npm packages (pinned in tests/contract/package-lock.json),
# installed only when node_modules is missing or older than the lock file.
contract-deps: deps
	@if [ tests/contract/node_modules/.package-lock.json -nt tests/contract/package-lock.json ]; then \
	  echo "contract-deps: node_modules up to date"; \
	else \
	  cd tests/contract && npm ci --no-audit --no-fund --loglevel=error; \
	fi

# The deployment checks' npm packages (dockerfilelint, js-yaml), pinned in
# tests/deploy/package-lock.json.
deploy-deps: deps
	@if [ tests/deploy/node_modules/.package-lock.json -nt tests/deploy/package-lock.json ]; then \
	  echo "deploy-deps: node_modules up to date"; \
	else \
	  cd tests/deploy && npm ci --no-audit --no-fund --loglevel=error; \
	fi

# The browser test's playwright-core (pinned in tests/browser/package-lock.json;
# it drives Debian's chromium, from `make deps`, and downloads no browser).
browser-deps: deps
	@if [ tests/browser/node_modules/.package-lock.json -nt tests/browser/package-lock.json ]; then \
	  echo "browser-deps: node_modules up to date"; \
	else \
	  cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error; \
	fi

test-browser: all browser-deps
	tests/browser/run.sh $(BUILD)/bin

test-deploy: all deploy-deps
	tests/deploy/run.sh $(BUILD)/bin

test-integration: all
	tests/integration/run.sh $(BUILD)/bin

# The whole crash matrix (tests/chaos/matrix.txt); `make test` runs its quick part.
test-chaos: all
	CHAOS_FULL=1 tests/chaos/run.sh $(BUILD)/bin

test-contract: all contract-deps
	tests/contract/run.sh $(BUILD)/bin

test-unit: all tests
	tests/run_unit.sh $(BUILD)/tests unit

test-asan:
	$(MAKE) BUILD=build-asan SAN=1 tests
	ASAN_OPTIONS=detect_leaks=1 tests/run_unit.sh build-asan/tests asan

# valgrind (memcheck) over every unit-test program of the normal build.
test-valgrind: all tests
	@fail=0; for t in $(TESTS); do \
	  echo "== valgrind $$t"; \
	  FS_TEST_QUICK=1 valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	    $$t >/dev/null || fail=1; \
	done; exit $$fail

test-cli: all
	tests/cli/run.sh $(FEDSVD)

bench: deps
	$(MAKE) all benches
	bench/run.sh $(BUILD)

demo: deps
	$(MAKE) all
	scripts/demo.sh

# Federated LSA of Debian's fortunes split into three parties by category:
# top terms per component, agreement with the pooled computation, lsa.svg.
demo-lsa: deps
	$(MAKE) all
	scripts/demo-lsa.sh $(BUILD)/bin demo-lsa

format:
	clang-format -i $(shell find lib api cli services tests bench -name '*.[ch]' 2>/dev/null)

format-check:
	clang-format --dry-run --Werror $(shell find lib api cli services tests bench -name '*.[ch]' 2>/dev/null)

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
