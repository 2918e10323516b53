#!/usr/bin/env python3
"""Independent GGUF v3 reader for tests (written from the published GGUF
spec; shares no code with src/core/gguf.c).

  gguf_tool.py compare A B [--ignore KEY,KEY]   exit 0 iff metadata (except
      ignored keys, which may be absent from either), tensor directory and
      tensor data are identical
  gguf_tool.py get FILE KEY                     value as JSON (arrays whole)
  gguf_tool.py summary FILE                     keys, array lengths, tensors
  gguf_tool.py set-f32 IN OUT TENSOR INDEX VALUE
      OUT = IN with element INDEX of F32 tensor TENSOR set to VALUE (e.g. nan):
      a corrupt artifact that still passes every metadata check
"""
import json
import struct
import sys

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}
TYPE_SIZE = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18), 3: (32, 20)}


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n]
        if len(s) != n:
            raise ValueError("truncated string")
        self.p += n
        return s.decode("utf-8", "surrogateescape")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        return self.take(SCALARS[t])


def parse(path):
    data = open(path, "rb").read()
    r = Reader(data)
    if r.take("<I") != 0x46554747 or r.take("<I") != 3:
        raise ValueError(f"{path}: not GGUF v3")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    kv = {}
    order = []
    for _ in range(n_kv):
        k = r.string()
        t = r.take("<I")
        kv[k] = (t, r.value(t))
        order.append(k)
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        ne = [r.take("<Q") for _ in range(nd)]
        typ = r.take("<I")
        off = r.take("<Q")
        tensors.append((name, ne, typ, off))
    align = kv.get("general.alignment", (4, 32))[1]
    data_off = (r.p + align - 1) // align * align
    out = []
    for name, ne, typ, off in tensors:
        n = 1
        for x in ne:
            n *= x
        be, bb = TYPE_SIZE[typ]
        nbytes = n // be * bb
        blob = data[data_off + off:data_off + off + nbytes]
        if len(blob) != nbytes:
            raise ValueError(f"{path}: tensor {name} truncated")
        out.append({"name": name, "ne": ne, "type": typ, "offset": off, "data": blob})
    return {"kv": kv, "order": order, "tensors": out, "size": len(data), "data_offset": data_off,
            "bytes": data}


def main(argv):
    if len(argv) >= 3 and argv[0] == "compare":
        ignore = set()
        if len(argv) == 5 and argv[3] == "--ignore":
            ignore = set(argv[4].split(","))
        a, b = parse(argv[1]), parse(argv[2])
        bad = []
        # an ignored key may be present in one file only
        oa = [k for k in a["order"] if k not in ignore]
        ob = [k for k in b["order"] if k not in ignore]
        if oa != ob:
            bad.append(f"metadata key order differs: {oa} vs {ob}")
        for k in oa:
            if k not in b["kv"]:
                continue
            if a["kv"][k] != b["kv"][k]:
                bad.append(f"metadata {k} differs")
        if len(a["tensors"]) != len(b["tensors"]):
            bad.append("tensor count differs")
        for ta, tb in zip(a["tensors"], b["tensors"]):
            for f in ("name", "ne", "type", "offset"):
                if ta[f] != tb[f]:
                    bad.append(f"tensor {ta['name']}: {f} differs ({ta[f]} vs {tb[f]})")
            if ta["data"] != tb["data"]:
                bad.append(f"tensor {ta['name']}: data differs")
        for line in bad:
            print(line)
        print(f"compared {len(oa)} keys ({len(ignore & (set(a['order']) | set(b['order'])))} ignored), "
              f"{len(a['tensors'])} tensors: {'DIFFERENT' if bad else 'identical'}")
        return 1 if bad else 0
    if len(argv) == 3 and argv[0] == "get":
        f = parse(argv[1])
        if argv[2] not in f["kv"]:
            print(f"no key {argv[2]}", file=sys.stderr)
            return 1
        print(json.dumps(f["kv"][argv[2]][1]))
        return 0
    if len(argv) == 2 and argv[0] == "summary":
        f = parse(argv[1])
        for k in f["order"]:
            t, v = f["kv"][k]
            print(k, f"[{len(v)}]" if isinstance(v, list) else json.dumps(v)[:80])
        for t in f["tensors"]:
            print(t["name"], t["ne"], t["type"], t["offset"])
        return 0
    if len(argv) == 6 and argv[0] == "set-f32":
        f = parse(argv[1])
        t = next((t for t in f["tensors"] if t["name"] == argv[3]), None)
        i = int(argv[4])
        if t is None or t["type"] != 0 or not 0 <= i < len(t["data"]) // 4:
            print(f"no F32 tensor {argv[3]} with element {i}", file=sys.stderr)
            return 1
        raw = bytearray(f["bytes"])  # the file parse() read, not read again
        at = f["data_offset"] + t["offset"] + 4 * i
        raw[at:at + 4] = struct.pack("<f", float(argv[5]))
        open(argv[2], "wb").write(raw)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
