# Kipp build. `make` builds build/kipp, build/libkipp.a and build/libkipp.so;
# `make test` builds the fixtures and runs every test; `make install
# PREFIX=... [DESTDIR=...]` installs; see README.md for the other targets.
#
# Layout: src/core, src/ref, src/cpu and src/backends.c form the engine
# library libkipp (libc, libm, pthreads only; its API is include/kipp.h).
# src/convert (the converter and `kipp synth`, tooling) is not part of the
# library: it is linked into the `kipp` binary (src/cli, src/server) and the
# tests only. Files are found by wildcard, so adding a .c file needs no
# Makefile change. Per-ISA kernel files get their ISA flags here and nowhere
# else; the oracle (src/ref) never gets ISA flags or -ffast-math.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
CSTD     = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -ffp-contract=off
WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) -g -pthread -Iinclude -Isrc $(SANFLAGS) $(CFLAGS)
LDLIBS_ALL = -lm -pthread $(SANFLAGS)

ifeq ($(SAN),1)
  SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
ifeq ($(SAN),thread)
  SANFLAGS = -fsanitize=thread
endif

LIB_SRCS  := $(sort $(wildcard src/core/*.c src/ref/*.c src/cpu/*.c)) src/backends.c
TOOL_SRCS := $(sort $(wildcard src/convert/*.c))
CLI_SRCS  := $(sort $(wildcard src/cli/*.c src/server/*.c))
TEST_SRCS := $(sort $(wildcard tests/unit/test_*.c))

LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TOOL_OBJS := $(TOOL_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
AMX_EMU_OBJ := $(BUILD)/obj/tests/unit/amx_emulated.o
DEPS      := $(LIB_OBJS:.o=.d) $(TOOL_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_BINS:=.d) \
             $(BUILD)/obj/tests/unit/amx_emulated.d

# Library objects are position-independent (one object set serves the
# binary, libkipp.a and libkipp.so: with hidden visibility -fPIC generates
# the same kernel code as the compiler's default -fPIE, see docs/API.md)
# and export nothing but what include/kipp.h marks KIPP_API.
$(LIB_OBJS): LIB_FLAGS = -fPIC -fvisibility=hidden

# The version lives in include/kipp.h alone; the soname carries the major.
VERSION       := $(shell sed -n 's/^\#define KIPP_VERSION_STRING "\(.*\)"/\1/p' include/kipp.h)
VERSION_MAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME        := libkipp.so.$(VERSION_MAJOR)
SHARED_LIB    := $(BUILD)/libkipp.so.$(VERSION)
# A sanitized shared object leaves the sanitizer runtime to the executable,
# so only a plain build can insist on no undefined symbols.
SHARED_LDFLAGS = -shared -Wl,-soname,$(SONAME) $(if $(SAN),,-Wl,--no-undefined)

PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR      = $(PREFIX)/bin
LIBDIR      = $(PREFIX)/lib
INCLUDEDIR  = $(PREFIX)/include
PKGCONFIGDIR = $(LIBDIR)/pkgconfig

# Run-time-dispatched SIMD kernels: each tier's file alone gets its flags.
# Off x86-64 those files compile to nothing and get no flags.
ARCH := $(shell uname -m)
ifneq ($(filter x86_64 amd64,$(ARCH)),)
$(BUILD)/obj/src/cpu/kernels_avx512.o: ISA_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
$(BUILD)/obj/src/cpu/kernels_avx512_vbmi.o: ISA_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vbmi -mfma -mf16c
$(BUILD)/obj/src/cpu/kernels_avx512bf16.o: ISA_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mfma -mf16c
$(BUILD)/obj/src/cpu/kernels_avx2.o:   ISA_FLAGS = -mavx2 -mfma -mf16c
$(BUILD)/obj/src/cpu/kernels_avx2i8.o: ISA_FLAGS = -mavx2 -mfma -mf16c
$(BUILD)/obj/src/cpu/kernels_avx2i8_vnni.o: ISA_FLAGS = -mavx2 -mfma -mf16c -mavx512f -mavx512vl -mavx512vnni
$(BUILD)/obj/src/cpu/kernels_avx512i8.o: ISA_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c
$(BUILD)/obj/src/cpu/kernels_amx.o:    ISA_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mfma -mf16c -mamx-tile -mamx-bf16
AMX_EMU_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
endif

.PHONY: all lib install uninstall test test-run test-deps test-tiers test-sanitize test-tsan \
        test-compilers \
        test-full test-full-run demo clean fixtures tokenizer fuzz-gguf fuzz-json fuzz-tokenizer \
        fuzz-http fuzz-schema fuzz-chat-output fuzz-api fuzz-vocab fuzz-hf-config fuzz-safetensors \
        lint bench

all: $(BUILD)/kipp lib $(BUILD)/kernel_micro

lib: $(BUILD)/libkipp.a $(BUILD)/libkipp.so

$(BUILD)/kipp: $(CLI_OBJS) $(TOOL_OBJS) $(LIB_OBJS)
	$(CC) $(CFLAGS_ALL) -o $@ $(CLI_OBJS) $(TOOL_OBJS) $(LIB_OBJS) $(LDLIBS_ALL)

# One tier's kernel alone, timed (bench/kernel_micro.c; docs/BENCHMARKS.md):
# built with `all` so that it keeps compiling.
$(BUILD)/kernel_micro: bench/kernel_micro.c $(BUILD)/libkipp.a
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libkipp.a $(LDLIBS_ALL)

$(BUILD)/libkipp.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SHARED_LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SHARED_LDFLAGS) -o $@ $(LIB_OBJS) $(LDLIBS_ALL)

# libkipp.so -> libkipp.so.MAJOR (the soname) -> libkipp.so.MAJOR.MINOR.PATCH
$(BUILD)/libkipp.so: $(SHARED_LIB)
	ln -sf $(notdir $(SHARED_LIB)) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LIB_FLAGS) $(ISA_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/unit/%.c tests/unit/test_util.h $(AMX_EMU_OBJ) $(LIB_OBJS) $(TOOL_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/unit -MMD -MP -o $@ $< $(AMX_EMU_OBJ) $(LIB_OBJS) $(TOOL_OBJS) \
	    $(LDLIBS_ALL)

# The AMX matmuls over emulated tile operations (tests/unit/amx_emulated.c):
# compiled with the AVX-512 flags their repacking needs, linked into every
# test; test_cpu_amx and the tier walks (test_tiers.h) call them only where
# the processor has AVX512_BF16.
$(AMX_EMU_OBJ): tests/unit/amx_emulated.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(AMX_EMU_FLAGS) -MMD -MP -c $< -o $@

# The HTTP parser knows nothing of the engine; its test links it alone.
$(BUILD)/tests/test_http: tests/unit/test_http.c tests/unit/test_util.h $(BUILD)/obj/src/server/http.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/unit -MMD -MP -o $@ $< $(BUILD)/obj/src/server/http.o $(LDLIBS_ALL)

# The chat output splitter is server code with no engine state; its test
# links it with the library objects (json, chat).
$(BUILD)/tests/test_chat_output: tests/unit/test_chat_output.c tests/unit/test_util.h \
                                 $(BUILD)/obj/src/server/chat_output.o $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/unit -MMD -MP -o $@ $< $(BUILD)/obj/src/server/chat_output.o \
	    $(LIB_OBJS) $(LDLIBS_ALL)

# The request parser, as the server calls it: its own sources, the splitter
# it configures and the library objects (a model's tokenizer and template).
API_TEST_OBJS = $(patsubst %,$(BUILD)/obj/src/server/%.o,api_openai api_tools chat_output)

$(BUILD)/tests/test_api_openai: tests/unit/test_api_openai.c tests/unit/test_util.h \
                                $(API_TEST_OBJS) $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/unit -MMD -MP -o $@ $< $(API_TEST_OBJS) $(LIB_OBJS) $(LDLIBS_ALL)

-include $(DEPS)

# ---- install -------------------------------------------------------------

# kipp.pc is written at install time: it records PREFIX, not DESTDIR (a
# staged install is moved to PREFIX before anyone reads it).
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
	           $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 $(BUILD)/kipp $(DESTDIR)$(BINDIR)/kipp
	install -m 644 $(BUILD)/libkipp.a $(DESTDIR)$(LIBDIR)/libkipp.a
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(LIBDIR)/$(notdir $(SHARED_LIB))
	ln -sf $(notdir $(SHARED_LIB)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libkipp.so
	install -m 644 include/kipp.h $(DESTDIR)$(INCLUDEDIR)/kipp.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    kipp.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/kipp.pc

# Removes exactly what install wrote (directories are left: they may be shared).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/kipp $(DESTDIR)$(LIBDIR)/libkipp.a \
	      $(DESTDIR)$(LIBDIR)/libkipp.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
	      $(DESTDIR)$(LIBDIR)/$(notdir $(SHARED_LIB)) $(DESTDIR)$(INCLUDEDIR)/kipp.h \
	      $(DESTDIR)$(PKGCONFIGDIR)/kipp.pc

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

# test_install.sh builds an example against the installed library: it
# needs this build's compiler and sanitizer flags to link it.
TEST_ENV = BUILD=$(BUILD) KIPP_TEST_CC='$(CC)' KIPP_TEST_SAN='$(SAN)' \
           KIPP_TEST_SANFLAGS='$(SANFLAGS)'

# `make test` on a fresh clone is the whole set-up: test-deps first (node
# packages from the committed lock file, Debian packages; .ci/run uses the
# same target), then the build, the fixtures and every test. Two steps so
# that npm ci never rewrites node_modules while a fixture rule reads it.
test: test-deps
	@$(MAKE) --no-print-directory test-run

test-run: all fixtures $(TEST_BINS)
	$(TEST_ENV) sh tests/run.sh

test-deps:
	@sh tools/test_deps.sh node
	@sh tools/test_deps.sh debian

# The whole suite again with the cpu backend forced to each lower kernel
# tier (KIPP_CPU_ISA caps the tiers the tier-looping tests run, and every
# other cpu-backend test and `kipp` command runs at that tier): what an
# AVX2-only or a non-x86 machine would see. Where the processor has AMX
# (amx_bf16), first a pass with the opt-in amx tier forced, and where it has
# AVX512_BF16 one with the opt-in avx512bf16 tier (auto never picks them,
# so only these passes run every cpu-backend test and `kipp` command on
# them; their oracle gates use those tiers' own bounds).
# Logs: $(BUILD)/test-logs-TIER.
test-tiers: test-deps
	@$(MAKE) --no-print-directory all fixtures $(TEST_BINS)
	if grep -qw amx_bf16 /proc/cpuinfo; then KIPP_CPU_ISA=amx $(TEST_ENV) sh tests/run.sh; fi
	if grep -qw avx512_bf16 /proc/cpuinfo; then KIPP_CPU_ISA=avx512bf16 $(TEST_ENV) sh tests/run.sh; fi
	KIPP_CPU_ISA=avx2 $(TEST_ENV) sh tests/run.sh
	KIPP_CPU_ISA=generic $(TEST_ENV) sh tests/run.sh

test-sanitize:
	$(MAKE) BUILD=build/asan SAN=1 OPT=-O1 test

test-tsan:
	$(MAKE) BUILD=build/tsan SAN=thread OPT=-O1 CC=clang test

# gcc and clang builds must compute the same logits bit for bit, on every
# tier this processor runs (tests/scripts/compare_compilers.sh).
test-compilers: all fixtures
	@$(MAKE) --no-print-directory BUILD=build/clang CC=clang build/clang/kipp
	sh tests/scripts/compare_compilers.sh $(BUILD)/kipp build/clang/kipp $(MODELS)

test-full: test-deps
	@$(MAKE) --no-print-directory test-full-run

test-full-run: all fixtures $(TEST_BINS) $(MODELS)/synthetic-0.6b.gguf \
           $(foreach q,q8_0 affine4_gs32 scale4_gs32,$(MODELS)/synthetic-0.6b.$(q).gguf)
	$(TEST_ENV) KIPP_TEST_FULL=1 sh tests/run.sh

# ---- fuzzing (clang libFuzzer; bounded time) ----------------------------

FUZZ_SECONDS ?= 60
# -fno-sanitize-recover: an UBSan report stops the run as a crash would
# (recovering, it printed a line and went on, and a run "found nothing").
FUZZ_FLAGS = $(CSTD) -g -O1 -Iinclude -Isrc -fsanitize=fuzzer,address,undefined \
             -fno-sanitize-recover=all
# The fuzzed parsers (gguf, artifact, tokenizer) live in src/core; the CPU
# backend's dispatch needs the per-ISA kernel files and their flags, so the
# fuzz builds link the core alone with an empty backend table
# (tests/fuzz/backends_none.c stands in for src/backends.c).
FUZZ_LIB_SRCS = $(sort $(wildcard src/core/*.c)) tests/fuzz/backends_none.c

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_SRCS)
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

# The server's parsers of what a client sends. http.c needs libc alone;
# chat_output.c (model output -> reasoning/content/tool calls) needs the
# core's JSON and chat code. The schema compiler and grammar are core
# (the generic rule above) and need a model's vocabulary.
$(BUILD)/fuzz/fuzz_http: tests/fuzz/fuzz_http.c src/server/http.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $^

fuzz-http: $(BUILD)/fuzz/fuzz_http
	@mkdir -p $(BUILD)/fuzz/corpus-http
	$< -max_total_time=$(FUZZ_SECONDS) -max_len=65536 $(BUILD)/fuzz/corpus-http tests/fuzz/seeds-http

$(BUILD)/fuzz/fuzz_chat_output: tests/fuzz/fuzz_chat_output.c src/server/chat_output.c $(FUZZ_LIB_SRCS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $< src/server/chat_output.c $(FUZZ_LIB_SRCS) -lm -pthread

fuzz-chat-output: $(BUILD)/fuzz/fuzz_chat_output
	@mkdir -p $(BUILD)/fuzz/corpus-chat-output
	$< -max_total_time=$(FUZZ_SECONDS) -max_len=16384 $(BUILD)/fuzz/corpus-chat-output tests/fuzz/seeds-chat-output

fuzz-schema: $(BUILD)/fuzz/fuzz_schema $(MODELS)/synthetic-tiny.gguf
	@mkdir -p $(BUILD)/fuzz/corpus-schema
	KIPP_FUZZ_MODEL=$(MODELS)/synthetic-tiny.gguf $< -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
		$(BUILD)/fuzz/corpus-schema tests/fuzz/seeds-schema

# The request-body parser (api_openai.c, api_tools.c) and the response
# formatting it feeds: the core plus chat_output.c, no scheduler or HTTP.
# An instruct model, so chat requests render through a template.
FUZZ_API_SRCS = src/server/api_openai.c src/server/api_tools.c src/server/chat_output.c

$(BUILD)/fuzz/fuzz_api: tests/fuzz/fuzz_api.c $(FUZZ_API_SRCS) $(FUZZ_LIB_SRCS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $< $(FUZZ_API_SRCS) $(FUZZ_LIB_SRCS) -lm -pthread

fuzz-api: $(BUILD)/fuzz/fuzz_api $(MODELS)/synthetic-tiny-instruct.gguf
	@mkdir -p $(BUILD)/fuzz/corpus-api
	KIPP_FUZZ_MODEL=$(MODELS)/synthetic-tiny-instruct.gguf $< -max_total_time=$(FUZZ_SECONDS) \
		-max_len=65536 $(BUILD)/fuzz/corpus-api tests/fuzz/seeds-api

# What a downloaded checkpoint feeds the converter: fuzz_NAME fuzzes
# src/convert/NAME.c on the core -- vocab (tokenizer.json and
# tokenizer_config.json, and the tokenizer the loader builds from them),
# hf_config (config.json, generation_config.json against the registry),
# safetensors (the weight files' reader).
FUZZ_CONVERT = vocab hf_config safetensors
$(FUZZ_CONVERT:%=$(BUILD)/fuzz/fuzz_%): $(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c src/convert/%.c \
		$(FUZZ_LIB_SRCS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $< src/convert/$*.c $(FUZZ_LIB_SRCS) -lm -pthread

# $(call fuzz_bounded,NAME,MAX_LEN): a FUZZ_SECONDS run of the prerequisite
# on corpus-NAME (grows) and seeds-NAME (committed, read only)
fuzz_bounded = mkdir -p $(BUILD)/fuzz/corpus-$(1) && $< -max_total_time=$(FUZZ_SECONDS) \
	-max_len=$(2) $(BUILD)/fuzz/corpus-$(1) tests/fuzz/seeds-$(1)

fuzz-vocab: $(BUILD)/fuzz/fuzz_vocab
	$(call fuzz_bounded,vocab,131072)
fuzz-hf-config: $(BUILD)/fuzz/fuzz_hf_config
	$(call fuzz_bounded,hf-config,16384)
fuzz-safetensors: $(BUILD)/fuzz/fuzz_safetensors
	$(call fuzz_bounded,safetensors,65536)

# ---- demo --------------------------------------------------------------

demo: all $(MODELS)/synthetic-tiny-instruct.gguf
	sh tools/demo.sh $(BUILD)

clean:
	rm -rf build
