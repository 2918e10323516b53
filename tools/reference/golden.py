#!/usr/bin/python3
"""Golden vectors for the oracle-vs-reference test (numpy, /usr/bin/python3).

Full logits are 151936 floats per position, too big to commit, so the
committed golden data is a manifest per checkpoint (tests/vectors/<id>/):
prompts.json (texts + transformers.js token ids, tools/gen_golden_prompts.mjs)
and manifest.json (generating command, numpy version, SHA-256 of the inputs,
tolerances, and a fingerprint of the FP64 reference logits per position:
argmax, top-5 ids, logsumexp, max, mean, std). The test regenerates the
reference logits from the checkpoint, checks them against the fingerprint
(so a drift in the reference is caught), then measures the oracle.

  golden.py make  --model-dir build/models/ID --vectors tests/vectors/ID
  golden.py check --model-dir build/models/ID --vectors tests/vectors/ID --oracle-dir DIR
        DIR/<prompt name>.f32 = `kipp generate --backend ref --all-logits` of that prompt
  golden.py list-prompts --vectors tests/vectors/ID      "name id,id,..." per line
"""

import argparse
import hashlib
import json
import os
import platform
import sys
import time

import numpy as np

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_reference as R  # noqa: E402
from naive_forward import naive_hidden  # noqa: E402

# DESIGN §7: the oracle matches the FP64 reference within NMSE 5e-5 with
# identical argmax. Against the reference with K/V rounded through BF16 the
# issue asked for NMSE <= 1e-8; that is unreachable for any FP32 engine (see
# tools/reference/README.md): where an FP64 K/V value lies within FP32
# rounding error of a BF16 rounding midpoint, the engine's FP32 value rounds
# to the neighbouring BF16 value (one BF16 ulp, 2^-8 relative), and every
# later position inherits it. Positions before the first such flip measure
# 2e-13..1.4e-11 (the FP32 arithmetic); after it, up to 7.9e-7 was measured.
# So that tier checks a 5e-6 bound per position plus a ratio that tells BF16
# K/V storage apart from FP32 storage: the oracle's summed squared error
# against the BF16-K/V reference must be < 0.25 of that against the plain
# one (measured <= 0.063; an engine keeping FP32 K/V would give >> 1).
TOLERANCES = {
    "oracle_nmse_max": 5e-5,
    "oracle_kv_bf16_nmse_max": 5e-6,
    "oracle_kv_bf16_nmse_issue_target": 1e-8,
    "oracle_kv_bf16_sq_err_ratio_max": 0.25,
    "argmax": "identical to the BF16-K/V reference at every position; identical to the plain "
              "reference except where the reference's own argmax changes under BF16 K/V (listed)",
    "fingerprint_abs_tol": 1e-8,
    "naive_vs_vectorised_rel_max": 1e-12,
}
FP_COLUMNS = ["argmax", "top5", "logsumexp", "max", "mean", "std"]
NAIVE_TOKENS = 12


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def input_files(model_dir):
    names = ["config.json"]
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            names += ["model.safetensors.index.json"] + sorted(set(json.load(f)["weight_map"].values()))
    else:
        names.append("model.safetensors")
    return names


def load_prompts(vectors):
    with open(os.path.join(vectors, "prompts.json")) as f:
        return json.load(f)["prompts"]


def fingerprint(logits):
    """One row per position: [argmax, top5 ids, logsumexp, max, mean, std]."""
    top5 = np.argsort(-logits, axis=-1, kind="stable")[:, :5]
    m = logits.max(axis=-1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(axis=-1))
    rows = []
    for i in range(logits.shape[0]):
        rows.append([int(top5[i, 0]), [int(t) for t in top5[i]],
                     round(float(lse[i]), 10), round(float(m[i]), 10),
                     round(float(logits[i].mean()), 10), round(float(logits[i].std()), 10)])
    return rows


def reference_both(model, ids):
    """FP64 reference logits for one prompt, plain and with BF16 K/V:
    two (n, vocab) arrays. One output-head product serves both."""
    h = np.concatenate([R.forward_hidden(model, ids, False), R.forward_hidden(model, ids, True)])
    logits = R.lm_head_logits(model, h)
    return logits[:len(ids)], logits[len(ids):]


def dump_manifest(doc):
    """JSON with one fingerprint row per line."""
    fp = doc["fingerprint"]
    body = ",\n".join(
        f'    "{name}": [\n' + ",\n".join("      " + json.dumps(r) for r in rows) + "\n    ]"
        for name, rows in fp.items())
    head = dict(doc)
    del head["fingerprint"]
    text = json.dumps(head, indent=2)[:-2] + ',\n  "fingerprint": {\n' + body + "\n  }\n}\n"
    return text


def describe(name, logits):
    st = R.row_stats(logits)
    mg, en = st["margin"], st["entropy"]
    return (f"{name:16s} n={logits.shape[0]:4d}  top1-top2 margin min {mg.min():.3f} "
            f"median {np.median(mg):.3f}; margins < 0.1: {int((mg < 0.1).sum())}; "
            f"entropy mean {en.mean():.2f} max {en.max():.2f} nats (uniform = {np.log(logits.shape[1]):.2f})")


def cmd_make(args):
    model = R.Model(args.model_dir)
    prompts = load_prompts(args.vectors)
    fp = {}
    for p in prompts:
        plain = R.forward_logits(model, p["ids"])
        fp[p["name"]] = fingerprint(plain)
        print(describe(p["name"], plain))
    doc = {
        "comment": "Fingerprint of the FP64 numpy reference (tools/reference/qwen3_reference.py) on the "
                   "prompts in prompts.json; full logits are regenerated at test time. Regenerate with "
                   "`generator` only when the checkpoint or the reference intentionally changes.",
        "checkpoint": os.path.basename(os.path.normpath(args.model_dir)),
        "generator": f"/usr/bin/python3 tools/reference/golden.py make --model-dir {args.model_dir} "
                     f"--vectors {args.vectors}",
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "inputs_sha256": {n: sha256_file(os.path.join(args.model_dir, n)) for n in input_files(args.model_dir)},
        "prompts_sha256": sha256_file(os.path.join(args.vectors, "prompts.json")),
        "tolerances": TOLERANCES,
        "fingerprint_columns": FP_COLUMNS,
        "fingerprint": fp,
    }
    with open(os.path.join(args.vectors, "manifest.json"), "w") as f:
        f.write(dump_manifest(doc))
    print(f"wrote {os.path.join(args.vectors, 'manifest.json')}")
    return 0


def compare_fingerprint(name, got, want, tol):
    """List of mismatch descriptions (empty = equal)."""
    bad = []
    if len(got) != len(want):
        return [f"{name}: {len(got)} positions, manifest has {len(want)}"]
    for i, (g, w) in enumerate(zip(got, want)):
        if g[0] != w[0] or g[1] != w[1]:
            bad.append(f"{name} pos {i}: argmax/top5 {g[0]} {g[1]} != manifest {w[0]} {w[1]}")
        for col, a, b in zip(FP_COLUMNS[2:], g[2:], w[2:]):
            if abs(a - b) > tol:
                bad.append(f"{name} pos {i}: {col} {a} != manifest {b}")
    return bad


def cmd_check(args):
    t0 = time.time()
    failures = []
    with open(os.path.join(args.vectors, "manifest.json")) as f:
        man = json.load(f)
    tol = man["tolerances"]

    # 1. Inputs are the ones the fingerprint was made from.
    for name, want in man["inputs_sha256"].items():
        got = sha256_file(os.path.join(args.model_dir, name))
        if got != want:
            failures.append(f"{args.model_dir}/{name}: SHA-256 {got} != manifest {want} "
                            "(checkpoint changed: regenerate the manifest if that was intended)")
    if sha256_file(os.path.join(args.vectors, "prompts.json")) != man["prompts_sha256"]:
        failures.append("prompts.json changed since the manifest was made")
    if failures:
        print("\n".join(failures))
        return 1

    model = R.Model(args.model_dir)
    prompts = load_prompts(args.vectors)

    # 2. The vectorised reference agrees with the token-by-token one.
    ids = max(prompts, key=lambda p: len(p["ids"]))["ids"][:NAIVE_TOKENS]
    for kvb in (False, True):
        a = R.forward_hidden(model, ids, kvb)
        b = naive_hidden(model, ids, R.round_bf16 if kvb else None)
        rel = np.abs(a - b).max() / np.abs(b).max()
        print(f"reference self-check (kv_bf16={kvb}): vectorised vs token-by-token max rel diff {rel:.2e}")
        if not rel <= tol["naive_vs_vectorised_rel_max"]:
            failures.append(f"vectorised reference differs from the token-by-token one: {rel:.2e}")

    # 3. Per prompt: fingerprint, then the oracle against both reference modes.
    print(f"{'prompt':16s} {'n':>4s}  {'NMSE max':>9s} {'NMSE mean':>9s}  {'bf16KV max':>10s} "
          f"{'bf16KV mean':>11s}  {'argmax':>7s}  {'ref plain vs bf16KV':>19s}  {'ratio':>6s}")
    worst = [0.0, 0.0]
    for p in prompts:
        name, ids = p["name"], p["ids"]
        plain, kvb = reference_both(model, ids)
        failures += compare_fingerprint(name, fingerprint(plain), man["fingerprint"].get(name, []),
                                        tol["fingerprint_abs_tol"])
        path = os.path.join(args.oracle_dir, name + ".f32")
        try:
            oracle = R.read_f32_rows(path, model.vocab)
        except (OSError, ValueError) as e:
            failures.append(f"{name}: cannot read oracle logits: {e}")
            continue
        if oracle.shape[0] != len(ids):
            failures.append(f"{name}: oracle wrote {oracle.shape[0]} rows for {len(ids)} prompt tokens")
            continue
        e_plain, e_kvb = R.nmse_rows(oracle, plain), R.nmse_rows(oracle, kvb)
        e_modes = R.nmse_rows(kvb, plain)
        ratio = float(np.sum((oracle - kvb) ** 2) / np.sum((oracle - plain) ** 2))
        am, am_plain, am_kvb = oracle.argmax(axis=-1), plain.argmax(axis=-1), kvb.argmax(axis=-1)
        ref_flips = np.nonzero(am_plain != am_kvb)[0]        # the reference's own near-ties
        bad_kvb = np.nonzero(am != am_kvb)[0]
        bad_plain = np.setdiff1d(np.nonzero(am != am_plain)[0], ref_flips)
        worst = [max(worst[0], e_plain.max()), max(worst[1], e_kvb.max())]
        print(f"{name:16s} {len(ids):4d}  {e_plain.max():9.2e} {e_plain.mean():9.2e}  {e_kvb.max():10.2e} "
              f"{e_kvb.mean():11.2e}  {len(ids) - len(bad_kvb):3d}/{len(ids):<3d}  {e_modes.max():19.2e}  {ratio:6.3f}")
        for i in ref_flips:
            srt = np.sort(plain[i])
            print(f"    note: position {i}: FP64 reference argmax {am_plain[i]} (margin {srt[-1] - srt[-2]:.4f}) "
                  f"becomes {am_kvb[i]} with BF16 K/V; oracle says {am[i]}")
        if len(bad_kvb) or len(bad_plain):
            failures.append(f"{name}: argmax differs at positions {sorted(set(bad_kvb.tolist()) | set(bad_plain.tolist()))}")
        if not e_plain.max() <= tol["oracle_nmse_max"]:
            failures.append(f"{name}: NMSE vs FP64 reference {e_plain.max():.3e} > {tol['oracle_nmse_max']} "
                            f"(position {int(e_plain.argmax())})")
        if not e_kvb.max() <= tol["oracle_kv_bf16_nmse_max"]:
            failures.append(f"{name}: NMSE vs FP64 reference with BF16 K/V {e_kvb.max():.3e} > "
                            f"{tol['oracle_kv_bf16_nmse_max']} (position {int(e_kvb.argmax())})")
        if not ratio < tol["oracle_kv_bf16_sq_err_ratio_max"]:
            failures.append(f"{name}: oracle is not clearly closer to the BF16-K/V reference than to the "
                            f"plain one (squared-error ratio {ratio:.3f})")
        if args.stats:
            print("    " + describe(name, plain))
    print(f"worst NMSE: plain {worst[0]:.3e}, BF16 K/V {worst[1]:.3e}; {time.time() - t0:.1f}s")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures[:40]))
        if len(failures) > 40:
            print(f"  ... and {len(failures) - 40} more")
        return 1
    return 0


def cmd_list(args):
    for p in load_prompts(args.vectors):
        print(p["name"], ",".join(str(t) for t in p["ids"]))
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("make", "check", "list-prompts"):
        s = sub.add_parser(name)
        s.add_argument("--vectors", required=True)
        if name != "list-prompts":
            s.add_argument("--model-dir", required=True)
        if name == "check":
            s.add_argument("--oracle-dir", required=True)
            s.add_argument("--stats", action="store_true", help="also print margin/entropy per prompt")
    args = ap.parse_args(argv)
    return {"make": cmd_make, "check": cmd_check, "list-prompts": cmd_list}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
