#!/bin/sh
# kipp convert: single-file and sharded (--shards 3) synthetic checkpoints
# give artifacts identical apart from the recorded source files and hashes;
# every metadata key, tokenizer array, tensor and byte is checked against an
# independent Python reconstruction from the source files
# (tests/scripts/convert_check.py); base and instruct (untied, chat template,
# also from chat_template.jinja).
set -eu
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
W=$BUILD/tmp-test_convert
TOK=${KIPP_TOKENIZER_DIR:-$BUILD/cache/tokenizer-qwen3}
rm -rf "$W"
mkdir -p "$W"
sh tools/fetch_tokenizer.sh "$TOK"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$KIPP" synth synthetic-tiny "$W/single" --tokenizer-dir "$TOK"
"$KIPP" synth synthetic-tiny "$W/sharded" --shards 3 --tokenizer-dir "$TOK"
"$KIPP" synth synthetic-tiny-instruct "$W/instruct" --shards 2 --tokenizer-dir "$TOK"
"$KIPP" convert "$W/single" -o "$W/single.gguf" 2>"$W/err" || fail "$(cat "$W/err")"
# no progress bar when stderr is not a terminal
[ "$(cat "$W/err")" = "kipp convert: wrote $W/single.gguf" ] || fail "stderr: $(cat "$W/err")"
# ... and a progress bar when it is (script(1) gives the command a terminal)
if command -v script >/dev/null 2>&1; then
    script -qec "'$KIPP' convert '$W/single' -o '$W/tty.gguf'" /dev/null >"$W/tty.out" </dev/null
    tr '\r' '\n' <"$W/tty.out" | grep -q '^convert \[#*\] 100.0%' ||
        fail "no progress bar on a terminal: $(head -c 300 "$W/tty.out")"
    cmp "$W/single.gguf" "$W/tty.gguf" || fail "terminal run wrote a different file"
    echo "progress bar drawn on a terminal, not otherwise"
fi
"$KIPP" convert "$W/sharded" -o "$W/sharded.gguf"
"$KIPP" convert "$W/instruct" -o "$W/instruct.gguf"

python3 tests/scripts/convert_check.py "$W/single" "$W/single.gguf" tools/registry.tsv
python3 tests/scripts/convert_check.py "$W/sharded" "$W/sharded.gguf" tools/registry.tsv
python3 tests/scripts/convert_check.py "$W/instruct" "$W/instruct.gguf" tools/registry.tsv

# sharded vs single: identical apart from the source file list and hashes
python3 tests/scripts/gguf_tool.py compare "$W/single.gguf" "$W/sharded.gguf" \
    --ignore kipp.source.files,kipp.source.sha256
# ... and those two keys really differ (the comparison can see a difference)
if python3 tests/scripts/gguf_tool.py compare "$W/single.gguf" "$W/sharded.gguf" >/dev/null; then
    fail "source file lists of single and sharded artifacts are equal"
fi

# the newer Hugging Face layout: the chat template in chat_template.jinja
# beside a tokenizer_config.json without one gives the same artifact
cp -rl "$W/instruct" "$W/jinja"
python3 tests/scripts/mutate_checkpoint.py "$W/jinja" chat-template-jinja
"$KIPP" convert "$W/jinja" -o "$W/jinja.gguf" 2>"$W/err" || fail "chat_template.jinja: $(cat "$W/err")"
python3 tests/scripts/gguf_tool.py compare "$W/instruct.gguf" "$W/jinja.gguf" \
    --ignore kipp.source.files,kipp.source.sha256 ||
    fail "chat_template.jinja: artifact differs from the tokenizer_config.json layout"
python3 tests/scripts/gguf_tool.py get "$W/jinja.gguf" kipp.source.files | grep -q chat_template.jinja ||
    fail "chat_template.jinja is not recorded among the source files"
echo "chat_template.jinja read when tokenizer_config.json has no chat_template"

# the converter is deterministic
"$KIPP" convert "$W/single" -o "$W/again.gguf"
cmp "$W/single.gguf" "$W/again.gguf" || fail "two conversions differ"

# --checkpoint names the entry when config.json does not
python3 - "$W/single/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["kipp_checkpoint"]
open(sys.argv[1] + ".new", "w").write(json.dumps(c))
PY
mv "$W/single/config.json.new" "$W/single/config.json"
if "$KIPP" convert "$W/single" -o "$W/anon.gguf" 2>"$W/err"; then
    fail "a config without kipp_checkpoint matched a synthetic entry by dimensions"
fi
grep -qF "matches no registry entry" "$W/err" || fail "$(cat "$W/err")"
"$KIPP" convert "$W/single" -o "$W/named.gguf" --checkpoint synthetic-tiny
python3 tests/scripts/gguf_tool.py compare "$W/single.gguf" "$W/named.gguf" \
    --ignore kipp.source.files,kipp.source.sha256

# quantized schemes use the same streaming path (projections only)
"$KIPP" convert "$W/sharded" -o "$W/q8.gguf" --quant q8_0
python3 - "$W/q8.gguf" <<'PY'
import sys
sys.path.insert(0, "tests/scripts")
from gguf_tool import parse
a = parse(sys.argv[1])
assert a["kv"]["kipp.quant.scheme"][1] == "q8_0" and a["kv"]["general.file_type"][1] == 7
proj = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
for t in a["tensors"]:
    want = 8 if any(f".{p}." in t["name"] for p in proj) else (30 if t["ne"][1:] else 0)
    assert t["type"] == want, (t["name"], t["type"])
print("q8_0 artifact: projections Q8_0, embedding BF16, norms F32")
PY
rm -rf "$W"
echo "test_convert: ok"
