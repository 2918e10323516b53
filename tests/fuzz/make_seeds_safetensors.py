#!/usr/bin/python3
"""Writes seed files for tests/fuzz/fuzz_safetensors.c into
tests/fuzz/seeds-safetensors/, with its own little writer of the published
format (u64 little-endian header length, JSON header, data), so the seeds
do not inherit mistakes of src/convert/safetensors.c.

  /usr/bin/python3 tests/fuzz/make_seeds_safetensors.py
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds-safetensors")
SIZES = {"BF16": 2, "F16": 2, "F32": 4, "I8": 1, "U8": 1, "I64": 8}


def write(name, tensors, metadata=None, pad=True):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for tname, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[tname] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((len(data) + i) % 251 for i in range(n))
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def main():
    os.makedirs(OUT, exist_ok=True)
    write("one-bf16", [("model.norm.weight", "BF16", [8])])
    write("layer", [("model.layers.0.self_attn.q_proj.weight", "BF16", [4, 8]),
                    ("model.layers.0.input_layernorm.weight", "BF16", [8]),
                    ("model.layers.0.self_attn.q_norm.weight", "F32", [4])],
          metadata={"format": "pt"})
    write("mixed", [("a", "I8", [3]), ("b", "F16", [2, 2]), ("c", "I64", [1]),
                    ("empty", "F32", [0, 4]), ("scalar", "U8", [])], pad=False)
    write("empty-header", [])


if __name__ == "__main__":
    main()
