#!/bin/sh
# kipp convert rejects malformed checkpoints, each with its own message, and
# leaves no output behind. Every case is one mutation of a pristine
# synthetic-tiny checkpoint (tests/scripts/mutate_checkpoint.py).
set -eu
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
W=$BUILD/tmp-test_convert_errors
TOK=${KIPP_TOKENIZER_DIR:-$BUILD/cache/tokenizer-qwen3}
rm -rf "$W"
mkdir -p "$W"
sh tools/fetch_tokenizer.sh "$TOK"
"$KIPP" synth synthetic-tiny "$W/base" --tokenizer-dir "$TOK" 2>/dev/null
"$KIPP" synth synthetic-tiny-instruct "$W/instruct" --tokenizer-dir "$TOK" 2>/dev/null
failures=0

# expect_error NAME SOURCE MUTATION "message fragment" [convert options...]
expect_error() {
    name=$1 src=$2 mutation=$3 want=$4
    shift 4
    d=$W/$name
    rm -rf "$d"
    cp -rl "$W/$src" "$d"
    python3 tests/scripts/mutate_checkpoint.py "$d" "$mutation"
    if "$KIPP" convert "$d" -o "$d.gguf" "$@" 2>"$d.err"; then
        echo "FAIL $name: conversion succeeded"
        failures=$((failures + 1))
    elif ! grep -qF -- "$want" "$d.err"; then
        echo "FAIL $name: message was: $(cat "$d.err")"
        echo "     expected it to contain: $want"
        failures=$((failures + 1))
    elif [ -e "$d.gguf" ] || [ -e "$d.gguf.tmp" ]; then
        echo "FAIL $name: output left behind after an error"
        failures=$((failures + 1))
    else
        echo "ok   $name: $(cat "$d.err")"
    fi
    rm -rf "$d" "$d.gguf" "$d.gguf.tmp"
}

expect_error no-entry base config-no-entry "config.json matches no registry entry"
expect_error wrong-dims base config-wrong-dims \
    "config.json does not match registry entry 'synthetic-tiny' (config.json kipp_checkpoint): num_hidden_layers is 3, the entry has 2"
expect_error unknown-id base config-unknown-id \
    "config.json kipp_checkpoint 'synthetic-huge' is not in the registry"
expect_error not-qwen3 base config-not-qwen3 "does not list Qwen3ForCausalLM"
expect_error checkpoint-flag base config-no-entry \
    "does not match registry entry 'synthetic-tiny' (--checkpoint): hidden_size is 320" \
    --checkpoint synthetic-tiny
# real entries are found by their dimensions; the tensors then do not fit
expect_error real-by-dims base config-real-dims "registry entry 'qwen3-0.6b' needs"
expect_error ambiguous base config-ambiguous \
    "matches several registry entries (qwen3-4b-instruct-2507, qwen3-4b-thinking-2507)"
expect_error ambiguous-hint base config-ambiguous-hint "registry entry 'qwen3-4b-thinking-2507' needs"
expect_error config-bad-json base config-bad-json "config.json: invalid JSON"
expect_error missing-tensor base missing-tensor \
    "missing tensor 'model.layers.1.mlp.up_proj.weight' (registry entry 'synthetic-tiny' needs it)"
expect_error extra-tensor base extra-tensor \
    "unexpected tensor 'model.layers.0.self_attn.q_proj.bias' (not part of registry entry 'synthetic-tiny')"
expect_error dtype-f16 base dtype-f16 \
    "tensor 'model.layers.0.self_attn.q_proj.weight' has dtype F16; kipp converts BF16 checkpoints only"
expect_error dtype-f32 base dtype-f32 \
    "tensor 'model.layers.0.input_layernorm.weight' has dtype F32; kipp converts BF16 checkpoints only"
expect_error wrong-shape base wrong-shape \
    "tensor 'model.layers.0.self_attn.q_proj.weight' has shape [256, 1024]; registry entry 'synthetic-tiny' needs [1024, 256]"
expect_error truncated base truncated "extends past the end of the file"
expect_error truncated-header base truncated-header "exceeds the file"
expect_error bad-header-json base bad-header-json "bad safetensors header JSON"
expect_error tied-head base tied-head-differs \
    "registry entry 'synthetic-tiny' is tied, but lm_head.weight differs from model.embed_tokens.weight"
expect_error no-chat-template instruct no-chat-template \
    "tokenizer_config.json has no chat_template, which instruct entry 'synthetic-tiny-instruct' needs"
expect_error bad-quant base none "unknown --quant 'q3_k'" --quant q3_k

# cases that must succeed: a tied checkpoint that also stores an identical
# lm_head.weight, and merges stored as "a b" strings (same artifact tensors)
for m in tied-head-same merges-as-strings; do
    d=$W/$m
    cp -rl "$W/base" "$d"
    python3 tests/scripts/mutate_checkpoint.py "$d" $m
    if ! "$KIPP" convert "$d" -o "$d.gguf" 2>"$d.err"; then
        echo "FAIL $m: $(cat "$d.err")"
        failures=$((failures + 1))
    else
        echo "ok   $m converts"
    fi
done
"$KIPP" convert "$W/base" -o "$W/base.gguf" 2>/dev/null
python3 tests/scripts/gguf_tool.py compare "$W/base.gguf" "$W/merges-as-strings.gguf" \
    --ignore kipp.source.files,kipp.source.sha256 || failures=$((failures + 1))
python3 tests/scripts/gguf_tool.py compare "$W/base.gguf" "$W/tied-head-same.gguf" \
    --ignore kipp.source.files,kipp.source.sha256 || failures=$((failures + 1))

rm -rf "$W"
[ $failures -eq 0 ] || { echo "test_convert_errors: $failures failures"; exit 1; }
echo "test_convert_errors: ok"
