#!/usr/bin/python3
"""Measures for tests/scripts/test_quant_llama.sh (numpy, float64).

  quant_compare.py DIR SCHEME... --prompts N [--bounds JSON]

DIR holds, per artifact scheme S (bf16 first) and prompt i < N:
  S.p<i>.f32  Kipp oracle logits rows [prompt position][151936]
              (`kipp generate --tokens P -n 0 --all-logits`)
  S.llama.json  tools/llama_peer.mjs evalmany on the same file: llama.cpp's
              next-token distribution after each prompt (top ids with p)
Prints, per scheme:
  kipp vs llama.cpp on the same file, at each prompt's last position: top-1
    agreement; max |p_kipp - p_llama| and max |log p_kipp - log p_llama|
    over llama.cpp's top ids with p >= 1e-4;
  closer_ratio: mean |d log p| (llama.cpp, Kipp same file) divided by mean
    |d log p| (llama.cpp, Kipp on the bf16 file): < 1 means llama.cpp's
    quantized run sits closer to Kipp's quantized run than to unquantized;
  Kipp's quantized artifact vs Kipp's bf16 artifact at every prompt
    position: NMSE (max and mean over rows) and top-1 agreement;
  where DIR also holds S.i8.p<i>.f32 (Kipp's opt-in avx2i8 cpu tier, which
    quantizes activations to 8 bits as llama.cpp's CPU path does):
    i8_mean_dlogp against llama.cpp over the same ids, and i8_ratio, that
    divided by the oracle's llama_mean_dlogp (< 1: the tier sits closer to
    llama.cpp than the exact oracle does).
With --bounds, checks each measure against {scheme: {measure: bound}} and
exits 1 when one is exceeded.
"""
import json
import os
import sys

import numpy as np

VOCAB = 151936


def log_softmax(x):
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def main(argv):
    d = argv[0]
    i = argv.index("--prompts")
    n = int(argv[i + 1])
    schemes = argv[1:i]
    bounds = json.loads(argv[argv.index("--bounds") + 1]) if "--bounds" in argv else None
    rows = {s: [np.fromfile(f"{d}/{s}.p{j}.f32", dtype="<f4").reshape(-1, VOCAB).astype(np.float64)
                for j in range(n)] for s in schemes}
    ok = True
    report = {}
    for s in schemes:
        llama = json.load(open(f"{d}/{s}.llama.json"))
        assert len(llama) == n, f"{s}: {len(llama)} llama results for {n} prompts"
        top1 = cross_top1 = 0
        dp = dlp = 0.0
        dl, cross = [], []
        for j in range(n):
            lp = log_softmax(rows[s][j][-1])
            lb = log_softmax(rows[schemes[0]][j][-1])
            top = llama[j]["top"]
            top1 += int(np.argmax(lp)) == top[0]["id"]
            cross_top1 += int(np.argmax(lb)) == top[0]["id"]
            for t in top:
                if t["p"] < 1e-4:
                    continue
                dp = max(dp, abs(np.exp(lp[t["id"]]) - t["p"]))
                dlp = max(dlp, abs(lp[t["id"]] - np.log(t["p"])))
                dl.append(abs(lp[t["id"]] - np.log(t["p"])))
                cross.append(abs(lb[t["id"]] - np.log(t["p"])))
        m = {"llama_top1": top1 / n, "llama_max_dp": dp, "llama_max_dlogp": dlp,
             "llama_mean_dlogp": float(np.mean(dl))}
        if s != schemes[0]:
            # The same llama.cpp distribution against Kipp on the bf16 file:
            # if Kipp decoded the blocks differently from ggml, llama.cpp
            # would sit no closer to Kipp-on-this-file than to Kipp-on-bf16.
            m.update({"cross_top1": cross_top1 / n, "cross_mean_dlogp": float(np.mean(cross)),
                      "closer_ratio": float(np.mean(dl) / np.mean(cross))})
        i8_files = [f"{d}/{s}.i8.p{j}.f32" for j in range(n)]
        if s != schemes[0] and all(os.path.exists(f) for f in i8_files):
            di8 = []
            for j in range(n):
                lq = log_softmax(np.fromfile(i8_files[j], dtype="<f4").reshape(-1, VOCAB)
                                 .astype(np.float64)[-1])
                di8 += [abs(lq[t["id"]] - np.log(t["p"])) for t in llama[j]["top"] if t["p"] >= 1e-4]
            m.update({"i8_mean_dlogp": float(np.mean(di8)),
                      "i8_ratio": float(np.mean(di8) / np.mean(dl))})
        if s != schemes[0]:
            a = np.concatenate(rows[s])
            b = np.concatenate(rows[schemes[0]])
            e = ((a - b) ** 2).sum(axis=1) / (b ** 2).sum(axis=1)
            m.update({"bf16_nmse_max": float(e.max()), "bf16_nmse_mean": float(e.mean()),
                      "bf16_top1": float((a.argmax(1) == b.argmax(1)).mean()), "rows": int(a.shape[0])})
        report[s] = m
        print(f"{s:14s} " + " ".join(f"{k} {v:.4g}" for k, v in m.items()))
        if bounds and s in bounds:
            for k, lim in bounds[s].items():
                if k.startswith("i8_") and k not in m:  # only where the avx2i8 tier ran
                    continue
                good = m[k] >= lim if k.endswith("top1") else m[k] <= lim
                if not good:
                    print(f"FAIL: {s} {k} = {m[k]:.4g} violates bound {lim}")
                    ok = False
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
