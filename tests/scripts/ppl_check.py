#!/usr/bin/python3
"""Independent perplexity computations for tests/scripts/test_quant_ppl.sh.

  ppl_check.py rows TOKENS_FILE CTX ROWS_DIR
      ROWS_DIR/w<i>.f32 hold `kipp generate --tokens WINDOW -n 0 --all-logits`
      rows for window i (non-overlapping windows of CTX tokens). Prints the
      perplexity from those float32 rows, with numpy's float64 log-softmax.
  ppl_check.py ref MODEL_DIR TOKENS_FILE CTX
      The same windows through the FP64 numpy reference
      (tools/reference/qwen3_reference.py, K/V rounded to BF16 as the engine
      stores them), reading the Hugging Face checkpoint, not our GGUF.
  ppl_check.py windows TOKENS_FILE CTX
      Prints each window's ids comma-separated, one window per line (windows
      of fewer than 2 tokens score nothing and are left out).
Output: one JSON object {"ppl", "nll_mean", "tokens_scored", "windows"}.
"""
import json
import math
import os
import re
import sys

import numpy as np

VOCAB = 151936


def read_ids(path):
    with open(path) as f:
        return [int(s) for s in re.split(r"[\s,]+", f.read()) if s]


def windows(ids, ctx):
    return [ids[i:i + ctx] for i in range(0, len(ids), ctx) if len(ids[i:i + ctx]) >= 2]


def nll_rows(logits, window):
    """logits (n, vocab) float64; row j scores window[j + 1]."""
    x = logits[:-1]
    m = x.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
    return lse - x[np.arange(len(window) - 1), window[1:]]


def summary(nll, n_windows):
    mean = float(np.mean(nll))
    return {"ppl": math.exp(mean), "nll_mean": mean, "tokens_scored": int(len(nll)),
            "windows": n_windows}


def main(argv):
    if argv[0] == "windows":
        for w in windows(read_ids(argv[1]), int(argv[2])):
            print(",".join(map(str, w)))
        return 0
    if argv[0] == "rows":
        ws = windows(read_ids(argv[1]), int(argv[2]))
        nll = []
        for i, w in enumerate(ws):
            rows = np.fromfile(os.path.join(argv[3], f"w{i}.f32"), dtype="<f4")
            rows = rows.reshape(-1, VOCAB).astype(np.float64)
            if rows.shape[0] != len(w):
                print(f"window {i}: {rows.shape[0]} rows for {len(w)} tokens", file=sys.stderr)
                return 1
            nll.append(nll_rows(rows, w))
        print(json.dumps(summary(np.concatenate(nll), len(ws))))
        return 0
    if argv[0] == "ref":
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "reference"))
        import qwen3_reference as ref
        model = ref.Model(argv[1])
        ws = windows(read_ids(argv[2]), int(argv[3]))
        nll = [nll_rows(ref.forward_logits(model, w, kv_bf16=True), w) for w in ws]
        print(json.dumps(summary(np.concatenate(nll), len(ws))))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
