#!/bin/sh
# bench/kernel_micro.c, the kernel microbenchmark: on every tier this
# processor runs (and the plain tables, avx512-plain and avx2i8-plain, of
# the tiers dispatch gives a second table), one quick pass of each mode
# (attention for one query row and for a prefill chunk) prints one
# well-formed JSON record whose result is finite and whose timing is
# positive (and of the sample mode, the library sampler over the
# vocabulary: its knobs and one token id), and bad arguments are refused
# with exit 2 and a usage line or the reason;
# the same with block scales spread over many codes.
BUILD=${BUILD:-build}
K=$BUILD/kernel_micro
if [ ! -x "$K" ]; then echo "FAIL: $K missing (make all builds it)"; exit 1; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tiers=generic
for t in avx2 avx512 avx512-plain avx2i8-plain avx512bf16; do
    if KERNEL_MICRO_QUICK=1 "$K" matvec $t bf16 8 >/dev/null 2>&1; then tiers="$tiers $t"; fi
done
# One quick run of kernel_micro ARGS...: exit 0 and one well-formed
# record -- a tier mode's names the tier, with a finite result and a
# positive time; sample's (no tier: one kipp_sampler_sample call over the
# vocabulary's logits) names its knobs, and its one pick is a token id.
check_record() {
    if ! KERNEL_MICRO_QUICK=1 "$K" "$@" >"$T/out" 2>"$T/err"; then
        bad "$*: exit $? ($(head -c 200 "$T/err"))"
        return
    fi
    /usr/bin/python3 - "$T/out" "$*" <<'PY' || fail=1
import json, math, sys
args = sys.argv[2].split()
rec = json.loads(open(sys.argv[1]).read())
if args[0] == "sample":
    ok = (rec.get("kernel") == "sample" and rec.get("logits") == args[1] and "family" in rec.get("cpu", "")
          and abs(rec.get("temperature", -1) - float(args[2])) < 1e-6
          and abs(rec.get("top_p", -1) - float(args[3])) < 1e-6
          and rec.get("top_k") == (int(args[4]) if len(args) > 4 else 0)
          and rec.get("ms_per_sample", 0) > 0 and 0 <= rec.get("pick_sum", -1) < 151936)
else:
    time = rec.get("us_per_kv_head", rec.get("ns_per_row_block"))
    out = rec.get("out0", rec.get("y0"))
    ok = (rec.get("tier") == args[1] and "family" in rec.get("cpu", "")
          and isinstance(time, (int, float)) and time > 0
          and isinstance(out, (int, float)) and math.isfinite(out))
if args[0] == "att":  # query rows: 1, or the prefill chunk's N_Q, with a positive rate
    want = int(args[5]) if len(args) > 5 else 1
    ok = ok and rec.get("query_rows") == want and rec.get("gflops", 0) > 0
if not ok:
    print("FAIL: %s: bad record %s" % (sys.argv[2], rec))
sys.exit(0 if ok else 1)
PY
}
for t in $tiers; do
    for args in "att $t bf16 100 2" "att $t q8_0 100 2" "att $t bf16 100 2 40" "att $t q8_0 70 1 70" \
                "matvec $t bf16 16" "matvec $t q8_0 16" \
                "matvec $t q4_0 16" "matvec $t q4_1 16" "matmul $t bf16 16 9" "matmul $t q8_0 16 5 64" \
                "matmul $t q4_0 16 12 96"; do
        # shellcheck disable=SC2086
        check_record $args
    done
done
for args in "sample peaked 0.7 0.95" "sample flat 1 1 40" "sample peaked 0.3 1 1"; do
    # shellcheck disable=SC2086
    check_record $args
done
for args in "att generic bf16 0 1" "matvec generic q5_0 16" "att generic bf16 100" "nosuch generic bf16 1" \
            "sample peaked 0 1" "sample lumpy 1 1" "sample peaked 1 1.5" "sample peaked 1 1 -3" \
            "sample peaked 1" "sample peaked 1 1 4x" \
            "att generic bf16 100 2 0" "att generic bf16 100 2 101" \
            "matvec no-such-tier bf16 16" "matmul generic bf16 16 9 100" "matmul generic bf16 16" \
            "matmul generic q4_0 16 0" "matvec generic bf16 16 9"; do
    # shellcheck disable=SC2086
    KERNEL_MICRO_QUICK=1 "$K" $args >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] || bad "'$args' exit $rc, want 2"
    grep -q -e "usage: kernel_micro" -e "unknown or not on this processor" -e "top_p must be" "$T/err" ||
        bad "'$args': no reason given"
    [ -s "$T/out" ] && bad "'$args' printed a record"
done
# KERNEL_MICRO_SCALE_CODES: blocks' scales spread over that many FP16
# codes; the record says so and the result stays finite; bad values are
# refused with exit 2 and the reason
for t in $tiers; do
    for args in "matvec $t q8_0 16" "att $t q8_0 70 1" "matmul $t q4_1 16 3"; do
        # shellcheck disable=SC2086
        if ! KERNEL_MICRO_QUICK=1 KERNEL_MICRO_SCALE_CODES=4096 "$K" $args >"$T/out" 2>"$T/err"; then
            bad "codes 4096 $args: exit $? ($(head -c 200 "$T/err"))"
            continue
        fi
        /usr/bin/python3 - "$T/out" <<'PY' || bad "codes 4096 $args: $(cat "$T/out")"
import json, math, sys
rec = json.loads(open(sys.argv[1]).read())
out = rec.get("out0", rec.get("y0"))
sys.exit(0 if rec.get("scale_codes") == 4096 and math.isfinite(out) else 1)
PY
    done
done
for codes in 0 16385 12x ""; do
    KERNEL_MICRO_QUICK=1 KERNEL_MICRO_SCALE_CODES="$codes" "$K" matvec generic q8_0 16 >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] || bad "KERNEL_MICRO_SCALE_CODES='$codes' exit $rc, want 2"
    grep -q "KERNEL_MICRO_SCALE_CODES=$codes: want 1 to 16384" "$T/err" || bad "KERNEL_MICRO_SCALE_CODES='$codes': no reason given"
    [ -s "$T/out" ] && bad "KERNEL_MICRO_SCALE_CODES='$codes' printed a record"
done
[ $fail -eq 0 ] && echo "PASS test_kernel_micro.sh (tiers: $tiers)"
exit $fail
