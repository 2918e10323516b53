#!/bin/sh
# kipp synth: byte-identical twice, equal to the committed SHA-256, elements
# equal to the generator's specification re-derived in Python, a real
# Qwen3 config.json shape, tokenizer files copied, sharded output consistent,
# non-synthetic entries refused.
set -eu
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
W=$BUILD/tmp-test_synth
TOK=${KIPP_TOKENIZER_DIR:-$BUILD/cache/tokenizer-qwen3}
rm -rf "$W"
mkdir -p "$W"
sh tools/fetch_tokenizer.sh "$TOK"
fail() { echo "FAIL: $*" >&2; exit 1; }

for id in synthetic-tiny synthetic-tiny-instruct; do
    "$KIPP" synth $id "$W/$id-a" --tokenizer-dir "$TOK"
    "$KIPP" synth $id "$W/$id-b" --tokenizer-dir "$TOK"
    for f in model.safetensors config.json generation_config.json tokenizer.json tokenizer_config.json; do
        cmp "$W/$id-a/$f" "$W/$id-b/$f" || fail "$id: $f differs between two runs"
    done
    want=$(awk -v id=$id '$2 == id { print $1 }' tests/vectors/synth-sha256.txt)
    [ -n "$want" ] || fail "no committed hash for $id"
    got=$(sha256sum "$W/$id-a/model.safetensors" | cut -d' ' -f1)
    [ "$got" = "$want" ] || fail "$id: model.safetensors SHA-256 $got, committed $want"
    cmp "$TOK/tokenizer.json" "$W/$id-a/tokenizer.json" || fail "tokenizer.json not copied"
    cmp "$TOK/tokenizer_config.json" "$W/$id-a/tokenizer_config.json" || fail "tokenizer_config.json not copied"
done
echo "synth is reproducible and matches tests/vectors/synth-sha256.txt"

python3 tests/scripts/synth_check.py "$W/synthetic-tiny-a/model.safetensors" v1-seed-1 256
python3 tests/scripts/synth_check.py "$W/synthetic-tiny-instruct-a/model.safetensors" v1-seed-2 384

# config.json: the real Qwen3 shape with this entry's dimensions
python3 - "$W/synthetic-tiny-instruct-a" <<'PY'
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/config.json"))
want = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 384,
        "intermediate_size": 1024, "num_hidden_layers": 3, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rms_norm_eps": 1e-06,
        "rope_theta": 5000000, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645,
        "rope_scaling": None, "attention_bias": False, "sliding_window": None,
        "use_sliding_window": False, "hidden_act": "silu",
        "kipp_checkpoint": "synthetic-tiny-instruct"}
for k, v in want.items():
    assert c.get(k, "absent") == v, f"config.json {k} = {c.get(k, 'absent')!r}, want {v!r}"
g = json.load(open(d + "/generation_config.json"))
assert g["eos_token_id"] == [151645, 151643], g
print("config.json and generation_config.json have the expected shape")
PY

# sharded: same tensors, same bytes, index consistent
"$KIPP" synth synthetic-tiny "$W/sharded" --shards 3 --tokenizer-dir "$TOK"
[ ! -e "$W/sharded/model.safetensors" ] || fail "sharded output also wrote model.safetensors"
python3 - "$W/synthetic-tiny-a" "$W/sharded" <<'PY'
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack_from("<Q", data)[0]
    h = json.loads(data[8:8 + n])
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items()}
single = tensors(sys.argv[1] + "/model.safetensors")
index = json.load(open(sys.argv[2] + "/model.safetensors.index.json"))
files = sorted(set(index["weight_map"].values()))
assert files == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)], files
merged = {}
for f in files:
    t = tensors(sys.argv[2] + "/" + f)
    assert t, f"{f} is empty"
    for k in t:
        assert index["weight_map"][k] == f, f"{k} is in {f}, index says {index['weight_map'][k]}"
    merged.update(t)
assert merged == single, "sharded tensors differ from the single file"
assert index["metadata"]["total_size"] == sum(len(v[2]) for v in single.values())
print(f"3 shards hold the same {len(single)} tensors as the single file")
PY

# only synthetic entries
if "$KIPP" synth qwen3-0.6b "$W/real" --tokenizer-dir "$TOK" 2>"$W/err"; then
    fail "synth accepted a real entry"
fi
grep -q "not a synthetic-\* entry" "$W/err" || fail "unexpected message: $(cat "$W/err")"
if "$KIPP" synth no-such-model "$W/none" 2>"$W/err"; then fail "synth accepted an unknown id"; fi
grep -q "not in the registry" "$W/err" || fail "unexpected message: $(cat "$W/err")"
rm -rf "$W"
echo "test_synth: ok"
