"""A second, deliberately plain Qwen3 forward pass: one token at a time with
an explicit K/V cache, per-head loops, RoPE angles computed element by
element. It shares only the weight loading with qwen3_reference.py and exists
to catch a vectorisation slip there (mask direction, einsum axes, GQA head
order, rotate-half halves). Slow: use it on a dozen tokens.
"""

import math

import numpy as np


def _rms(v, w, eps):
    return v / math.sqrt(float(np.dot(v, v)) / v.size + eps) * w


def _rope(v, pos, theta):
    """Rotate-half on one 128-wide head at position pos."""
    out = np.empty_like(v)
    for i in range(64):
        a = pos * theta ** (-2.0 * i / 128)
        c, s = math.cos(a), math.sin(a)
        out[i] = v[i] * c - v[i + 64] * s
        out[i + 64] = v[i + 64] * c + v[i] * s
    return out


def naive_hidden(model, ids, round_kv=None):
    """Final-normed hidden state per position, (n, hidden). round_kv, if
    given, is applied to each cached K and V head vector."""
    keep = round_kv or (lambda a: a)
    group = model.heads // model.kv_heads
    cache_k = [[] for _ in model.layer]   # [layer][position][kv_head] -> (128,)
    cache_v = [[] for _ in model.layer]
    rows = []
    for pos, tok in enumerate(ids):
        x = model.embed[tok].copy()
        for li, L in enumerate(model.layer):
            h = _rms(x, L["attn_norm"], model.eps)
            q, k, v = L["wq"] @ h, L["wk"] @ h, L["wv"] @ h
            cache_k[li].append([keep(_rope(_rms(k[j * 128:(j + 1) * 128], L["k_norm"], model.eps), pos, model.theta))
                                for j in range(model.kv_heads)])
            cache_v[li].append([keep(v[j * 128:(j + 1) * 128]) for j in range(model.kv_heads)])
            attn = np.empty(model.heads * 128)
            for hd in range(model.heads):
                qh = _rope(_rms(q[hd * 128:(hd + 1) * 128], L["q_norm"], model.eps), pos, model.theta)
                kv = hd // group
                s = np.array([np.dot(qh, cache_k[li][t][kv]) / math.sqrt(128) for t in range(pos + 1)])
                p = np.exp(s - s.max())
                p /= p.sum()
                attn[hd * 128:(hd + 1) * 128] = sum(p[t] * cache_v[li][t][kv] for t in range(pos + 1))
            x = x + L["wo"] @ attn
            h = _rms(x, L["ffn_norm"], model.eps)
            g, u = L["w_gate"] @ h, L["w_up"] @ h
            x = x + L["w_down"] @ (g / (1.0 + np.exp(-g)) * u)
        rows.append(_rms(x, model.final_norm, model.eps))
    return np.array(rows)
