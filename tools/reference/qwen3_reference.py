#!/usr/bin/python3
"""Independent FP64 reference forward pass for Qwen3 (numpy only).

This is the yardstick the C oracle (`--backend ref`) is measured against, so
it shares nothing with the engine: it reads the Hugging Face checkpoint
directly (config.json + model.safetensors, or sharded shards with
model.safetensors.index.json), never our GGUF, and follows the upstream
`transformers` Qwen3ForCausalLM semantics step by step, in float64:

  x = embed_tokens[ids]                                   (n, hidden)
  per layer:
    h = RMSNorm(x) * input_layernorm                      x * rsqrt(mean(x^2) + eps) * w
    q = h Wq^T -> (n, heads, 128);  k, v = h Wk^T, h Wv^T -> (n, 8, 128)
    q = RMSNorm_head(q) * q_norm;  k = RMSNorm_head(k) * k_norm   (over head_dim)
    q, k = RoPE rotate-half (NEOX): angle(pos, i) = pos * theta^(-2i/128), i < 64,
           out[:64] = x1 cos - x2 sin,  out[64:] = x2 cos + x1 sin
    [--kv-bf16: k and v rounded to BF16, round-to-nearest-even, as the engine stores them]
    attention: query head j uses KV head j // (heads / 8); scores scaled by
               1/sqrt(128); causal mask; softmax; weighted sum of v
    x = x + o_proj(attn)
    h = RMSNorm(x) * post_attention_layernorm
    x = x + down(silu(gate(h)) * up(h))
  logits = RMSNorm(x) * norm  @ lm_head^T   (lm_head = embed_tokens when tied)
  [--head-q8_0: lm_head replaced by its Q8_0 round trip (ggml's block layout,
   the scale rule docs/ARCHITECTURE.md gives for kipp's encoder), what
   `kipp ... --head q8_0` reads]

BF16 weights widen exactly to float64, so the only differences between this
and an exact-arithmetic forward pass are float64 rounding (~1e-16 relative).

Usage (run with /usr/bin/python3, the interpreter that has numpy):
  qwen3_reference.py --model DIR --tokens 1,2,3 [--kv-bf16] [--head-q8_0]
        [--out FILE] [--out-dtype f32|f64]      write logits rows [position][vocab]
        [--compare ORACLE.f32]                  NMSE/argmax of a float32 logits file
        [--nmse-max X] [--nmse-min Y]           with --compare: also fail unless
                                                every row's NMSE <= X / the worst >= Y
        [--summary]                             argmax, top-1 margin, entropy per position
The library entry points (load_checkpoint, forward_hidden, lm_head_logits,
forward_logits) are used by golden.py.
"""

import argparse
import json
import math
import mmap
import os
import sys
import threading

import numpy as np

HEAD_DIM = 128
KV_HEADS = 8


# ---- safetensors ----------------------------------------------------------

class Checkpoint:
    """Read-only view of a Hugging Face checkpoint directory.

    Safetensors layout: u64 little-endian header length N, N bytes of JSON
    {name: {dtype, shape, data_offsets: [begin, end]}} (offsets relative to
    the end of the header), then the data. Files are memory-mapped; a tensor
    is widened to float64 only when asked for.
    """

    def __init__(self, directory):
        self.directory = directory
        with open(os.path.join(directory, "config.json"), "rb") as f:
            self.config = json.load(f)
        self._where = {}      # tensor name -> (file name, header entry)
        self._maps = {}       # file name -> (mmap, data start offset)
        index = os.path.join(directory, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index, "rb") as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = ["model.safetensors"]
        for name in files:
            self._open(name)

    def _open(self, name):
        path = os.path.join(self.directory, name)
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if len(mm) < 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        header_len = int.from_bytes(mm[:8], "little")
        if header_len > len(mm) - 8:
            raise ValueError(f"{path}: header length {header_len} past end of file")
        header = json.loads(mm[8:8 + header_len])
        data_start = 8 + header_len
        for tname, entry in header.items():
            if tname == "__metadata__":
                continue
            begin, end = entry["data_offsets"]
            if not (0 <= begin <= end <= len(mm) - data_start):
                raise ValueError(f"{path}: {tname} data outside the file")
            self._where[tname] = (name, entry)
        self._maps[name] = (mm, data_start)

    def has(self, tname):
        return tname in self._where

    def tensor(self, tname):
        """The tensor as float64, in its stored shape."""
        fname, entry = self._where[tname]
        mm, data_start = self._maps[fname]
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        count = int(np.prod(shape)) if shape else 1
        dtype = entry["dtype"]
        raw = np.frombuffer(mm, dtype=np.uint8, count=end - begin, offset=data_start + begin)
        if dtype == "BF16":
            if end - begin != 2 * count:
                raise ValueError(f"{tname}: byte length does not match shape")
            # BF16 is the upper half of an IEEE float32: widen exactly.
            bits = raw.view("<u2").astype(np.uint32) << 16
            return bits.view(np.float32).astype(np.float64).reshape(shape)
        if dtype in ("F32", "F16", "F64"):
            np_dtype = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}[dtype]
            if end - begin != np.dtype(np_dtype).itemsize * count:
                raise ValueError(f"{tname}: byte length does not match shape")
            return raw.view(np_dtype).astype(np.float64).reshape(shape)
        raise ValueError(f"{tname}: unsupported dtype {dtype}")


class Model:
    """Config facts and float64 weights of one checkpoint, loaded eagerly
    (the synthetic models are tiny; a real 0.6B model needs ~5 GB)."""

    def __init__(self, directory):
        ck = Checkpoint(directory)
        c = ck.config
        self.config = c
        self.hidden = int(c["hidden_size"])
        self.layers = int(c["num_hidden_layers"])
        self.heads = int(c["num_attention_heads"])
        self.kv_heads = int(c.get("num_key_value_heads", self.heads))
        self.head_dim = int(c.get("head_dim", self.hidden // self.heads))
        self.eps = float(c["rms_norm_eps"])
        self.theta = float(c.get("rope_theta", 10000.0))
        self.vocab = int(c["vocab_size"])
        self.tied = bool(c.get("tie_word_embeddings", False))
        if self.head_dim != HEAD_DIM or self.kv_heads != KV_HEADS:
            raise ValueError("not a Qwen3-family config (head_dim 128, 8 KV heads)")
        if self.heads % self.kv_heads:
            raise ValueError("query heads must be a multiple of KV heads")
        if c.get("rope_scaling"):
            raise ValueError("rope_scaling is not part of the Qwen3 family contract")

        def t(name):
            return ck.tensor(name)

        self.embed = t("model.embed_tokens.weight")                   # (vocab, hidden)
        self.final_norm = t("model.norm.weight")                      # (hidden,)
        if self.tied:
            self.lm_head = self.embed
        else:
            self.lm_head = t("lm_head.weight")                        # (vocab, hidden)
        self.layer = []
        for i in range(self.layers):
            p = f"model.layers.{i}."
            self.layer.append({
                "attn_norm": t(p + "input_layernorm.weight"),         # (hidden,)
                "wq": t(p + "self_attn.q_proj.weight"),               # (heads*128, hidden)
                "wk": t(p + "self_attn.k_proj.weight"),               # (8*128, hidden)
                "wv": t(p + "self_attn.v_proj.weight"),               # (8*128, hidden)
                "wo": t(p + "self_attn.o_proj.weight"),               # (hidden, heads*128)
                "q_norm": t(p + "self_attn.q_norm.weight"),           # (128,)
                "k_norm": t(p + "self_attn.k_norm.weight"),           # (128,)
                "ffn_norm": t(p + "post_attention_layernorm.weight"), # (hidden,)
                "w_gate": t(p + "mlp.gate_proj.weight"),              # (ffn, hidden)
                "w_up": t(p + "mlp.up_proj.weight"),                  # (ffn, hidden)
                "w_down": t(p + "mlp.down_proj.weight"),              # (hidden, ffn)
            })
        if self.embed.shape != (self.vocab, self.hidden):
            raise ValueError(f"embed_tokens shape {self.embed.shape} does not match config")


def q8_0_round_trip(w):
    """(rows, cols) float64 weights -> the values a Q8_0 encoding of their
    float32 widening decodes to, float64. Per 32-value block along a row:
    d = fp16(max|x| / 127) (round to nearest even; numpy's float16 cast),
    q = x / d in float32 rounded half away from zero and clamped to
    [-127, 127] (0 where d is 0), value = d * q. Blocks are quantized
    against the fp16-rounded d, so this is exactly what a decoder of the
    stored block computes."""
    rows, cols = w.shape
    if cols % 32:
        raise ValueError(f"Q8_0 needs a width that is a multiple of 32, got {cols}")
    x = w.astype(np.float32).reshape(rows, cols // 32, 32)
    amax = np.max(np.abs(x), axis=-1)
    d = np.minimum(amax / np.float32(127), np.float32(65504)).astype(np.float16).astype(np.float32)
    safe = np.where(d > 0, d, np.float32(1))[..., None]
    quot = (x / safe).astype(np.float64)
    q = np.clip(np.sign(quot) * np.floor(np.abs(quot) + 0.5), -127, 127)
    q = np.where(d[..., None] > 0, q, 0.0)
    return (q * d[..., None].astype(np.float64)).reshape(rows, cols)


# ---- the math -----------------------------------------------------------------

def rms_norm(x, weight, eps):
    """HF Qwen3RMSNorm over the last axis: x * rsqrt(mean(x^2) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def round_bf16(x):
    """float64 -> nearest BF16 value (ties to even), returned as float64.

    BF16 keeps 8 significant bits, i.e. the top 7 of float64's 52 stored
    mantissa bits: add half an ulp (minus one if the kept lsb is 0) at bit 45
    and clear the 45 low bits; a carry correctly bumps the exponent. Values
    stay far inside BF16's range here (post-norm K and V), so no
    overflow/subnormal handling is needed.
    """
    bits = np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)
    lsb = (bits >> np.uint64(45)) & np.uint64(1)
    bits = (bits + np.uint64((1 << 44) - 1) + lsb) & ~np.uint64((1 << 45) - 1)
    return bits.view(np.float64)


def rope(x, cos, sin):
    """NEOX rotate-half RoPE. x: (n, heads, 128); cos, sin: (n, 1, 64)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def silu(x):
    return x / (1.0 + np.exp(-x))


def forward_hidden(model, ids, kv_bf16=False):
    """All positions of one prompt at once (causal): returns the final-normed
    hidden states, (n, hidden) float64."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("need at least one token id")
    if ids.min() < 0 or ids.max() >= model.vocab:
        raise ValueError("token id out of range")
    n = ids.size
    group = model.heads // model.kv_heads

    pos = np.arange(n, dtype=np.float64)
    inv_freq = model.theta ** (-np.arange(0, HEAD_DIM, 2, dtype=np.float64) / HEAD_DIM)  # (64,)
    angle = pos[:, None] * inv_freq[None, :]                                            # (n, 64)
    cos = np.cos(angle)[:, None, :]                                                     # (n, 1, 64)
    sin = np.sin(angle)[:, None, :]
    future = np.triu(np.ones((n, n), dtype=bool), k=1)                                  # (q, t) t > q
    scale = 1.0 / math.sqrt(HEAD_DIM)

    x = model.embed[ids]                                                                # (n, hidden)
    for L in model.layer:
        h = rms_norm(x, L["attn_norm"], model.eps)
        q = (h @ L["wq"].T).reshape(n, model.heads, HEAD_DIM)
        k = (h @ L["wk"].T).reshape(n, model.kv_heads, HEAD_DIM)
        v = (h @ L["wv"].T).reshape(n, model.kv_heads, HEAD_DIM)
        q = rope(rms_norm(q, L["q_norm"], model.eps), cos, sin)
        k = rope(rms_norm(k, L["k_norm"], model.eps), cos, sin)
        if kv_bf16:
            k, v = round_bf16(k), round_bf16(v)
        # Query head j = kv * group + g reads KV head kv (HF repeat_kv order).
        qg = q.reshape(n, model.kv_heads, group, HEAD_DIM)
        scores = np.einsum("qkgd,tkd->kgqt", qg, k) * scale                             # (8, group, n, n)
        scores[..., future] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        attn = np.einsum("kgqt,tkd->qkgd", p, v).reshape(n, model.heads * HEAD_DIM)
        x = x + attn @ L["wo"].T
        h = rms_norm(x, L["ffn_norm"], model.eps)
        x = x + (silu(h @ L["w_gate"].T) * (h @ L["w_up"].T)) @ L["w_down"].T
    return rms_norm(x, model.final_norm, model.eps)


def lm_head_logits(model, hidden, threads=None):
    """hidden (n, hidden) -> logits (n, vocab) float64.

    The output head dominates the cost (vocab 151936). Debian's numpy may be
    linked to the unoptimised reference BLAS, so the vocabulary is split over
    threads (numpy releases the GIL inside matmul)."""
    threads = threads or os.cpu_count() or 1
    out = np.empty((hidden.shape[0], model.vocab), dtype=np.float64)
    bounds = np.linspace(0, model.vocab, threads + 1).astype(int)

    def work(i):
        a, b = bounds[i], bounds[i + 1]
        out[:, a:b] = hidden @ model.lm_head[a:b].T

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return out


def forward_logits(model, ids, kv_bf16=False):
    return lm_head_logits(model, forward_hidden(model, ids, kv_bf16))


# ---- measures shared with golden.py ----------------------------------------------

def nmse_rows(a, b):
    """Per-row NMSE = sum((a-b)^2) / sum(b^2), b the reference. (n,)"""
    a = np.asarray(a, dtype=np.float64)
    return np.sum((a - b) ** 2, axis=-1) / np.sum(b * b, axis=-1)


def row_stats(logits):
    """Per row: argmax, top-1 minus top-2 logit, softmax entropy (nats), logsumexp."""
    top2 = np.argpartition(-logits, 1, axis=-1)[:, :2]
    v = np.take_along_axis(logits, top2, axis=-1)
    m = logits.max(axis=-1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(axis=-1, keepdims=True)
    p = e / s
    lse = (m + np.log(s))[:, 0]
    entropy = -np.sum(p * np.log(np.maximum(p, 1e-300)), axis=-1)
    return {
        "argmax": logits.argmax(axis=-1),
        "margin": np.abs(v[:, 0] - v[:, 1]),
        "entropy": entropy,
        "lse": lse,
    }


def read_f32_rows(path, vocab):
    with open(path, "rb") as f:          # not np.fromfile: works on pipes too
        data = np.frombuffer(f.read(), dtype="<f4")
    if data.size % vocab:
        raise ValueError(f"{path}: {data.size} floats is not a whole number of {vocab}-wide rows")
    return data.reshape(-1, vocab).astype(np.float64)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    ap.add_argument("--tokens", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--kv-bf16", action="store_true", help="round K (after norm+RoPE) and V to BF16")
    ap.add_argument("--out", help="write logits rows [position][vocab] here")
    ap.add_argument("--out-dtype", choices=["f32", "f64"], default="f32")
    ap.add_argument("--compare", help="float32 logits file [position][vocab] to compare")
    ap.add_argument("--summary", action="store_true", help="print per-position statistics")
    ap.add_argument("--head-q8_0", action="store_true",
                    help="replace lm_head by its Q8_0 round trip (kipp --head q8_0)")
    ap.add_argument("--nmse-max", type=float, help="with --compare: fail if a row's NMSE exceeds this")
    ap.add_argument("--nmse-min", type=float, help="with --compare: fail if the worst row's NMSE is below this")
    args = ap.parse_args(argv)

    ids = [int(s) for s in args.tokens.split(",") if s.strip()]
    model = Model(args.model)
    if args.head_q8_0:
        model.lm_head = q8_0_round_trip(model.lm_head)
    logits = forward_logits(model, ids, args.kv_bf16)
    if args.out:
        logits.astype("<f4" if args.out_dtype == "f32" else "<f8").tofile(args.out)
    if args.summary or not (args.out or args.compare):
        st = row_stats(logits)
        for i in range(len(ids)):
            print(f"pos {i:4d} id {ids[i]:6d} argmax {st['argmax'][i]:6d} "
                  f"margin {st['margin'][i]:.4f} entropy {st['entropy'][i]:.3f}")
    status = 0
    if args.compare:
        a = read_f32_rows(args.compare, model.vocab)
        if a.shape[0] != len(ids):
            print(f"compare: {a.shape[0]} rows, expected {len(ids)}", file=sys.stderr)
            return 1
        e = nmse_rows(a, logits)
        same = a.argmax(axis=-1) == logits.argmax(axis=-1)
        print(f"NMSE max {e.max():.3e} mean {e.mean():.3e}; argmax equal at "
              f"{int(same.sum())}/{len(ids)} positions")
        status = 0 if same.all() else 1
        if args.nmse_max is not None and not e.max() <= args.nmse_max:
            print(f"compare: worst NMSE {e.max():.3e} above {args.nmse_max:g}", file=sys.stderr)
            status = 1
        if args.nmse_min is not None and not e.max() >= args.nmse_min:
            print(f"compare: worst NMSE {e.max():.3e} below {args.nmse_min:g}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
