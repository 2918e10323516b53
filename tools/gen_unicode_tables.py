#!/usr/bin/env python3
"""Generates src/core/unicode_tables.c from the Unicode Character Database.

    python3 tools/gen_unicode_tables.py [UCD_DIR] > src/core/unicode_tables.c

UCD_DIR defaults to /usr/share/unicode (Debian package `unicode-data`). Reads
UnicodeData.txt (general category, canonical combining class, canonical
decompositions) and DerivedNormalizationProps.txt (NFC_QC,
Full_Composition_Exclusion); the Unicode version is taken from the latter's
header and compiled in as KIPP_UNICODE_VERSION.

What the tokenizer needs (see src/core/unicode.h):
  * a per-code-point property byte, as a two-stage table
    (stage1[cp >> 7] -> block, stage2[block * 128 + (cp & 127)]):
      bits 0-1  class: 0 other, 1 letter (\\p{L}), 2 number (\\p{N}),
                3 whitespace (ECMAScript \\s: the regex engine of the golden
                reference, transformers.js, runs the split pattern as a JS
                RegExp with the u flag)
      bit 2     canonical combining class != 0
      bits 3-4  NFC_QC: 0 yes, 1 no, 2 maybe
  * canonical combining classes (ranges),
  * full canonical decompositions (recursively expanded, Hangul excluded:
    it is algorithmic),
  * primary composites (pairs -> composite) minus full composition
    exclusions.
"""
import re
import sys

UCD = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
MAXCP = 0x110000
BLOCK = 128

# ECMAScript WhiteSpace + LineTerminator (ECMA-262 \s): TAB VT FF SP NBSP
# ZWNBSP, every Zs, LF CR LS PS. Zs is added from the data below.
JS_SPACE_EXTRA = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0xFEFF, 0x2028, 0x2029]


def read_unicode_data():
    cat = {}
    ccc = {}
    decomp = {}
    first = None
    with open(f"{UCD}/UnicodeData.txt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            cp = int(fields[0], 16)
            name, gc, cc, dm = fields[1], fields[2], int(fields[3]), fields[5]
            if name.endswith(", First>"):
                first = cp
                continue
            if name.endswith(", Last>"):
                for c in range(first, cp + 1):
                    cat[c] = gc
                    if cc:
                        ccc[c] = cc
                first = None
                continue
            cat[cp] = gc
            if cc:
                ccc[cp] = cc
            if dm and not dm.startswith("<"):
                decomp[cp] = [int(x, 16) for x in dm.split()]
    return cat, ccc, decomp


def read_derived_norm():
    qc = {}
    excl = set()
    version = None
    with open(f"{UCD}/DerivedNormalizationProps.txt", encoding="utf-8") as f:
        for line in f:
            if version is None:
                m = re.match(r"# DerivedNormalizationProps-(\d+\.\d+\.\d+)\.txt", line)
                if m:
                    version = m.group(1)
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = [p.strip() for p in line.split(";")]
            rng = parts[0].split("..")
            lo = int(rng[0], 16)
            hi = int(rng[-1], 16)
            if parts[1] == "NFC_QC":
                val = {"N": 1, "M": 2}[parts[2]]
                for c in range(lo, hi + 1):
                    qc[c] = val
            elif parts[1] == "Full_Composition_Exclusion":
                for c in range(lo, hi + 1):
                    excl.add(c)
    if version is None:
        sys.exit("cannot find the Unicode version in DerivedNormalizationProps.txt")
    return qc, excl, version


def full_decomp(cp, decomp):
    if cp not in decomp:
        return [cp]
    out = []
    for c in decomp[cp]:
        out.extend(full_decomp(c, decomp))
    return out


def emit_array(name, ctype, values, per_line=16, fmt="%d"):
    out = [f"const {ctype} {name}[{len(values)}] = {{"]
    for i in range(0, len(values), per_line):
        out.append("    " + ",".join(fmt % v for v in values[i:i + per_line]) + ",")
    out.append("};")
    return "\n".join(out)


def main():
    cat, ccc, decomp = read_unicode_data()
    qc, excl, version = read_derived_norm()

    props = bytearray(MAXCP)
    for cp, gc in cat.items():
        cls = 0
        if gc[0] == "L":
            cls = 1
        elif gc[0] == "N":
            cls = 2
        elif gc == "Zs":
            cls = 3
        props[cp] = cls
    for cp in JS_SPACE_EXTRA:
        props[cp] = (props[cp] & ~3) | 3
    for cp in ccc:
        props[cp] |= 4
    for cp, v in qc.items():
        props[cp] |= v << 3

    blocks = {}
    stage1 = []
    stage2 = []
    for b in range(MAXCP // BLOCK):
        chunk = bytes(props[b * BLOCK:(b + 1) * BLOCK])
        if chunk not in blocks:
            blocks[chunk] = len(blocks)
            stage2.extend(chunk)
        stage1.append(blocks[chunk])

    # combining classes as ranges of equal value
    ccc_ranges = []
    for cp in sorted(ccc):
        if ccc_ranges and ccc_ranges[-1][1] == cp - 1 and ccc_ranges[-1][2] == ccc[cp]:
            ccc_ranges[-1][1] = cp
        else:
            ccc_ranges.append([cp, cp, ccc[cp]])

    # full canonical decompositions
    dec_keys = sorted(decomp)
    dec_pool = []
    dec_index = []
    max_dec = 0
    for cp in dec_keys:
        d = full_decomp(cp, decomp)
        max_dec = max(max_dec, len(d))
        assert len(d) < 256 and len(dec_pool) < (1 << 24)
        dec_index.append((cp, len(dec_pool) << 8 | len(d)))
        dec_pool.extend(d)

    # primary composites: two-code-point canonical decompositions not excluded
    comp = []
    for cp, d in decomp.items():
        if len(d) == 2 and cp not in excl:
            comp.append((d[0], d[1], cp))
    comp.sort()

    major, minor, patch = (int(x) for x in version.split("."))
    print("/* GENERATED by tools/gen_unicode_tables.py from the Unicode Character")
    print(f" * Database {version} (Debian unicode-data: UnicodeData.txt,")
    print(" * DerivedNormalizationProps.txt). Do not edit; regenerate with")
    print(" *   python3 tools/gen_unicode_tables.py > src/core/unicode_tables.c")
    print(" * Layouts are described in src/core/unicode.h. */")
    print('#include "core/unicode.h"')
    print()
    print(f'const char kipp_unicode_version[] = "{version}";')
    print(f"const unsigned kipp_unicode_max_decomposition = {max_dec};")
    print()
    print(f"/* stage1[cp >> 7]: block number; {len(blocks)} distinct blocks of {BLOCK} */")
    print(emit_array("kipp_uprops_stage1", "uint16_t", stage1, 24))
    print()
    print(emit_array("kipp_uprops_stage2", "uint8_t", stage2, 32))
    print()
    print("/* canonical combining class ranges {first, last, class}, sorted */")
    print(f"const uint32_t kipp_ccc_count = {len(ccc_ranges)};")
    print(emit_array("kipp_ccc_ranges", "uint32_t",
                     [v for r in ccc_ranges for v in r], 12, "0x%X"))
    print()
    print("/* full canonical decompositions: {cp, pool_offset << 8 | length}, sorted */")
    print(f"const uint32_t kipp_decomp_count = {len(dec_index)};")
    print(emit_array("kipp_decomp_index", "uint32_t",
                     [v for e in dec_index for v in e], 12, "0x%X"))
    print(emit_array("kipp_decomp_pool", "uint32_t", dec_pool, 12, "0x%X"))
    print()
    print("/* primary composites {first, second, composite}, sorted by (first, second) */")
    print(f"const uint32_t kipp_comp_count = {len(comp)};")
    print(emit_array("kipp_comp_triples", "uint32_t",
                     [v for e in comp for v in e], 12, "0x%X"))


if __name__ == "__main__":
    main()
