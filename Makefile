# fedsvd — build, test, bench, demo.
#
#   make deps    install the Debian packages we build and test with (only missing ones)
#   make         binaries in build/bin/, the library in build/lib/
#   make test    everything: unit tests, the same under ASan/UBSan, CLI, integration
#                (real processes) and contract (OpenAPI) tests
#   make bench   benchmarks (print figures and ratios; assert nothing)
#   make demo    the main job (see README.md)
#   make clean

SHELL := /bin/bash
.DEFAULT_GOAL := all

# Debian 12 packages: build, test, demo.
DEB_BUILD := build-essential pkg-config libssl-dev libgmp-dev liblapacke-dev libopenblas-dev \
             libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev zlib1g-dev
DEB_TEST  := valgrind clang-format nodejs npm docker-compose
DEB_DEMO  := dataset-fashion-mnist
DEB_ALL   := $(DEB_BUILD) $(DEB_TEST) $(DEB_DEMO)

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
BENCHES   := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
SVC_BINS  := $(SERVICES:%=$(BUILD)/bin/%)
FEDSVD    := $(BUILD)/bin/fedsvd

.PHONY: all deps lib tests benches test test-unit test-asan test-cli test-valgrind bench demo clean format format-check \
        contract-deps test-integration test-contract deploy-deps test-deploy

all: $(LIBA) $(FEDSVD) $(SVC_BINS)

lib: $(LIBA)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

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

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LDLIBS)

tests: $(TESTS)
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

test: deps contract-deps deploy-deps
	$(MAKE) all tests
	$(MAKE) BUILD=build-asan SAN=1 all tests
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

test-deploy: all deploy-deps
	tests/deploy/run.sh $(BUILD)/bin

test-integration: all
	tests/integration/run.sh $(BUILD)/bin

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

format:
	clang-format -i $(shell find lib api cli services tests bench -name '*.[ch]' 2>/dev/null)

format-check:
	clang-format --dry-run --Werror $(shell find lib api cli services tests bench -name '*.[ch]' 2>/dev/null)

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
