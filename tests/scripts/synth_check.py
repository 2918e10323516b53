#!/usr/bin/env python3
"""Re-derives elements of a `kipp synth` safetensors file from the
generator's written specification (src/convert/synth.c header comment), in
Python with explicit float32 rounding, and compares them with the bytes the
C generator wrote. Checks that the generator is the documented integer
recipe (and so machine-independent), not merely self-consistent.

usage: synth_check.py MODEL.safetensors REVISION HIDDEN
"""
import json
import struct
import sys

M64 = (1 << 64) - 1


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def final_gain(hidden):
    lo, hi = 1.0, 1024.0
    for _ in range(40):
        mid = f32(f32(lo + hi) * 0.5)
        if f32(mid * mid) > float(hidden):
            hi = mid
        else:
            lo = mid
    return f32(16.0 / f32(f32(0.02) * lo))


def value(revision, name, index, role, hidden):
    key = mix64(fnv1a64(revision) ^ mix64(fnv1a64(name)))
    h = mix64((key + index * 0x9E3779B97F4A7C15) & M64)
    u = [(h >> s) & 0xFFFF for s in (0, 16, 32, 48)]
    if role == "norm":
        v = f32((u[0] - 32768 + 327680) / 327680.0)
        gain = final_gain(hidden) if name == "model.norm.weight" else 1.0
        v = f32(v * gain)
    else:
        s = sum(u) - 131070
        scale = f32(f32(0.02) / f32(37837.2265))
        v = f32(float(s) * scale)
    return bf16_bits(v)


def main():
    path, revision, hidden = sys.argv[1], sys.argv[2], int(sys.argv[3])
    data = open(path, "rb").read()
    hlen = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + hlen])
    base = 8 + hlen
    checked = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "BF16":
            print(f"{name}: dtype {info['dtype']}")
            return 1
        begin, end = info["data_offsets"]
        n = (end - begin) // 2
        role = "norm" if len(info["shape"]) == 1 else "matrix"
        for index in sorted({0, 1, 2, n // 3, n // 2, n - 1}):
            got = struct.unpack_from("<H", data, base + begin + 2 * index)[0]
            want = value(revision, name, index, role, hidden)
            if got != want:
                print(f"{name}[{index}]: file has {got:#06x}, the specification gives {want:#06x}")
                return 1
            checked += 1
    print(f"{checked} elements match the generator specification")
    return 0


if __name__ == "__main__":
    sys.exit(main())
