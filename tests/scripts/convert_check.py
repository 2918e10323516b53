#!/usr/bin/env python3
"""Checks a converted artifact against its checkpoint directory, rebuilding
every expectation independently in Python from the source files
(docs/CONTRACT-ARTIFACT.md): metadata values and order, tokenizer arrays
(vocab + added tokens merged by id, [PAD<id>] fill, token types, merges),
source-file hashes, tensor names/shapes/types, and tensor bytes (BF16 copied,
norms widened exactly to F32).

usage: convert_check.py CHECKPOINT_DIR ARTIFACT REGISTRY_TSV
"""
import hashlib
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_tool import parse  # noqa: E402

V = 151936


def registry(path, ident):
    for line in open(path):
        if line.startswith("#") or line.startswith("id\t"):
            continue
        f = line.rstrip("\n").split("\t")
        if f[0] == ident:
            return {"id": f[0], "repo": f[1], "rev": f[2], "variant": f[3], "layers": int(f[4]),
                    "hidden": int(f[5]), "ffn": int(f[6]), "heads": int(f[7]), "context": int(f[8]),
                    "theta": float(f[9]), "tied": f[10] == "yes", "eos": int(f[11])}
    raise SystemExit(f"{ident} not in {path}")


def safetensors(d):
    names = ["model.safetensors"]
    if os.path.exists(d + "/model.safetensors.index.json"):
        names = sorted(set(json.load(open(d + "/model.safetensors.index.json"))["weight_map"].values()))
    out = {}
    for n in names:
        data = open(d + "/" + n, "rb").read()
        hl = struct.unpack_from("<Q", data)[0]
        h = json.loads(data[8:8 + hl])
        h.pop("__metadata__", None)
        for k, v in h.items():
            out[k] = (v["shape"], data[8 + hl + v["data_offsets"][0]:8 + hl + v["data_offsets"][1]])
    return out


def main():
    d, art, tsv = sys.argv[1:4]
    cfg = json.load(open(d + "/config.json"))
    e = registry(tsv, cfg["kipp_checkpoint"])
    a = parse(art)
    kv = {k: v[1] for k, v in a["kv"].items()}
    H, A, F = e["hidden"], e["heads"] * 128, e["ffn"]

    # tokenizer, rebuilt the way upstream merges it
    tok = json.load(open(d + "/tokenizer.json"))
    tcfg = json.load(open(d + "/tokenizer_config.json"))
    tokens, types = [None] * V, [0] * V
    for s, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = s, 1
    added = {t["id"]: (t["content"], t["special"]) for t in tok["added_tokens"]}
    for i, t in tcfg.get("added_tokens_decoder", {}).items():
        added[int(i)] = (t["content"], t.get("special", False))
    for i, (s, special) in added.items():
        tokens[i], types[i] = s, 3 if special else 4
    for i in range(V):
        if tokens[i] is None:
            tokens[i], types[i] = f"[PAD{i}]", 5
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in tok["model"]["merges"]]

    files = sorted(f for f in os.listdir(d) if f.endswith((".json", ".safetensors")))
    shas = [hashlib.sha256(open(d + "/" + f, "rb").read()).hexdigest() for f in files]
    want = [
        ("general.architecture", "qwen3"), ("general.name", e["id"]), ("general.file_type", 32),
        ("qwen3.context_length", e["context"]), ("qwen3.embedding_length", H),
        ("qwen3.block_count", e["layers"]), ("qwen3.feed_forward_length", F),
        ("qwen3.attention.head_count", e["heads"]), ("qwen3.attention.head_count_kv", 8),
        ("qwen3.attention.key_length", 128), ("qwen3.attention.value_length", 128),
        ("qwen3.rope.freq_base", struct.unpack("<f", struct.pack("<f", e["theta"]))[0]),
        ("qwen3.attention.layer_norm_rms_epsilon", struct.unpack("<f", struct.pack("<f", 1e-6))[0]),
        ("tokenizer.ggml.model", "gpt2"), ("tokenizer.ggml.pre", "qwen2"),
        ("tokenizer.ggml.tokens", tokens), ("tokenizer.ggml.token_type", types),
        ("tokenizer.ggml.merges", merges), ("tokenizer.ggml.eos_token_id", e["eos"]),
        ("tokenizer.ggml.padding_token_id", 151643), ("tokenizer.ggml.bos_token_id", 151643),
        ("tokenizer.ggml.add_bos_token", False),
    ]
    if e["variant"] != "base":
        want.append(("tokenizer.chat_template", tcfg["chat_template"]))
    want += [("kipp.checkpoint", e["id"]), ("kipp.source.repository", e["repo"]),
             ("kipp.source.revision", e["rev"]), ("kipp.source.files", files),
             ("kipp.source.sha256", shas), ("kipp.quant.scheme", "bf16"),
             ("kipp.converter.version", None)]
    assert a["order"] == [k for k, _ in want], f"metadata keys/order: {a['order']}"
    for k, v in want:
        if v is not None:
            assert kv[k] == v, f"metadata {k} differs"

    # tensors: names, order, shapes, types, bytes
    src = safetensors(d)
    expect = [("token_embd.weight", "model.embed_tokens.weight", [H, V], 30),
              ("output_norm.weight", "model.norm.weight", [H], 0)]
    if not e["tied"]:
        expect.append(("output.weight", "lm_head.weight", [H, V], 30))
    for n in range(e["layers"]):
        p, q = f"blk.{n}.", f"model.layers.{n}."
        expect += [(p + "attn_norm.weight", q + "input_layernorm.weight", [H], 0),
                   (p + "attn_q.weight", q + "self_attn.q_proj.weight", [H, A], 30),
                   (p + "attn_k.weight", q + "self_attn.k_proj.weight", [H, 1024], 30),
                   (p + "attn_v.weight", q + "self_attn.v_proj.weight", [H, 1024], 30),
                   (p + "attn_output.weight", q + "self_attn.o_proj.weight", [A, H], 30),
                   (p + "attn_q_norm.weight", q + "self_attn.q_norm.weight", [128], 0),
                   (p + "attn_k_norm.weight", q + "self_attn.k_norm.weight", [128], 0),
                   (p + "ffn_norm.weight", q + "post_attention_layernorm.weight", [H], 0),
                   (p + "ffn_gate.weight", q + "mlp.gate_proj.weight", [H, F], 30),
                   (p + "ffn_up.weight", q + "mlp.up_proj.weight", [H, F], 30),
                   (p + "ffn_down.weight", q + "mlp.down_proj.weight", [F, H], 30)]
    assert [t["name"] for t in a["tensors"]] == [x[0] for x in expect], "tensor names/order"
    for t, (name, hf, ne, typ) in zip(a["tensors"], expect):
        assert t["ne"] == ne and t["type"] == typ, f"{name}: ne {t['ne']} type {t['type']}"
        assert t["offset"] % 32 == 0, f"{name}: offset {t['offset']} not 32-aligned"
        shape, raw = src[hf]
        assert list(reversed(shape)) == ne, f"{name}: source shape {shape}"
        if typ == 30:
            assert t["data"] == raw, f"{name}: bytes differ from the source"
        else:
            widened = b"".join(b"\0\0" + raw[i:i + 2] for i in range(0, len(raw), 2))
            assert t["data"] == widened, f"{name}: not the exact F32 widening of the source"
    print(f"{art}: {len(want)} metadata keys and {len(expect)} tensors match {d}")


if __name__ == "__main__":
    main()
