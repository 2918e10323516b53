#!/bin/sh
# `kipp info` on the converted fixtures (build/models/*.gguf, made by
# `make fixtures`) and on damaged copies: a valid file prints its entry,
# metadata, tensor table and sizes and exits 0; a truncated copy, a
# non-GGUF file and a missing file exit non-zero with the reason on stderr.
set -u
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
TINY=$BUILD/models/synthetic-tiny.gguf
INSTRUCT=$BUILD/models/synthetic-tiny-instruct.gguf
[ -x "$KIPP" ] || { echo "FAIL: $KIPP not built"; exit 1; }
[ -f "$TINY" ] || { echo "SKIP(missing): fixture $TINY missing (run make fixtures)"; exit 77; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kipp-test-info.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2'"; }

# --- valid base artifact ---------------------------------------------------
"$KIPP" info "$TINY" >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 0 ] || fail "info on $TINY exited $rc: $(cat "$TMP/err")"
has "$TMP/out" "checkpoint  synthetic-tiny"
has "$TMP/out" "source      kipp-synthetic/tiny @ v1-seed-1"
has "$TMP/out" "query heads 8 (attention width 1024)"
has "$TMP/out" "weights are random"
has "$TMP/out" "metadata (29 keys)"
has "$TMP/out" "tokenizer.ggml.tokens                    string[151936]"
has "$TMP/out" "tensors (24)"
has "$TMP/out" "blk.1.ffn_down.weight            BF16  [768, 256]"
has "$TMP/out" "output head tied to token_embd"
grep -q "^  output.weight " "$TMP/out" && fail "tied artifact lists output.weight"
# the printed file size is the real one, and offset + bytes of the last
# tensor reaches it (the canonical layout ends exactly at the last tensor)
size=$(wc -c <"$TINY" | tr -d ' ')
has "$TMP/out" "file          $(printf '%12s' "$size") bytes"
last=$(grep "blk.1.ffn_down.weight" "$TMP/out" | awk '{print $(NF-1) + $NF}')
[ "$last" = "$size" ] || fail "last tensor ends at $last, file is $size bytes"
[ -s "$TMP/err" ] && fail "stderr not empty on a valid file: $(cat "$TMP/err")"

# --- instruct (untied, chat template) -----------------------------------------
if [ -f "$INSTRUCT" ]; then
    "$KIPP" info "$INSTRUCT" >"$TMP/out2" 2>&1 || fail "info on $INSTRUCT failed: $(cat "$TMP/out2")"
    has "$TMP/out2" "tensors (36)"
    grep -q "^  output.weight  *BF16  \[384, 151936\]" "$TMP/out2" || fail "untied artifact lacks output.weight"
    has "$TMP/out2" "tokenizer.chat_template"
    has "$TMP/out2" "separate (untied)"
fi

# --- damaged copies ---------------------------------------------------------------
expect_reject() { # label file substring
    "$KIPP" info "$2" >"$TMP/rout" 2>"$TMP/rerr"; rc=$?
    [ $rc -ne 0 ] || fail "$1: exit 0"
    grep -qF -- "$3" "$TMP/rerr" || fail "$1: stderr lacks '$3': $(cat "$TMP/rerr")"
    [ -s "$TMP/rout" ] && fail "$1: printed a description of a rejected file"
}
head -c $((size - 1000)) "$TINY" >"$TMP/cut.gguf"
expect_reject "truncated in data" "$TMP/cut.gguf" "'blk.1.ffn_down.weight' data ["
head -c 4096 "$TINY" >"$TMP/cut-meta.gguf"
expect_reject "truncated in metadata" "$TMP/cut-meta.gguf" "rejected:"
head -c 10 "$TINY" >"$TMP/cut-head.gguf"
expect_reject "truncated header" "$TMP/cut-head.gguf" "truncated in the header counts"
printf '{"not": "gguf"}' >"$TMP/json.gguf"
expect_reject "not gguf" "$TMP/json.gguf" "bad magic"
: >"$TMP/empty.gguf"
expect_reject "empty file" "$TMP/empty.gguf" "is empty"
expect_reject "missing file" "$TMP/nope.gguf" "cannot open"
cp "$TINY" "$TMP/extra.gguf" && printf 'x' >>"$TMP/extra.gguf"
expect_reject "trailing byte" "$TMP/extra.gguf" "trailing bytes after the tensor data"

# --- usage ---------------------------------------------------------------------
"$KIPP" info --help >"$TMP/help" 2>&1 || fail "info --help exited non-zero"
has "$TMP/help" "usage: kipp info"
"$KIPP" info >/dev/null 2>&1; [ $? -eq 2 ] || fail "info without a file should exit 2"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "kipp info: all checks passed"
