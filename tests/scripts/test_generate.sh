#!/bin/sh
# `kipp generate` end to end on the synthetic-tiny fixture: help, argument
# errors, --all-logits shape and cached-vs-recomputed equality (bytewise),
# capacity, stop tokens, logit bias, seeds, the random-weights notice;
# --threads (same output at 1 and 2 threads; the same flag and the same
# refusal on every subcommand that computes); KIPP_CPU_ISA reaches the cpu
# backend (an unknown tier is refused, never ignored).
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
M=$BUILD/models/synthetic-tiny.gguf
ROW=$((151936 * 4))
if [ ! -f "$M" ]; then echo "SKIP(missing): fixture $M missing (run make fixtures)"; exit 77; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$KIPP" generate --help >"$T/help" || bad "--help exit status"
grep -q "default: cpu" "$T/help" || bad "--help does not name the default backend"
"$KIPP" generate --tokens 1,2 2>"$T/e" && bad "missing -m accepted"
grep -q -- "-m FILE is required" "$T/e" || bad "missing -m message"
"$KIPP" generate -m "$M" 2>/dev/null && bad "missing prompt accepted"
"$KIPP" generate -m "$M" --tokens 1,x 2>/dev/null && bad "bad token list accepted"
"$KIPP" generate -m "$M" --tokens 1,151936 2>/dev/null && bad "out-of-range token accepted"
"$KIPP" generate -m "$M" --tokens 1 --top-p 0 2>/dev/null && bad "top-p 0 accepted"
"$KIPP" generate -m "$M" --tokens 1 --head q4_0 2>"$T/e" && bad "--head q4_0 accepted"
grep -q "unknown output head format 'q4_0' (bf16, q8_0)" "$T/e" || bad "--head q4_0 message: $(cat "$T/e")"
for cmd in chat bench; do
    "$KIPP" $cmd -m "$M" --head q4_0 </dev/null >/dev/null 2>"$T/e" && bad "$cmd --head q4_0 accepted"
    grep -q "kipp $cmd: --head: unknown output head format 'q4_0'" "$T/e" || bad "$cmd --head q4_0 message: $(cat "$T/e")"
done

P=9707,11,847,829,374,264,1273
NP=7
# Prompt only: one row per prompt position.
"$KIPP" generate -m "$M" --tokens $P -n 0 --all-logits "$T/p.f32" >/dev/null 2>"$T/e" || bad "-n 0 failed: $(cat "$T/e")"
[ "$(wc -c <"$T/p.f32")" -eq $((NP * ROW)) ] || bad "-n 0 wrote $(wc -c <"$T/p.f32") bytes, want $((NP * ROW))"
grep -q "weights are random" "$T/e" || bad "no random-weights notice"
grep -q "prompt 7 tokens in .* tok/s.*generation 0 tokens" "$T/e" || bad "timing line: $(cat "$T/e")"

# Greedy continuation with every row, then the same sequence recomputed as
# one prompt: the rows must be byte-identical (cached decode == no cache).
"$KIPP" generate -m "$M" --tokens $P -n 6 --temperature 0 --print-ids \
    --all-logits "$T/g.f32" >"$T/ids" 2>"$T/e" || bad "greedy run failed: $(cat "$T/e")"
G=$(tr -d '\n' <"$T/ids")
NG=$(echo "$G" | tr ',' '\n' | grep -c .)
echo "greedy ids: $G"
[ "$NG" -ge 1 ] || bad "no tokens generated"
[ "$(wc -c <"$T/g.f32")" -eq $(((NP + NG) * ROW)) ] || bad "all-logits size $(wc -c <"$T/g.f32") for $NP+$NG rows"
"$KIPP" generate -m "$M" --tokens "$P,$G" -n 0 --all-logits "$T/r.f32" >/dev/null 2>&1 || bad "recompute failed"
cmp -s "$T/g.f32" "$T/r.f32" || bad "cached decode rows differ from recomputation"
head -c $((NP * ROW)) "$T/g.f32" | cmp -s - "$T/p.f32" || bad "prompt rows differ between runs"
grep -q "generation $NG tokens" "$T/e" || bad "generation count: $(cat "$T/e")"

# Greedy via top-k 1 at temperature 1 gives the same ids.
K1=$("$KIPP" generate -m "$M" --tokens $P -n 6 --temperature 1 --top-k 1 --seed 9 --print-ids 2>/dev/null)
[ "$K1" = "$G" ] || bad "top-k 1 ($K1) differs from greedy ($G)"

# Banning the first greedy token changes the first token.
FIRST=${G%%,*}
B=$("$KIPP" generate -m "$M" --tokens $P -n 1 --logit-bias "$FIRST=-inf" --print-ids 2>/dev/null)
[ -n "$B" ] && [ "$B" != "$FIRST" ] || bad "banned token $FIRST still produced ($B)"

# A stop token forced by bias ends generation at once, without printing it.
"$KIPP" generate -m "$M" --tokens $P -n 5 --logit-bias 151643=100 >"$T/out" 2>"$T/e" || bad "stop run failed"
grep -q "stopped at a stop token" "$T/e" || bad "no stop report: $(cat "$T/e")"
[ "$(tr -d '\n' <"$T/out")" = "" ] || bad "stop token text was printed: $(cat "$T/out")"

# Same seed, same tokens (sampling at temperature 1.5).
S1=$("$KIPP" generate -m "$M" --tokens $P -n 8 --temperature 1.5 --seed 42 --print-ids 2>/dev/null)
S2=$("$KIPP" generate -m "$M" --tokens $P -n 8 --temperature 1.5 --seed 42 --print-ids 2>/dev/null)
[ -n "$S1" ] && [ "$S1" = "$S2" ] || bad "same seed gave $S1 and $S2"

# Capacity: exactly prompt + n works; smaller than the prompt is rejected.
"$KIPP" generate -m "$M" --tokens $P -n 3 --capacity $((NP + 3)) --print-ids >/dev/null 2>"$T/e" || bad "exact capacity failed: $(cat "$T/e")"
"$KIPP" generate -m "$M" --tokens $P -n 3 --capacity 5 >/dev/null 2>"$T/e" && bad "capacity 5 accepted a 7-token prompt"
grep -q "capacity" "$T/e" || bad "capacity error message: $(cat "$T/e")"
"$KIPP" generate -m "$M" --tokens $P -n 5 --capacity 9 --print-ids >"$T/ids" 2>"$T/e" || bad "capacity-limited run failed"
grep -q "capacity 9 reached" "$T/e" || bad "no capacity stop report: $(cat "$T/e")"

# --threads: 1 and 2 threads (and -t, and 0 = online cores) give the same
# bytes; prefill splits rows and columns between threads differently.
echo "cpu tier: KIPP_CPU_ISA=${KIPP_CPU_ISA:-unset (auto: the best exact tier)}"
"$KIPP" generate -m "$M" --tokens $P -n 6 --threads 1 --print-ids --all-logits "$T/t1.f32" >"$T/t1" 2>"$T/e" ||
    bad "--threads 1 failed: $(cat "$T/e")"
"$KIPP" generate -m "$M" --tokens $P -n 6 --threads 2 --print-ids --all-logits "$T/t2.f32" >"$T/t2" 2>"$T/e" ||
    bad "--threads 2 failed: $(cat "$T/e")"
"$KIPP" generate -m "$M" --tokens $P -n 6 -t 0 --print-ids >"$T/t0" 2>"$T/e" || bad "-t 0 failed: $(cat "$T/e")"
cmp -s "$T/t1.f32" "$T/t2.f32" || bad "--threads 1 and --threads 2 give different logits"
cmp -s "$T/t1.f32" "$T/g.f32" || bad "--threads 1 differs from the default thread count"
cmp -s "$T/t1" "$T/t2" && cmp -s "$T/t1" "$T/t0" || bad "thread counts give different ids: $(cat "$T/t1" "$T/t2" "$T/t0")"
for cmd in generate chat ppl serve bench; do
    for v in 0x -1 1025 "" 2x; do
        "$KIPP" $cmd -m "$M" --threads "$v" --tokens 1 >/dev/null 2>"$T/e" </dev/null &&
            bad "$cmd --threads '$v' accepted"
        grep -q "kipp $cmd: --threads wants a thread count 0..1024 (0 = one per online core), got '$v'" "$T/e" ||
            bad "$cmd --threads '$v' message: $(cat "$T/e")"
    done
    "$KIPP" $cmd --help 2>&1 | grep -q -- "--threads N" || bad "$cmd --help lacks --threads"
done

# kipp bench's counts: out of range or not a number is a usage error (exit
# 2) whose message names the option, its range and the value, before any
# model is loaded.
for spec in "--prompt-tokens 0 1..1048576" "--prompt-tokens 1048577 1..1048576" \
    "--prompt-tokens 12x 1..1048576" "--decode -1 0..1048576" "--decode 1048577 0..1048576" \
    "--reps 0 1..64" "--reps 65 1..64"; do
    set -- $spec
    "$KIPP" bench -m "$M" "$1" "$2" >/dev/null 2>"$T/e"
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "kipp bench: $1 wants .*$3, got '$2'" "$T/e" ||
        bad "kipp bench $1 $2: exit $rc, $(cat "$T/e")"
done

# kipp bench --json reports how the weights are mapped (a benchmark record
# must say it: 2 MiB pages move prefill by 10-25 %): the mapping's size is the
# file's, rounded up to 4 KiB pages, and the part on 2 MiB pages is within it.
"$KIPP" bench -m "$M" --prompt-tokens 4 --decode 1 --reps 1 --json >"$T/bench.json" 2>"$T/e" ||
    bad "kipp bench --json failed: $(cat "$T/e")"
map_kib=$(grep -o '"weights_map_kib":-\{0,1\}[0-9]*' "$T/bench.json" | cut -d: -f2)
pmd_kib=$(grep -o '"weights_pmd_mapped_kib":-\{0,1\}[0-9]*' "$T/bench.json" | cut -d: -f2)
file_kib=$((($(wc -c <"$M") + 4095) / 4096 * 4))
if [ -r /proc/self/smaps ]; then
    [ "$map_kib" = "$file_kib" ] || bad "bench weights_map_kib '$map_kib', the file maps $file_kib KiB"
    [ -n "$pmd_kib" ] && [ "$pmd_kib" -ge 0 ] && [ "$pmd_kib" -le "$file_kib" ] ||
        bad "bench weights_pmd_mapped_kib '$pmd_kib' outside 0..$file_kib"
else
    [ "$map_kib" = -1 ] && [ "$pmd_kib" = -1 ] || bad "no smaps, yet bench reports '$map_kib' '$pmd_kib'"
fi

# KIPP_CPU_ISA is the knob that forces a tier (make test-tiers): a name that
# is no tier must stop the cpu backend with a message naming the variable.
KIPP_CPU_ISA=avx513 "$KIPP" generate -m "$M" --tokens $P -n 1 >/dev/null 2>"$T/e" &&
    bad "KIPP_CPU_ISA=avx513 accepted"
{ grep -q "KIPP_CPU_ISA" "$T/e" && grep -q "avx513" "$T/e"; } || bad "KIPP_CPU_ISA=avx513 message: $(cat "$T/e")"

# Text prompt streams text (the tokenizer is built).
"$KIPP" generate -m "$M" -p "Hello, world" -n 4 >"$T/out" 2>"$T/e" || bad "text prompt failed: $(cat "$T/e")"
[ -s "$T/out" ] || bad "no text output"

# KIPP_CPU_ISA picks the cpu kernel tier (the CLI maps it onto
# kipp_model_options.cpu_isa; the library reads no environment). Tiers agree
# on greedy tokens; a name that is no tier is a usage error (exit 2) in every
# command that runs a model, before any work.
KIPP_CPU_ISA=generic "$KIPP" generate -m "$M" --tokens $P -n 3 --print-ids >"$T/isa" 2>"$T/e" ||
    bad "KIPP_CPU_ISA=generic failed: $(cat "$T/e")"
[ "$(cat "$T/isa")" = "$(env -u KIPP_CPU_ISA "$KIPP" generate -m "$M" --tokens $P -n 3 --print-ids 2>/dev/null)" ] ||
    bad "generic tier gave $(cat "$T/isa")"
# The opt-in tiers (auto never picks them): avx512bf16 runs where the
# processor has AVX-512 F/BW/VL/DQ + AVX512_BF16, amx where it also has
# AMX-TILE and AMX-BF16 (and the OS's tile state), avx2i8 wherever avx2
# does (AVX2, FMA, F16C), avx512i8 where avx512 does and AVX512_VNNI is
# present; elsewhere each is refused
# with a message naming the tier and what it needs (no silent fallback).
# Their greedy tokens may differ from the exact tiers' at a near-tie, so only
# the count is checked here (test_cpu_backend holds their logits to the
# oracle). opt_in_tier TIER "CPU FLAGS" "WORD IN THE REFUSAL".
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null) "
opt_in_tier() {
    has=yes
    for f in $2; do
        case "$flags" in *" $f "*) ;; *) has=no ;; esac
    done
    KIPP_CPU_ISA=$1 "$KIPP" generate -m "$M" --tokens $P -n 3 --print-ids >"$T/isa" 2>"$T/e"
    rc=$?
    if [ $has = yes ]; then
        [ $rc -eq 0 ] && [ "$(tr ',' '\n' <"$T/isa" | grep -c .)" = 3 ] ||
            bad "KIPP_CPU_ISA=$1 on a processor with it: exit $rc, '$(cat "$T/isa")', $(cat "$T/e")"
    else
        [ $rc -ne 0 ] && grep -q "cpu_isa $1" "$T/e" && grep -q "$3" "$T/e" ||
            bad "KIPP_CPU_ISA=$1 without $3: exit $rc, $(cat "$T/e")"
    fi
}
opt_in_tier avx512bf16 "avx512f avx512bw avx512vl avx512dq avx512_bf16" AVX512_BF16
opt_in_tier amx "avx512f avx512bw avx512vl avx512dq avx512_bf16 amx_tile amx_bf16" AMX-TILE
opt_in_tier avx2i8 "avx2 fma f16c" AVX2
opt_in_tier avx512i8 "avx512f avx512bw avx512vl avx512dq avx512_vnni" AVX512_VNNI
for cmd in "generate --tokens $P -n 1" bench serve chat; do
    # shellcheck disable=SC2086 # $cmd is the subcommand and its arguments
    KIPP_CPU_ISA=sse9 timeout 60 "$KIPP" $cmd -m "$M" >/dev/null 2>"$T/e" </dev/null
    rc=$?
    [ $rc -eq 2 ] && grep -q "KIPP_CPU_ISA: unknown cpu kernel tier 'sse9'" "$T/e" ||
        bad "kipp $cmd with KIPP_CPU_ISA=sse9: exit $rc, $(cat "$T/e")"
done

# A corrupt artifact (a NaN in the first layer's norm; every metadata check
# still passes) makes every logit NaN: the sampler has nothing to pick, and
# the message says the model is at fault, not bans (plain and speculative).
python3 tests/scripts/gguf_tool.py set-f32 "$M" "$T/nan.gguf" blk.0.attn_norm.weight 0 nan ||
    bad "cannot write the NaN artifact"
for spec in "" "--spec lookup"; do
    # shellcheck disable=SC2086 # $spec is empty or a flag and its value
    "$KIPP" generate -m "$T/nan.gguf" --tokens $P -n 2 $spec >/dev/null 2>"$T/e" &&
        bad "NaN logits ${spec:-plain}: exit 0"
    grep -q "the model's logits are NaN" "$T/e" ||
        bad "NaN logits ${spec:-plain}: message was $(cat "$T/e")"
done
[ $fail -eq 0 ] && echo "test_generate: all checks passed"
exit $fail
