#!/bin/sh
# Do two builds of kipp (gcc and clang: `make test-compilers`) compute the
# same logits, bit for bit? For every cpu tier this processor runs and
# every weight scheme of synthetic-tiny, both builds greedy-decode the same
# prompt and write every position's logits (--all-logits: the prefill rows
# and each decode step's), and the two files must be byte-identical.
#
# Why it can fail: a lane sum left to an intrinsic whose order is the
# compiler's (_mm512_reduce_add_ps), or a*b+c contracted into an FMA by one
# compiler and not the other (the Makefile passes -ffp-contract=off).
#
#   sh tests/scripts/compare_compilers.sh BUILD_A/kipp BUILD_B/kipp [MODELS_DIR]
set -eu
A=${1:?first kipp binary}
B=${2:?second kipp binary}
MODELS=${3:-build/models}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# ~70 tokens: past the first 32-position KV block, so the attention's
# running-softmax update across blocks runs in prefill and decode.
fox='The quick brown fox jumps over the lazy dog, and then it rests. '
prompt="$fox$fox$fox$fox$fox"'And after that'
compared=0
differ=0
skipped=""
for tier in generic avx2 avx512 avx512bf16 amx avx2i8 avx512i8; do
    # A tier the processor cannot run is refused with a reason: name it.
    if ! KIPP_CPU_ISA=$tier "$A" generate -m "$MODELS/synthetic-tiny.gguf" -p x -n 0 \
        --backend cpu -t 1 >/dev/null 2>"$tmp/why"; then
        skipped="$skipped $tier ($(head -n 1 "$tmp/why"))"
        continue
    fi
    for scheme in "" .q8_0 .affine4_gs32 .scale4_gs32; do
        for kv in bf16 q8_0; do
            m="$MODELS/synthetic-tiny$scheme.gguf"
            for bin in A B; do
                eval "exe=\$$bin"
                KIPP_CPU_ISA=$tier "$exe" generate -m "$m" -p "$prompt" -n 12 --backend cpu \
                    -t 2 --kv-quant "$kv" --all-logits "$tmp/$bin.f32" >/dev/null 2>"$tmp/err" ||
                    { cat "$tmp/err" >&2; exit 1; }
            done
            compared=$((compared + 1))
            if ! cmp -s "$tmp/A.f32" "$tmp/B.f32"; then
                differ=$((differ + 1))
                echo "DIFFER: tier $tier, synthetic-tiny${scheme:-.bf16}, kv $kv" \
                     "($(cmp "$tmp/A.f32" "$tmp/B.f32" 2>&1 | head -n 1))"
            fi
        done
    done
done
echo "compare_compilers: $compared runs compared ($A vs $B), $differ differ"
[ -z "$skipped" ] || echo "compare_compilers: tiers skipped on this processor:$skipped"
[ "$compared" -gt 0 ] || { echo "compare_compilers: nothing compared" >&2; exit 1; }
[ "$differ" -eq 0 ]
