#!/usr/bin/env python3
"""Makes one malformed variant of a synthetic checkpoint directory, in place,
for the converter's error tests. Files are replaced (unlinked, then
written), so DIR may be a hard-linked copy of a pristine checkpoint.

usage: mutate_checkpoint.py DIR MUTATION
"""
import json
import os
import struct
import sys


def read_st(path):
    data = open(path, "rb").read()
    n = struct.unpack_from("<Q", data)[0]
    h = json.loads(data[8:8 + n])
    h.pop("__metadata__", None)
    items = sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0])
    return [(k, v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in items]


def write_st(path, tensors):
    header, off = {}, 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    replace(path, struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors))


def replace(path, data):
    if os.path.exists(path):
        os.unlink(path)
    open(path, "wb").write(data)


def edit_config(d, **changes):
    c = json.load(open(d + "/config.json"))
    for k, v in changes.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    replace(d + "/config.json", json.dumps(c, indent=2).encode())


def edit_json(path, **changes):
    c = json.load(open(path))
    for k, v in changes.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    replace(path, json.dumps(c, indent=2).encode())


# qwen3-0.6b's config.json values (no kipp_checkpoint: matched by its values);
# applied to an instruct synthetic checkpoint, whose eos ids and chat
# template are already the instruct ones
QWEN3_06B = dict(kipp_checkpoint=None, num_hidden_layers=28, hidden_size=1024,
                 intermediate_size=3072, num_attention_heads=16, max_position_embeddings=40960,
                 rope_theta=1000000, tie_word_embeddings=True)


def bf16_to_f16_bytes(raw):
    out = bytearray()
    for i in range(0, len(raw), 2):
        f = struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0]
        out += struct.pack("<e", f)
    return bytes(out)


def bf16_to_f32_bytes(raw):
    return b"".join(b"\0\0" + raw[i:i + 2] for i in range(0, len(raw), 2))


def main():
    d, m = sys.argv[1], sys.argv[2]
    st = d + "/model.safetensors"
    UP = "model.layers.1.mlp.up_proj.weight"
    Q = "model.layers.0.self_attn.q_proj.weight"
    NORM = "model.layers.0.input_layernorm.weight"
    if m == "none":
        pass
    elif m == "config-no-entry":
        edit_config(d, kipp_checkpoint=None, hidden_size=320)
    elif m == "config-wrong-dims":
        edit_config(d, num_hidden_layers=3)
    elif m == "config-unknown-id":
        edit_config(d, kipp_checkpoint="synthetic-huge")
    elif m == "config-not-qwen3":
        edit_config(d, model_type="llama", architectures=["LlamaForCausalLM"])
    elif m == "config-ambiguous":
        edit_config(d, kipp_checkpoint=None, num_hidden_layers=36, hidden_size=2560,
                    intermediate_size=9728, num_attention_heads=32, max_position_embeddings=262144,
                    rope_theta=5000000, tie_word_embeddings=True)
    elif m == "config-ambiguous-hint":
        edit_config(d, kipp_checkpoint=None, num_hidden_layers=36, hidden_size=2560,
                    intermediate_size=9728, num_attention_heads=32, max_position_embeddings=262144,
                    rope_theta=5000000, tie_word_embeddings=True,
                    _name_or_path="/models/Qwen3-4B-Thinking-2507")
    elif m == "config-qwen3-0.6b":
        edit_config(d, **QWEN3_06B)
    elif m == "config-instruct-context-edited":
        # the bug of issue 9: an instruct checkpoint whose context length was
        # edited to the base entry's value
        edit_config(d, **dict(QWEN3_06B, max_position_embeddings=32768))
    elif m == "config-eos-instruct":
        edit_config(d, eos_token_id=151645)
    elif m == "config-bos":
        edit_config(d, bos_token_id=1)
    elif m == "config-no-eos":
        edit_config(d, eos_token_id=None)
    elif m == "generation-eos-instruct":
        edit_json(d + "/generation_config.json", eos_token_id=[151645, 151643])
    elif m == "generation-bad-json":
        replace(d + "/generation_config.json", b"{")
    elif m == "chat-template-jinja":
        # the newer Hugging Face layout: the template in its own file
        c = json.load(open(d + "/tokenizer_config.json"))
        template = c.pop("chat_template")
        replace(d + "/tokenizer_config.json", json.dumps(c).encode())
        replace(d + "/chat_template.jinja", template.encode())
    elif m == "chat-template-jinja-differs":
        c = json.load(open(d + "/tokenizer_config.json"))
        replace(d + "/chat_template.jinja", (c["chat_template"] + "{# edited #}").encode())
    elif m == "config-bad-json":
        replace(d + "/config.json", open(d + "/config.json", "rb").read()[:-40])
    elif m == "missing-tensor":
        write_st(st, [t for t in read_st(st) if t[0] != UP])
    elif m == "extra-tensor":
        t = read_st(st)
        write_st(st, t + [("model.layers.0.self_attn.q_proj.bias", "BF16", [1024], b"\0" * 2048)])
    elif m == "dtype-f16":
        write_st(st, [(n, "F16", s, bf16_to_f16_bytes(r)) if n == Q else (n, dt, s, r)
                      for n, dt, s, r in read_st(st)])
    elif m == "dtype-f32":
        write_st(st, [(n, "F32", s, bf16_to_f32_bytes(r)) if n == NORM else (n, dt, s, r)
                      for n, dt, s, r in read_st(st)])
    elif m == "wrong-shape":
        write_st(st, [(n, dt, list(reversed(s)), r) if n == Q else (n, dt, s, r)
                      for n, dt, s, r in read_st(st)])
    elif m == "truncated":
        data = open(st, "rb").read()
        replace(st, data[:len(data) - 4096])
    elif m == "truncated-header":
        replace(st, open(st, "rb").read()[:200])
    elif m == "bad-header-json":
        data = bytearray(open(st, "rb").read())
        data[8] = ord("X")  # the header no longer starts a JSON value
        replace(st, bytes(data))
    elif m == "tied-head-differs":
        t = read_st(st)
        emb = next(x for x in t if x[0] == "model.embed_tokens.weight")
        write_st(st, t + [("lm_head.weight", "BF16", emb[2], emb[3][:-2] + b"\x01\x3f")])
    elif m == "tied-head-same":
        t = read_st(st)
        emb = next(x for x in t if x[0] == "model.embed_tokens.weight")
        write_st(st, t + [("lm_head.weight", "BF16", emb[2], emb[3])])
    elif m == "no-chat-template":
        c = json.load(open(d + "/tokenizer_config.json"))
        del c["chat_template"]
        replace(d + "/tokenizer_config.json", json.dumps(c).encode())
    elif m == "merges-as-strings":
        t = json.load(open(d + "/tokenizer.json"))
        t["model"]["merges"] = [" ".join(p) for p in t["model"]["merges"]]
        replace(d + "/tokenizer.json", json.dumps(t, ensure_ascii=False).encode())
    elif m == "merge-unknown-token":
        # a merge whose halves make no token of the vocabulary: the loader
        # refuses such a tokenizer, so the converter must too
        t = json.load(open(d + "/tokenizer.json"))
        t["model"]["merges"][5] = ["\u0120zzzq", "xqq"]
        replace(d + "/tokenizer.json", json.dumps(t, ensure_ascii=False).encode())
    elif m == "merge-not-pair":
        t = json.load(open(d + "/tokenizer.json"))
        t["model"]["merges"][7] = "".join(t["model"]["merges"][7])
        replace(d + "/tokenizer.json", json.dumps(t, ensure_ascii=False).encode())
    elif m == "merges-empty":
        t = json.load(open(d + "/tokenizer.json"))
        t["model"]["merges"] = []
        replace(d + "/tokenizer.json", json.dumps(t, ensure_ascii=False).encode())
    elif m in ("weight-nan", "weight-inf"):
        # a corrupt element: BF16 NaN in a projection, +infinity in a norm
        name, at, bits = (Q, 5, 0x7FC1) if m == "weight-nan" else (NORM, 3, 0x7F80)
        t = []
        for n, dt, s, r in read_st(st):
            if n == name:
                r = r[:2 * at] + struct.pack("<H", bits) + r[2 * at + 2:]
            t.append((n, dt, s, r))
        write_st(st, t)
    elif m == "added-token-in-vocab":
        # an added (special) token declared over a BPE id: the loader keeps
        # added tokens above the BPE vocabulary
        c = json.load(open(d + "/tokenizer_config.json"))
        c["added_tokens_decoder"]["5"] = {"content": "<|x|>", "special": True}
        replace(d + "/tokenizer_config.json", json.dumps(c).encode())
    elif m == "chat-template-empty":
        edit_json(d + "/tokenizer_config.json", chat_template="")
    elif m == "chat-template-nul":
        c = json.load(open(d + "/tokenizer_config.json"))
        edit_json(d + "/tokenizer_config.json", chat_template=c["chat_template"] + "\0{# x #}")
    elif m == "chat-template-list":
        # transformers' list of named templates
        c = json.load(open(d + "/tokenizer_config.json"))
        edit_json(d + "/tokenizer_config.json",
                  chat_template=[{"name": "default", "template": c["chat_template"]}])
    else:
        raise SystemExit(f"unknown mutation {m}")


if __name__ == "__main__":
    main()
