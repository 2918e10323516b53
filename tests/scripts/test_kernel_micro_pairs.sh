#!/bin/sh
# bench/kernel_micro_pairs.mjs, two kernel_micro binaries alternated: with
# two stand-in binaries that log each call and print a known record, the
# record holds every round of every case for both sides, the order swaps
# each round (a b, b a, a b), a case's NAME=VALUE words reach the
# binary's environment and not its arguments, and a missing binary
# argument, a bad --rounds, an unknown option, a failing binary and one
# whose last line is JSON but not a record are refused with the reason; and the same for two kipp binaries' bench
# records (below).
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
for side in a b; do
    cat >"$T/km_$side" <<SH
#!/bin/sh
echo "$side \$* codes=\${KERNEL_MICRO_SCALE_CODES:-none}" >>"$T/log"
[ "\$1" = boom ] && { echo "kernel_micro: boom" >&2; exit 2; }
echo '{"cpu":"test cpu (family 1 model 2)","gb_per_s":$( [ $side = a ] && echo 2 || echo 1 ),"args":"'"\$*"'"}'
SH
    chmod +x "$T/km_$side"
done
if ! node bench/kernel_micro_pairs.mjs --a "$T/km_a" --a-label new --b "$T/km_b" --b-label old \
        --rounds 3 --tag t --out "$T/out" "att x q8_0 8 1" "KERNEL_MICRO_SCALE_CODES=77 matvec x q8_0 16" \
        >"$T/stdout" 2>"$T/stderr"; then
    bad "a good run failed: $(cat "$T/stderr")"
fi
/usr/bin/python3 - "$T" <<'PY' || fail=1
import glob, json, sys
d = sys.argv[1]
files = glob.glob(d + "/out/kernel-micro-t-*.json")
assert len(files) == 1, files
r = json.load(open(files[0]))
ok = (r["cpu"] == "test cpu (family 1 model 2)" and r["rounds"] == 3 and r["a"]["label"] == "new"
      and r["b"]["label"] == "old" and [c["case"] for c in r["results"]] ==
      ["att x q8_0 8 1", "KERNEL_MICRO_SCALE_CODES=77 matvec x q8_0 16"]
      and all(len(c["a"]) == 3 and len(c["b"]) == 3 for c in r["results"])
      and all(x["gb_per_s"] == 2 for c in r["results"] for x in c["a"])
      and all(x["gb_per_s"] == 1 for c in r["results"] for x in c["b"])
      and r["results"][1]["a"][0]["args"] == "matvec x q8_0 16")
log = open(d + "/log").read().split("\n")[:-1]
want = []
for rnd in range(3):
    for case, codes in (("att x q8_0 8 1", "none"), ("matvec x q8_0 16", "77")):
        for side in (("a", "b") if rnd % 2 == 0 else ("b", "a")):
            want.append("%s %s codes=%s" % (side, case, codes))
ok = ok and log == want
if not ok:
    print("FAIL: record or call order wrong:", json.dumps(r)[:400], log)
sys.exit(0 if ok else 1)
PY
for args in "--b $T/km_b att" "--a $T/km_a --b $T/km_b --rounds 0 att" "--a $T/km_a --b $T/km_b --frob 1 att" \
            "--a $T/km_a --b $T/km_b"; do
    # shellcheck disable=SC2086
    node bench/kernel_micro_pairs.mjs $args --out "$T/bad" >/dev/null 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] || bad "'$args' exit $rc, want 2"
    grep -q "usage: node bench/kernel_micro_pairs.mjs" "$T/err" || bad "'$args': no usage line"
done
node bench/kernel_micro_pairs.mjs --a "$T/km_a" --b "$T/km_b" --out "$T/bad" boom >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] || bad "a failing binary: exit $rc, want 1"
grep -q "km_a boom: kernel_micro: boom" "$T/err" || bad "a failing binary: reason not given: $(cat "$T/err")"
printf '#!/bin/sh\necho 42\n' >"$T/km_num"; chmod +x "$T/km_num"
node bench/kernel_micro_pairs.mjs --a "$T/km_num" --b "$T/km_b" --out "$T/bad" x >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "km_num x: no JSON record: 42" "$T/err" ||
    bad "a bare number for a record: exit $rc, $(cat "$T/err")"
[ -e "$T/bad" ] && bad "a refused run wrote a record"
# Two kipp binaries on `bench --json` cases: the record is named
# kipp-bench-TAG-*, names this machine's processor (kipp bench's record
# does not), and the printed line gives tok/s and the --steps' GFLOPS.
for side in a b; do
    cat >"$T/kipp_$side" <<SH
#!/bin/sh
echo '{"prefill_tps":$( [ $side = a ] && echo 200 || echo 100 ),"decode_tps":0,"decode_tokens":0,"profile":[{"step":"qkv","gflops":$( [ $side = a ] && echo 30 || echo 10 )},{"step":"down","gflops":7}]}'
SH
    chmod +x "$T/kipp_$side"
done
node bench/kernel_micro_pairs.mjs --a "$T/kipp_a" --b "$T/kipp_b" --rounds 2 --tag k --out "$T/kout" \
    --steps qkv,down,head "bench -m x.gguf --json" >"$T/kstdout" 2>"$T/kstderr" ||
    bad "a kipp bench run failed: $(cat "$T/kstderr")"
grep -q ": $T/kipp_a 200/30/7/- 200/30/7/- | $T/kipp_b 100/10/7/- 100/10/7/-\$" "$T/kstdout" ||
    bad "kipp bench line: $(cat "$T/kstdout")"
/usr/bin/python3 - "$T" <<'PY' || fail=1
import glob, json, sys
files = glob.glob(sys.argv[1] + "/kout/kipp-bench-k-*.json")
r = json.load(open(files[0])) if len(files) == 1 else {}
want = open("/proc/cpuinfo").read().split("model name")[1].split(":", 1)[1].split("\n")[0].strip()
ok = len(files) == 1 and (r.get("cpu") or "").startswith(want) and "family" in r["cpu"]
ok = ok and all(len(c["a"]) == 2 and c["a"][0]["prefill_tps"] == 200 for c in r["results"])
if not ok:
    print("FAIL: kipp bench record:", files, json.dumps(r)[:300])
sys.exit(0 if ok else 1)
PY
[ $fail -eq 0 ] && echo "PASS test_kernel_micro_pairs.sh"
exit $fail
