# Kipp build. `make` builds build/kipp; `make test` builds the fixtures and
# runs every test; see README.md for the other targets.
#
# Layout: src/core, src/convert, src/ref, src/cpu form the engine library
# (linked as objects, not an archive, so every module is always present)
# (libc, libm, pthreads only); src/cli is the `kipp` binary. Files are found by
# wildcard, so adding a .c file needs no Makefile change. Per-ISA kernel files
# get their ISA flags here and nowhere else; the oracle (src/ref) never gets
# ISA flags or -ffast-math.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
CSTD     = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) -g -pthread -Iinclude -Isrc $(SANFLAGS) $(CFLAGS)
LDLIBS_ALL = -lm -pthread $(SANFLAGS)

ifeq ($(SAN),1)
  SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
ifeq ($(SAN),thread)
  SANFLAGS = -fsanitize=thread
endif

LIB_SRCS  := $(sort $(wildcard src/core/*.c src/convert/*.c src/ref/*.c src/cpu/*.c))
CLI_SRCS  := $(sort $(wildcard src/cli/*.c src/server/*.c))
TEST_SRCS := $(sort $(wildcard tests/unit/test_*.c))

LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
DEPS      := $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_BINS:=.d)

# Run-time-dispatched SIMD kernels: each tier's file alone gets its flags.
# Off x86-64 those files compile to nothing and get no flags.
ARCH := $(shell uname -m)
ifneq ($(filter x86_64 amd64,$(ARCH)),)
$(BUILD)/obj/src/cpu/kernels_avx512.o: ISA_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mfma -mf16c
$(BUILD)/obj/src/cpu/kernels_avx2.o:   ISA_FLAGS = -mavx2 -mfma -mf16c
endif

.PHONY: all test test-run test-deps test-tiers test-sanitize test-tsan test-full test-full-run \
        demo clean fixtures tokenizer fuzz-gguf fuzz-json fuzz-tokenizer lint bench

all: $(BUILD)/kipp

$(BUILD)/kipp: $(CLI_OBJS) $(LIB_OBJS)
	$(CC) $(CFLAGS_ALL) -o $@ $(CLI_OBJS) $(LIB_OBJS) $(LDLIBS_ALL)

$(BUILD)/libkipp.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/unit/%.c tests/unit/test_util.h $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/unit -MMD -MP -o $@ $< $(LIB_OBJS) $(LDLIBS_ALL)

# The HTTP parser knows nothing of the engine; its test links it alone.
$(BUILD)/tests/test_http: tests/unit/test_http.c tests/unit/test_util.h $(BUILD)/obj/src/server/http.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/unit -MMD -MP -o $@ $< $(BUILD)/obj/src/server/http.o $(LDLIBS_ALL)

-include $(DEPS)

# ---- fixtures: tokenizer files and synthetic checkpoints --------------------

TOKENIZER_DIR = $(BUILD)/cache/tokenizer-qwen3
tokenizer: $(TOKENIZER_DIR)/tokenizer.json
$(TOKENIZER_DIR)/tokenizer.json: tools/fetch_tokenizer.sh
	sh tools/fetch_tokenizer.sh $(TOKENIZER_DIR)

MODELS = $(BUILD)/models
$(MODELS)/%/config.json: $(BUILD)/kipp $(TOKENIZER_DIR)/tokenizer.json
	$(BUILD)/kipp synth $* $(MODELS)/$* --tokenizer-dir $(TOKENIZER_DIR)
$(MODELS)/%.gguf: $(MODELS)/%/config.json
	$(BUILD)/kipp convert $(MODELS)/$* -o $@

# Quantized artifacts of a fixture (issue 6): NAME.SCHEME.gguf, converted
# from the same checkpoint directory. The stem (NAME) is shorter than the
# plain rule's, so make picks these rules for the dotted names.
$(MODELS)/%.q8_0.gguf: $(MODELS)/%/config.json
	$(BUILD)/kipp convert $(MODELS)/$* -o $@ --quant q8_0
$(MODELS)/%.affine4_gs32.gguf: $(MODELS)/%/config.json
	$(BUILD)/kipp convert $(MODELS)/$* -o $@ --quant affine4_gs32
$(MODELS)/%.scale4_gs32.gguf: $(MODELS)/%/config.json
	$(BUILD)/kipp convert $(MODELS)/$* -o $@ --quant scale4_gs32
QUANT_FIXTURES = $(foreach q,q8_0 affine4_gs32 scale4_gs32,$(MODELS)/synthetic-tiny.$(q).gguf)

# config.json is the pattern chain's middle file; keep it (make would delete
# it as an intermediate, and the FP64 reference reads the HF directory).
.PRECIOUS: $(MODELS)/%/config.json

fixtures: $(BUILD)/kipp $(MODELS)/synthetic-tiny.gguf $(MODELS)/synthetic-tiny-instruct.gguf \
          $(QUANT_FIXTURES)

# ---- tests -------------------------------------------------------------

# `make test` on a fresh clone is the whole set-up: test-deps first (node
# packages from the committed lock file, Debian data files; .ci/run uses the
# same target), then the build, the fixtures and every test. Two steps so
# that npm ci never rewrites node_modules while a fixture rule reads it.
test: test-deps
	@$(MAKE) --no-print-directory test-run

test-run: all fixtures $(TEST_BINS)
	BUILD=$(BUILD) sh tests/run.sh

test-deps:
	@sh tools/test_deps.sh node
	@sh tools/test_deps.sh debian

# The whole suite again with the cpu backend forced to each lower kernel
# tier (KIPP_CPU_ISA caps the tiers the tier-looping tests run, and every
# other cpu-backend test and `kipp` command runs at that tier): what an
# AVX2-only or a non-x86 machine would see. Logs: $(BUILD)/test-logs-TIER.
test-tiers: test-deps
	@$(MAKE) --no-print-directory all fixtures $(TEST_BINS)
	KIPP_CPU_ISA=avx2 BUILD=$(BUILD) sh tests/run.sh
	KIPP_CPU_ISA=generic BUILD=$(BUILD) sh tests/run.sh

test-sanitize:
	$(MAKE) BUILD=build/asan SAN=1 OPT=-O1 test

test-tsan:
	$(MAKE) BUILD=build/tsan SAN=thread OPT=-O1 CC=clang test

test-full: test-deps
	@$(MAKE) --no-print-directory test-full-run

test-full-run: all fixtures $(TEST_BINS) $(MODELS)/synthetic-0.6b.gguf \
           $(foreach q,q8_0 affine4_gs32 scale4_gs32,$(MODELS)/synthetic-0.6b.$(q).gguf)
	BUILD=$(BUILD) KIPP_TEST_FULL=1 sh tests/run.sh

# ---- fuzzing (clang libFuzzer; bounded time) ----------------------------

FUZZ_SECONDS ?= 60
FUZZ_FLAGS = $(CSTD) -g -O1 -Iinclude -Isrc -fsanitize=fuzzer,address,undefined
# The fuzzed parsers (gguf, artifact, tokenizer) live in src/core; the CPU
# backend's dispatch needs the per-ISA kernel files and their flags, so the
# fuzz builds link the core alone (backends are weak references there).
FUZZ_LIB_SRCS = $(sort $(wildcard src/core/*.c))

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(LIB_SRCS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $< $(FUZZ_LIB_SRCS) -lm -pthread

fuzz-gguf: $(BUILD)/fuzz/fuzz_gguf
	@mkdir -p $(BUILD)/fuzz/corpus-gguf
	$< -max_total_time=$(FUZZ_SECONDS) -max_len=65536 $(BUILD)/fuzz/corpus-gguf tests/fuzz/seeds-gguf

# The JSON parser depends on nothing but common.c: link only those.
$(BUILD)/fuzz/fuzz_json: tests/fuzz/fuzz_json.c src/core/json.c src/core/common.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $^ -lm

fuzz-json: $(BUILD)/fuzz/fuzz_json
	@mkdir -p $(BUILD)/fuzz/corpus-json
	$< -max_total_time=$(FUZZ_SECONDS) -max_len=65536 $(BUILD)/fuzz/corpus-json tests/fuzz/seeds-json

fuzz-tokenizer: $(BUILD)/fuzz/fuzz_tokenizer $(MODELS)/synthetic-tiny.gguf
	@mkdir -p $(BUILD)/fuzz/corpus-tokenizer
	KIPP_FUZZ_MODEL=$(MODELS)/synthetic-tiny.gguf $< -max_total_time=$(FUZZ_SECONDS) $(BUILD)/fuzz/corpus-tokenizer

# ---- demo --------------------------------------------------------------

demo: all $(MODELS)/synthetic-tiny-instruct.gguf
	sh tools/demo.sh $(BUILD)

clean:
	rm -rf build
