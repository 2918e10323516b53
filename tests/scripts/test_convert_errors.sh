#!/bin/sh
# kipp convert rejects malformed checkpoints, each with its own message, and
# leaves no output behind. Every case is one mutation of a pristine
# synthetic-tiny checkpoint (tests/scripts/mutate_checkpoint.py). Then: a
# directory that reveals another revision than the pin (Hugging Face cache
# path, huggingface_hub --local-dir metadata, git HEAD) needs
# --allow-unpinned; a write that fails midway (file-size limit) and SIGINT /
# SIGTERM during the write leave no FILE.gguf.tmp.
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
    "the checkpoint does not match registry entry 'synthetic-tiny' (config.json kipp_checkpoint): config.json num_hidden_layers is 3, the entry has 2"
expect_error unknown-id base config-unknown-id \
    "config.json kipp_checkpoint 'synthetic-huge' is not in the registry"
expect_error not-qwen3 base config-not-qwen3 "does not list Qwen3ForCausalLM"
expect_error checkpoint-flag base config-no-entry \
    "does not match registry entry 'synthetic-tiny' (--checkpoint): config.json hidden_size is 320" \
    --checkpoint synthetic-tiny
# real entries are found by their values; the tensors then do not fit
expect_error real-by-values instruct config-qwen3-0.6b "registry entry 'qwen3-0.6b' needs"
expect_error ambiguous instruct config-ambiguous \
    "matches several registry entries (qwen3-4b-instruct-2507, qwen3-4b-thinking-2507)"
expect_error ambiguous-hint instruct config-ambiguous-hint "registry entry 'qwen3-4b-thinking-2507' needs"
# every identity-bearing value must agree (issue 9: an instruct checkpoint
# with an edited max_position_embeddings was taken for qwen3-0.6b-base)
expect_error context-edited instruct config-instruct-context-edited \
    "config.json matches no registry entry; nearest: qwen3-0.6b (config.json max_position_embeddings is 32768, the entry has 40960), qwen3-0.6b-base (config.json eos_token_id is 151645, the entry has 151643; generation_config.json eos_token_id is [151645, 151643], the entry has [151643])"
expect_error context-edited-named instruct config-instruct-context-edited \
    "does not match registry entry 'qwen3-0.6b-base' (--checkpoint): config.json eos_token_id is 151645, the entry has 151643" \
    --checkpoint qwen3-0.6b-base
expect_error eos-instruct base config-eos-instruct \
    "(config.json kipp_checkpoint): config.json eos_token_id is 151645, the entry has 151643"
expect_error bos base config-bos "config.json bos_token_id is 1, every entry has 151643"
expect_error no-eos base config-no-eos 'config.json: missing "eos_token_id"'
expect_error generation-eos base generation-eos-instruct \
    "generation_config.json eos_token_id is [151645, 151643], the entry has [151643]"
expect_error generation-bad-json base generation-bad-json "generation_config.json: invalid JSON"
expect_error template-files-differ instruct chat-template-jinja-differs \
    "tokenizer_config.json has a chat_template and chat_template.jinja holds a different one"
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
    "tokenizer_config.json has no chat_template and there is no chat_template.jinja, which instruct entry 'synthetic-tiny-instruct' needs"
# a tokenizer or template the artifact loader would refuse is refused before
# any weight is written (the artifact would not open)
expect_error merge-unknown-token base merge-unknown-token \
    "tokenizer.json: the vocabulary and merges do not make a tokenizer: tokenizer merge 5 (\"Ġzzzq xqq\") names a token not in the vocabulary"
expect_error merge-not-pair base merge-not-pair "tokenizer merge 7 is not \"left right\""
expect_error merges-empty base merges-empty "tokenizer.json: model.merges is empty"
# a corrupt weight (no trained checkpoint holds one), found while streaming:
# BF16 would copy it, the quantizers would hide it in a wrong block
expect_error weight-nan base weight-nan \
    "tensor 'model.layers.0.self_attn.q_proj.weight' element 5 is NaN: the checkpoint is corrupt" \
    --quant q8_0
expect_error weight-inf base weight-inf \
    "tensor 'model.layers.0.input_layernorm.weight' element 3 is infinite: the checkpoint is corrupt"
expect_error added-token-in-vocab base added-token-in-vocab \
    "tokenizer_config.json: added token id 5 is outside [151643, 151936)"
expect_error chat-template-empty instruct chat-template-empty "tokenizer_config.json: chat_template is empty"
expect_error chat-template-nul instruct chat-template-nul \
    "tokenizer_config.json: chat_template holds a NUL byte"
expect_error chat-template-list instruct chat-template-list \
    "tokenizer_config.json: chat_template is not a string"
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

# ---- revisions the directory reveals ---------------------------------------
# expect_unpinned NAME DIR "message fragment" [RECORD]: refused without the
# flag, no output left; with RECORD, then converted with --allow-unpinned,
# recording RECORD in kipp.source.unpinned, loadable, and otherwise the same
# artifact as the pinned conversion of the same files
expect_unpinned() {
    name=$1 d=$2 want=$3 record=${4:-}
    if "$KIPP" convert "$d" -o "$W/$name.gguf" 2>"$W/$name.err"; then
        echo "FAIL $name: converted a directory that reveals another revision"
        failures=$((failures + 1))
    elif ! grep -qF -- "$want" "$W/$name.err" || ! grep -qF -- "--allow-unpinned (" "$W/$name.err"; then
        echo "FAIL $name: message was: $(cat "$W/$name.err")"
        echo "     expected it to contain: $want (and --allow-unpinned)"
        failures=$((failures + 1))
    elif [ -e "$W/$name.gguf" ] || [ -e "$W/$name.gguf.tmp" ]; then
        echo "FAIL $name: output left behind after an error"
        failures=$((failures + 1))
    elif [ -z "$record" ]; then
        echo "ok   $name: $(cat "$W/$name.err")"
    elif ! "$KIPP" convert "$d" -o "$W/$name.gguf" --allow-unpinned 2>"$W/$name.err"; then
        echo "FAIL $name: --allow-unpinned did not convert: $(cat "$W/$name.err")"
        failures=$((failures + 1))
    elif [ "$(python3 tests/scripts/gguf_tool.py get "$W/$name.gguf" kipp.source.unpinned)" != "\"$record\"" ]; then
        echo "FAIL $name: kipp.source.unpinned is not \"$record\""
        failures=$((failures + 1))
    elif ! "$KIPP" info "$W/$name.gguf" >/dev/null 2>"$W/$name.err"; then
        echo "FAIL $name: the loader rejects the unpinned artifact: $(cat "$W/$name.err")"
        failures=$((failures + 1))
    elif ! python3 tests/scripts/gguf_tool.py compare "$W/base.gguf" "$W/$name.gguf" \
        --ignore kipp.source.unpinned >/dev/null; then
        echo "FAIL $name: the artifact differs from the pinned one in more than kipp.source.unpinned"
        failures=$((failures + 1))
    else
        echo "ok   $name: refused, then converted with --allow-unpinned, recorded $record"
    fi
    rm -f "$W/$name.gguf"
}
OTHER=0123456789abcdef0123456789abcdef01234567
HUB=$W/hub/models--kipp-synthetic--tiny/snapshots
mkdir -p "$HUB"
cp -rl "$W/base" "$HUB/$OTHER"
# reached through a symlink, as tools that hand out the snapshot path do
ln -s "$(cd "$HUB/$OTHER" && pwd)" "$W/link"
expect_unpinned hf-cache "$W/link" \
    "the checkpoint is kipp-synthetic/tiny@$OTHER (from its Hugging Face cache snapshot path), not kipp-synthetic/tiny@v1-seed-1, which registry entry 'synthetic-tiny' pins" \
    "kipp-synthetic/tiny@$OTHER"
cp -rl "$W/base" "$W/localdir"
mkdir -p "$W/localdir/.cache/huggingface/download"
printf '%s\n%s\n%s\n' "$OTHER" 3fa4fc7d42b1cd0e1a3fbb3f2c5ba1c1 1712656091.123 \
    >"$W/localdir/.cache/huggingface/download/config.json.metadata"
expect_unpinned local-dir "$W/localdir" \
    "(from .cache/huggingface/download/config.json.metadata, written by huggingface_hub)"
cp -rl "$W/base" "$W/clone"
mkdir -p "$W/clone/.git/refs/heads"
echo "ref: refs/heads/main" >"$W/clone/.git/HEAD"
echo "$OTHER" >"$W/clone/.git/refs/heads/main"
expect_unpinned git-loose-ref "$W/clone" "@$OTHER (from the git checkout's .git/HEAD)"
rm "$W/clone/.git/refs/heads/main"
printf '# pack-refs with: peeled fully-peeled sorted\n%s refs/heads/main\n' "$OTHER" \
    >"$W/clone/.git/packed-refs"
expect_unpinned git-packed-ref "$W/clone" "@$OTHER (from the git checkout's .git/HEAD)"
echo "$OTHER" >"$W/clone/.git/HEAD"
expect_unpinned git-detached "$W/clone" "@$OTHER (from the git checkout's .git/HEAD)"
# A snapshot of the pinned commit passes the check (a qwen3-0.6b config:
# conversion gets as far as the tensors); another repository at that
# commit does not.
PIN=c1899de289a04d12100db370d81485cdf75e47ca
for repo in models--Qwen--Qwen3-0.6B models--someone--Qwen3-0.6B-tuned; do
    d=$W/hub/$repo/snapshots/$PIN
    mkdir -p "$(dirname "$d")"
    cp -rl "$W/instruct" "$d"
    python3 tests/scripts/mutate_checkpoint.py "$d" config-qwen3-0.6b
done
expect_error_in() { # NAME DIR "fragment"
    if "$KIPP" convert "$2" -o "$W/$1.gguf" 2>"$W/$1.err"; then
        echo "FAIL $1: conversion succeeded"
        failures=$((failures + 1))
    elif ! grep -qF -- "$3" "$W/$1.err"; then
        echo "FAIL $1: message was: $(cat "$W/$1.err")"
        echo "     expected it to contain: $3"
        failures=$((failures + 1))
    else
        echo "ok   $1: $(cat "$W/$1.err")"
    fi
}
expect_error_in pinned-snapshot "$W/hub/models--Qwen--Qwen3-0.6B/snapshots/$PIN" \
    "registry entry 'qwen3-0.6b' needs"
expect_error_in other-repository "$W/hub/models--someone--Qwen3-0.6B-tuned/snapshots/$PIN" \
    "the checkpoint is someone/Qwen3-0.6B-tuned@$PIN (from its Hugging Face cache snapshot path), not Qwen/Qwen3-0.6B@$PIN"

# ---- no FILE.gguf.tmp after a failure midway or a signal --------------------
# A file-size limit makes the write fail partway through the tensors (the
# metadata alone is ~5 MB; the limit is 10 MB in dash's 512-byte blocks, 20
# MB in bash's 1024-byte ones; the artifact is ~80 MB). Without care the
# process dies of SIGXFSZ and leaves the partial file.
status=0
(ulimit -f 20000 && exec "$KIPP" convert "$W/base" -o "$W/fsize.gguf") 2>"$W/fsize.err" || status=$?
if [ $status -ne 1 ] || ! grep -qF "write failed: File too large" "$W/fsize.err"; then
    echo "FAIL file-size limit: exit $status, message: $(cat "$W/fsize.err")"
    failures=$((failures + 1))
elif [ -e "$W/fsize.gguf.tmp" ] || [ -e "$W/fsize.gguf" ]; then
    echo "FAIL file-size limit: output left behind"
    failures=$((failures + 1))
else
    echo "ok   file-size limit midway: $(cat "$W/fsize.err"), nothing left behind"
fi

# signal_case SIG STATUS: converts the larger synthetic-tiny-instruct
# (~250 MB) in the background, sends SIG once FILE.gguf.tmp exists, and
# expects death by that signal with nothing left. A background job of a
# non-interactive shell starts with SIGINT ignored, so python3 restores the
# default actions before exec'ing kipp (kipp leaves ignored signals ignored).
signal_case() {
    sig=$1 want=$2 out=$W/sig.gguf attempt=0
    while :; do
        attempt=$((attempt + 1))
        rm -f "$out" "$out.tmp"
        python3 -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM): signal.signal(s, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$KIPP" convert "$W/instruct" -o "$out" 2>/dev/null &
        pid=$!
        i=0
        while [ ! -e "$out.tmp" ] && kill -0 $pid 2>/dev/null && [ $i -lt 6000 ]; do
            sleep 0.01
            i=$((i + 1))
        done
        seen=0
        [ -e "$out.tmp" ] && seen=1 && kill -s "$sig" $pid
        status=0
        wait $pid 2>/dev/null || status=$?  # dash reports "Terminated" on stderr
        # the conversion may have finished between the check and the kill
        if [ $seen -eq 1 ] && [ $status -ne 0 ]; then break; fi
        if [ $attempt -ge 3 ]; then
            echo "FAIL $sig: never caught $out.tmp during three conversions"
            failures=$((failures + 1))
            return
        fi
    done
    if [ $status -ne "$want" ]; then
        echo "FAIL $sig: exit status $status, expected $want (killed by $sig)"
        failures=$((failures + 1))
    elif [ -e "$out.tmp" ] || [ -e "$out" ]; then
        echo "FAIL $sig: $(ls "$out"*) left behind"
        failures=$((failures + 1))
    else
        echo "ok   $sig mid-write: exit $status, no $out.tmp left"
    fi
}
signal_case INT 130
signal_case TERM 143

rm -rf "$W"
[ $failures -eq 0 ] || { echo "test_convert_errors: $failures failures"; exit 1; }
echo "test_convert_errors: ok"
