#!/usr/bin/python3
"""Writes small GGUF seed files for tests/fuzz/fuzz_gguf.c into
tests/fuzz/seeds-gguf/. An independent little writer (struct, GGUF v3 spec),
so the seeds do not inherit mistakes of src/core/gguf.c.

  /usr/bin/python3 tests/fuzz/make_seeds_gguf.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds-gguf")
U32, I32, F32, BOOL, STR, ARR, U64 = 4, 5, 6, 7, 8, 9, 10


def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, val):
    out = s(key) + struct.pack("<I", typ)
    if typ == U32:
        return out + struct.pack("<I", val)
    if typ == F32:
        return out + struct.pack("<f", val)
    if typ == BOOL:
        return out + struct.pack("<B", val)
    if typ == U64:
        return out + struct.pack("<Q", val)
    if typ == STR:
        return out + s(val)
    elt, items = val
    out += struct.pack("<IQ", elt, len(items))
    if elt == STR:
        return out + b"".join(s(i) for i in items)
    return out + b"".join(struct.pack("<i", i) for i in items)


BLOCK = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18), 3: (32, 20)}


def gguf(kvs, tensors, align=32):
    """tensors: (name, ne list, ggml type); data is a byte pattern."""
    head = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(kvs)) + b"".join(kvs)
    offs, off, blobs = [], 0, []
    for name, ne, typ in tensors:
        be, bb = BLOCK[typ]
        n = 1
        for d in ne:
            n *= d
        nbytes = n // be * bb
        offs.append(off)
        blobs.append(bytes((i * 7 + 3) & 0xFF for i in range(nbytes)))
        off = (off + nbytes + align - 1) // align * align
    for (name, ne, typ), o in zip(tensors, offs):
        head += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", typ, o)
    head += b"\0" * (-len(head) % align)
    data = b""
    for o, blob in zip(offs, blobs):
        data += b"\0" * (o - len(data)) + blob
    data += b"\0" * (-len(data) % align)
    return head + data


def artifact_like():
    """synthetic-tiny's metadata with a shrunken vocabulary and a few small
    tensors: gets through the registry lookup and most metadata checks."""
    toks = ["!", "\"", "a", "b", "ab", "<|endoftext|>", "[PAD6]", "\u0120the"]
    kvs = [
        kv("general.architecture", STR, "qwen3"), kv("general.name", STR, "synthetic-tiny"),
        kv("general.file_type", U32, 32), kv("qwen3.context_length", U32, 4096),
        kv("qwen3.embedding_length", U32, 256), kv("qwen3.block_count", U32, 2),
        kv("qwen3.feed_forward_length", U32, 768), kv("qwen3.attention.head_count", U32, 8),
        kv("qwen3.attention.head_count_kv", U32, 8), kv("qwen3.attention.key_length", U32, 128),
        kv("qwen3.attention.value_length", U32, 128), kv("qwen3.rope.freq_base", F32, 1e6),
        kv("qwen3.attention.layer_norm_rms_epsilon", F32, 1e-6),
        kv("tokenizer.ggml.model", STR, "gpt2"), kv("tokenizer.ggml.pre", STR, "qwen2"),
        kv("tokenizer.ggml.tokens", ARR, (STR, toks)),
        kv("tokenizer.ggml.token_type", ARR, (I32, [1, 1, 1, 1, 1, 3, 5, 1])),
        kv("tokenizer.ggml.merges", ARR, (STR, ["a b", "\u0120 t"])),
        kv("tokenizer.ggml.eos_token_id", U32, 151643),
        kv("tokenizer.ggml.padding_token_id", U32, 151643),
        kv("tokenizer.ggml.bos_token_id", U32, 151643),
        kv("tokenizer.ggml.add_bos_token", BOOL, 0),
        kv("kipp.checkpoint", STR, "synthetic-tiny"),
        kv("kipp.source.repository", STR, "kipp-synthetic/tiny"),
        kv("kipp.source.revision", STR, "v1-seed-1"),
        kv("kipp.source.files", ARR, (STR, ["config.json", "model.safetensors"])),
        kv("kipp.source.sha256", ARR, (STR, ["0" * 64, "f" * 64])),
        kv("kipp.quant.scheme", STR, "bf16"),
        kv("kipp.converter.version", STR, "0.1.0"),
    ]
    tensors = [("token_embd.weight", [32, 8], 30), ("output_norm.weight", [32], 0),
               ("blk.0.attn_norm.weight", [32], 0), ("blk.0.attn_q.weight", [32, 4], 30)]
    return gguf(kvs, tensors)


def mixed_types():
    kvs = [kv("general.alignment", U32, 64), kv("a.u64", U64, 1 << 40),
           kv("a.strs", ARR, (STR, ["x", "", "yz"])), kv("a.i32s", ARR, (I32, [-1, 2]))]
    tensors = [("q8", [64, 2], 8), ("q40", [32, 3], 2), ("q41", [32], 3), ("f16", [5, 1, 2], 1),
               ("bf16", [3], 30), ("f32x4", [2, 2, 2, 2], 0)]
    return gguf(kvs, tensors, align=64)


def minimal():
    return gguf([kv("general.architecture", STR, "qwen3")], [("t", [4], 0)])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, blob in [("artifact-like.gguf", artifact_like()), ("mixed-types.gguf", mixed_types()),
                       ("minimal.gguf", minimal())]:
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)
        print(name, len(blob))
