#!/bin/sh
# bench/phase_table.mjs, the per-round view of a bench_native.mjs record
# (each engine's share of that round's file roofline beside the FMA-peak
# and file readings, and their correlations). A made-up record whose
# shares are known: kipp's rise with the FMA peak (r = 1), llama.cpp's
# fall (r = -1), each round's share printed as set; a record without FMA
# readings, a Q4_0 case of a record that does not say which of its bytes
# lie in the file, and a missing argument are refused.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
/usr/bin/python3 - "$T" <<'PY'
import json, sys
d = sys.argv[1]
file_bytes, kv = 6.0e8, 1.0e6
copy = 1.0e8  # kipp's bytes outside the file (as a --kipp-head q8_0 copy), read at the fresh buffer's rate
fma = [300, 320, 340, 360]
fbw = [20, 22, 21, 19]
bw = [25, 24, 26, 25]
kipp_share = [0.60, 0.70, 0.80, 0.90]
llama_share = [0.60, 0.55, 0.50, 0.45]
roof = lambda r: 1 / (file_bytes / (fbw[r] * 1e9) + kv / (bw[r] * 1e9))
kipp_roof = lambda r: 1 / ((file_bytes - copy) / (fbw[r] * 1e9) + (copy + kv) / (bw[r] * 1e9))
rec = {"machine": {"cpu": "test cpu"}, "rounds": 4, "kipp_tiers": ["avx512"], "kipp_tier": "avx512",
       "schemes": {"q8_0": {"weight_bytes_per_token": file_bytes, "kipp_weight_bytes_per_token": file_bytes,
                            "kipp_file_weight_bytes_per_token": file_bytes - copy,
                            "llama_file_weight_bytes_per_token": file_bytes, "cases": [
           {"case": "prefill 512"},
           {"case": "decode 64 @ 0", "bytes_per_token": file_bytes + kv, "llama_bytes_per_token": file_bytes + kv}]}},
       "bandwidth_samples": [], "runs": []}
for r in range(4):
    for when in ("before", "after"):
        rec["bandwidth_samples"].append({"scheme": "q8_0", "case": "decode 64 @ 0", "round": r, "when": when,
                                         "read_gb_s": bw[r], "file_read_gb_s": fbw[r], "fma_gflops": fma[r]})
    rec["runs"].append({"scheme": "q8_0", "case": "decode 64 @ 0", "round": r, "engine": "kipp",
                        "kipp_tier": "avx512", "tps": kipp_share[r] * kipp_roof(r)})
    rec["runs"].append({"scheme": "q8_0", "case": "decode 64 @ 0", "round": r, "engine": "llama",
                        "tps": llama_share[r] * roof(r)})
json.dump(rec, open(d + "/rec.json", "w"))
# a record from before the file split was stored: a Q4_0 case cannot be split
old = json.loads(json.dumps(rec))
sch = old["schemes"].pop("q8_0")
del sch["kipp_file_weight_bytes_per_token"], sch["llama_file_weight_bytes_per_token"]
old["schemes"]["scale4_gs32"] = sch
for x in old["bandwidth_samples"] + old["runs"]:
    x["scheme"] = "scale4_gs32"
json.dump(old, open(d + "/unsplit.json", "w"))
for x in rec["bandwidth_samples"]:
    del x["fma_gflops"]
json.dump(rec, open(d + "/old.json", "w"))
PY
if ! node bench/phase_table.mjs "$T/rec.json" >"$T/out" 2>"$T/err"; then
    bad "phase_table on the made-up record: exit $? ($(head -c 300 "$T/err"))"
else
    for want in "| 1 | " "| 4 | " "| 60 % | 60 % |" "| 70 % | 55 % |" "| 80 % | 50 % |" "| 90 % | 45 % |" \
                "kipp avx512 " "correlation with the FMA peak 1.00" "correlation with the FMA peak -1.00"; do
        grep -qF -- "$want" "$T/out" || bad "phase_table output lacks '$want': $(head -c 1500 "$T/out")"
    done
    [ "$(grep -c '^| [0-9]' "$T/out")" -eq 4 ] || bad "phase_table: not 4 round rows: $(cat "$T/out")"
    grep -q "prefill" "$T/out" && bad "phase_table printed the prefill case"
fi
node bench/phase_table.mjs "$T/old.json" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "no decode case with FMA readings" "$T/err" ||
    bad "record without FMA readings: exit $rc, $(head -c 300 "$T/err") $(head -c 300 "$T/out")"
node bench/phase_table.mjs "$T/unsplit.json" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "does not say which bytes lie in the file" "$T/out" ||
    bad "record without the file split, Q4_0: exit $rc, $(head -c 300 "$T/out") $(head -c 300 "$T/err")"
node bench/phase_table.mjs >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q "usage" "$T/err" || bad "no argument: exit $rc, $(head -c 200 "$T/err")"
[ $fail -eq 0 ] && echo "PASS test_phase_table.sh"
exit $fail
