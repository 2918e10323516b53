#!/bin/sh
# Quantized artifacts against llama.cpp and against the bf16 artifact.
#
# synthetic-tiny converted with every weight scheme (bf16, q8_0 = Q8_0,
# affine4_gs32 = Q4_1, scale4_gs32 = Q4_0; fixtures made by `make fixtures`).
# For each file:
#  - llama.cpp (node-llama-cpp via tools/llama_peer.mjs evalmany) loads and
#    runs it, and its next-token distribution after each prompt agrees with
#    Kipp's oracle on the same file: same top-1 (at >= 4 of 5 prompts: near
#    ties may flip), bounded |dp| and |d log p| over llama.cpp's top tokens
#    with p >= 1e-4, and llama.cpp sits clearly closer to Kipp on the same
#    file than to Kipp on the bf16 file (closer_ratio; a block decoded
#    differently from ggml's would fail this). llama.cpp's CPU
#    path quantizes activations to 8 bits for Q4/Q8 matmuls and rounds them
#    to BF16 for BF16 matmuls (Kipp's oracle keeps them FP32), so the two
#    agree closely, never bitwise.
#  - Kipp's oracle on the quantized file vs on the bf16 file (quality):
#    logits NMSE and top-1 agreement at every prompt position.
#  - Kipp's opt-in avx2i8 cpu tier (8-bit activations in the quantized
#    matmuls, as llama.cpp's CPU path; where the processor has AVX2): it
#    must sit closer to llama.cpp than the exact oracle does (i8_ratio < 1
#    of mean |d log p|), an independent check that it quantizes activations
#    as ggml does. Without AVX2 that part is a named machine skip.
# Bounds (BOUNDS below) hold a margin over the values measured on
# 2026-11-30, which the log prints (see tests/scripts/quant_compare.py).
# i8_ratio (2026-12-03, AMD Zen 4): q8_0 0.74, affine4_gs32 0.74,
# scale4_gs32 0.87 (bound 0.95; the rest of the gap is llama.cpp's BF16
# rounding in the BF16 head and its F16 KV cache, which kipp does not share).
# 2026-12-07, Intel Xeon family 6 model 207 with AVX512_BF16: q8_0 0.90,
# affine4_gs32 0.77, scale4_gs32 0.77 (the same before and after the
# oracle runs moved to --backend ref): q8_0's margin is thinnest there.
set -u
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
if ! command -v node >/dev/null || [ ! -d node_modules/node-llama-cpp ]; then
    echo "SKIP(missing): node or node_modules/node-llama-cpp missing (npm ci)"; exit 77
fi
if ! $PY -c 'import numpy' 2>/dev/null; then echo "SKIP(missing): numpy for /usr/bin/python3 is missing"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0

MID=$(seq 1 12 | awk '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * 104729 + 17) % 151000 }')
MID2=$(seq 1 10 | awk '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * 7919 + 1000) % 150000 }')
PROMPTS="9707,11,847,829,374;151644,872,198,9707,151645,198,151644,77091,198;$MID2;$MID;3838,374,279,6722,315,9625,30"
NP=5
SCHEMES="bf16 q8_0 affine4_gs32 scale4_gs32"
BOUNDS='{
 "bf16":         {"llama_top1": 0.8, "llama_max_dp": 0.06, "llama_max_dlogp": 0.8, "llama_mean_dlogp": 0.15},
 "q8_0":         {"llama_top1": 0.8, "llama_max_dp": 0.12, "llama_max_dlogp": 1.2, "llama_mean_dlogp": 0.3,
                  "closer_ratio": 0.85, "bf16_nmse_max": 1e-3, "bf16_top1": 0.9, "i8_ratio": 0.95},
 "affine4_gs32": {"llama_top1": 0.8, "llama_max_dp": 0.15, "llama_max_dlogp": 1.5, "llama_mean_dlogp": 0.4,
                  "closer_ratio": 0.25, "bf16_nmse_max": 0.15, "bf16_top1": 0.4, "i8_ratio": 0.95},
 "scale4_gs32":  {"llama_top1": 0.8, "llama_max_dp": 0.15, "llama_max_dlogp": 1.5, "llama_mean_dlogp": 0.4,
                  "closer_ratio": 0.25, "bf16_nmse_max": 0.15, "bf16_top1": 0.4, "i8_ratio": 0.95}
}'

has_avx2=yes why="cpu lacks avx2, fma or f16c"
for f in avx2 fma f16c; do
    grep -m1 '^flags' /proc/cpuinfo | grep -qw $f || has_avx2=no
done
[ "${KIPP_CPU_ISA:-}" = generic ] && has_avx2=no why="KIPP_CPU_ISA=generic runs as a machine without it"
[ $has_avx2 = yes ] || echo "SKIP-PART(machine): avx2i8 against llama.cpp: $why"

for s in $SCHEMES; do
    # Fixtures (make fixtures): synthetic-tiny.gguf and synthetic-tiny.SCHEME.gguf.
    f=$BUILD/models/synthetic-tiny.$s.gguf
    [ $s = bf16 ] && f=$BUILD/models/synthetic-tiny.gguf
    if [ ! -f "$f" ]; then echo "SKIP(missing): fixture $f missing (run make fixtures)"; exit 77; fi
    got=$("$KIPP" info "$f" 2>/dev/null | grep -c "kipp.quant.scheme.*$s")
    [ "$got" -ge 1 ] || { echo "FAIL: $f does not record kipp.quant.scheme $s"; fail=1; }
    # llama.cpp runs in the background while Kipp's oracle runs (2 cores).
    node tools/llama_peer.mjs evalmany "$f" --prompts "$PROMPTS" --top 10 > "$tmp/$s.llama.json" 2>"$tmp/llama.err" &
    peer=$!
    i=0
    echo "$PROMPTS" | tr ';' '\n' > "$tmp/prompts.txt"
    while read -r p; do
        # --backend ref: the oracle itself, whatever tier KIPP_CPU_ISA forces
        # on the cpu backend (make test-tiers' avx512bf16 pass rounds
        # activations as llama.cpp does, which made i8_ratio ~1.0).
        "$KIPP" generate --backend ref -m "$f" --tokens "$p" -n 0 --all-logits "$tmp/$s.p$i.f32" \
            >/dev/null 2>"$tmp/gen.err" ||
            { echo "FAIL: kipp generate on $s: $(tail -n 1 "$tmp/gen.err")"; fail=1; }
        if [ $s != bf16 ] && [ $has_avx2 = yes ]; then
            KIPP_CPU_ISA=avx2i8 "$KIPP" generate -m "$f" --backend cpu --tokens "$p" -n 0 \
                --all-logits "$tmp/$s.i8.p$i.f32" >/dev/null 2>"$tmp/gen.err" ||
                { echo "FAIL: kipp avx2i8 on $s: $(tail -n 1 "$tmp/gen.err")"; fail=1; }
        fi
        i=$((i + 1))
    done < "$tmp/prompts.txt"
    wait $peer ||
        { echo "FAIL: llama.cpp cannot run the $s file: $(tail -n 3 "$tmp/llama.err")"; fail=1; }
    echo "$s: $(stat -c %s "$f") bytes; llama.cpp ran it"
done
[ $fail -eq 0 ] || exit 1
# shellcheck disable=SC2086
$PY tests/scripts/quant_compare.py "$tmp" $SCHEMES --prompts $NP --bounds "$BOUNDS" || fail=1
exit $fail
