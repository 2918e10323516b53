#!/usr/bin/python3
"""Writes seed inputs for tests/fuzz/fuzz_hf_config.c into
tests/fuzz/seeds-hf-config/: CONFIG NUL GENERATION NUL CHOICE, where CHOICE's
bit 0 says a chat template is present. The synthetic seeds are the files
`kipp synth` wrote (build/models/synthetic-tiny{,-instruct}, made by `make
fixtures`); the qwen3-0.6b and 4B 2507 seeds put the dimensions, context,
rope_theta, tie and eos values of Qwen's published config.json files (the
registry's facts, ../shared/checkpoints.tsv) into the instruct file's
layout, without its kipp_checkpoint field, so they are matched by value.

  /usr/bin/python3 tests/fuzz/make_seeds_hf_config.py [build/models]
"""
import json
import os
import sys

MODELS = sys.argv[1] if len(sys.argv) > 1 else "build/models"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds-hf-config")


def write(name, cfg, gen, has_template):
    data = json.dumps(cfg, indent=2).encode() + b"\0"
    data += (json.dumps(gen).encode() if gen is not None else b"") + b"\0"
    data += bytes([1 if has_template else 0])
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    for d in ["synthetic-tiny", "synthetic-tiny-instruct"]:
        cfg = json.load(open(os.path.join(MODELS, d, "config.json")))
        gen = json.load(open(os.path.join(MODELS, d, "generation_config.json")))
        write(d, cfg, gen, "instruct" in d)
    base = json.load(open(os.path.join(MODELS, "synthetic-tiny-instruct", "config.json")))
    for k in ["kipp_checkpoint", "kipp_note"]:
        base.pop(k)
    q06 = dict(base, num_hidden_layers=28, hidden_size=1024, intermediate_size=3072,
               num_attention_heads=16, max_position_embeddings=40960, rope_theta=1000000,
               tie_word_embeddings=True, eos_token_id=151645, max_window_layers=28)
    write("qwen3-0.6b", q06, {"bos_token_id": 151643, "eos_token_id": [151645, 151643]}, True)
    q4 = dict(base, num_hidden_layers=36, hidden_size=2560, intermediate_size=9728,
              num_attention_heads=32, max_position_embeddings=262144, rope_theta=5000000,
              tie_word_embeddings=True, eos_token_id=151645,
              _name_or_path="Qwen/Qwen3-4B-Thinking-2507")
    write("qwen3-4b-2507", q4, None, True)


if __name__ == "__main__":
    main()
