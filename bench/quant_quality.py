#!/usr/bin/python3
"""Quality of each weight scheme against the bf16 artifact of the same
checkpoint (issue 6): logits NMSE and top-1 agreement at every position of
a prompt, perplexity on one token stream, and file size. Also the Q8_0 KV
cache on the bf16 file. Runs Kipp's `cpu` backend (the oracle is too slow
at 0.6B) and writes a JSON record to bench/results/ plus a Markdown table.

  /usr/bin/python3 bench/quant_quality.py [--kipp build/kipp]
      [--models build/models] [--id synthetic-0.6b] [--stream-tokens 512]
      [--ctx 512] [--logit-positions 128] [--threads 2]

Files: MODELS/ID.gguf (bf16) and MODELS/ID.SCHEME.gguf for each scheme
(`kipp convert MODELS/ID -o MODELS/ID.SCHEME.gguf --quant SCHEME`, as the
Makefile's fixture rules name them; made here when missing). The stream is sampled from the bf16 model itself
(temperature 1, seed 1, after token 9707 "Hello"), so its perplexity is
meaningful for a random-weight model; every scheme is scored on the same ids.
Keep --ctx at the stream length (one window): a random-weight model's
samples are long runs of repeated ids, and a window that starts inside a
run without its history scores those ids as near-impossible, so shorter
windows give astronomically large perplexities that measure nothing.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

import numpy as np

VOCAB = 151936
SCHEMES = ["bf16", "q8_0", "affine4_gs32", "scale4_gs32"]


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kipp", default="build/kipp")
    ap.add_argument("--models", default="build/models")
    ap.add_argument("--id", default="synthetic-0.6b")
    ap.add_argument("--stream-tokens", type=int, default=512)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--logit-positions", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="build/quant-quality")
    a = ap.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    files = {s: f"{a.models}/{a.id}.gguf" if s == "bf16" else f"{a.models}/{a.id}.{s}.gguf" for s in SCHEMES}
    for s, f in files.items():
        if not os.path.exists(f):
            run([a.kipp, "convert", f"{a.models}/{a.id}", "-o", f, "--quant", s])
    cpu = ["--backend", "cpu", "--threads", str(a.threads)]

    stream = f"{a.work}/{a.id}-stream-{a.stream_tokens}.txt"
    if not os.path.exists(stream):
        ids = run([a.kipp, "generate", "-m", files["bf16"], *cpu[:2], "--tokens", "9707",
                   "-n", str(a.stream_tokens - 1), "--temperature", "1", "--seed", "1", "--print-ids"])
        with open(stream, "w") as f:
            f.write("9707," + ids.strip() + "\n")
    with open(stream) as f:
        ids = [int(t) for t in f.read().replace("\n", ",").split(",") if t]
    prompt = ",".join(map(str, ids[:a.logit_positions]))

    rows, res = {}, {}
    variants = [(s, s, "bf16") for s in SCHEMES] + [("bf16 + q8_0 KV", "bf16", "q8_0")]
    for name, s, kvq in variants:
        out = f"{a.work}/{a.id}-{s}-{kvq}.f32"
        run([a.kipp, "generate", "-m", files[s], *cpu[:2], "--kv-quant", kvq, "--tokens", prompt,
             "-n", "0", "--all-logits", out])
        rows[name] = np.fromfile(out, dtype="<f4").reshape(-1, VOCAB).astype(np.float64)
        os.remove(out)
        ppl = json.loads(run([a.kipp, "ppl", "-m", files[s], *cpu, "--kv-quant", kvq,
                              "--tokens-file", stream, "--ctx", str(a.ctx), "--json"]))
        res[name] = {"scheme": s, "kv": kvq, "file_bytes": os.path.getsize(files[s]),
                     "ppl": ppl["ppl"], "tokens_scored": ppl["tokens_scored"]}
    base = rows["bf16"]
    for name, r in rows.items():
        e = ((r - base) ** 2).sum(1) / (base ** 2).sum(1)
        res[name].update({"nmse_mean": float(e.mean()), "nmse_max": float(e.max()),
                          "top1_agree": float((r.argmax(1) == base.argmax(1)).mean()),
                          "ppl_ratio": res[name]["ppl"] / res["bf16"]["ppl"]})

    lines = [f"| {a.id} | file | NMSE vs bf16 (mean / max, {a.logit_positions} positions) | top-1 agree | "
             f"ppl ({res['bf16']['tokens_scored']} tokens, ctx {a.ctx}) | ppl / bf16 |",
             "|---|---|---|---|---|---|"]
    for name, m in res.items():
        lines.append(f"| {name} | {m['file_bytes'] / 2**20:.0f} MiB | {m['nmse_mean']:.2e} / {m['nmse_max']:.2e} | "
                     f"{100 * m['top1_agree']:.1f}% | {m['ppl']:.3f} | {m['ppl_ratio']:.4f} |")
    table = "\n".join(lines)
    print(table)
    rec = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "machine": platform.processor() or platform.machine(), "kipp_isa": os.environ.get("KIPP_CPU_ISA", "auto"),
           "args": vars(a), "stream": stream, "results": res, "table": table}
    os.makedirs("bench/results", exist_ok=True)
    path = f"bench/results/quant-quality-{rec['date'][:10]}-{rec['commit'][:8]}.json"
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
    print(f"record: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
