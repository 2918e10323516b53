#!/bin/sh
# `kipp bench --profile` (kipp_model_options.profile, the cpu backend): the
# steps of the forward pass it reports count what the timed repetitions
# evaluated. For synthetic-tiny (shape read from `kipp info`), P prompt tokens
# and D decode steps per repetition, the expected calls and FLOPs of every
# matmul step and of attention are worked out here from the shape alone --
# the last layer runs its queries, attention, MLP and head on the one row
# that wants logits -- and must equal the record's; the steps' seconds must
# fit inside the repetitions' time. Also: the text table names every step,
# the ref backend is refused by name, and a record without --profile has
# no profile.
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
M=$BUILD/models/synthetic-tiny.gguf
if [ ! -f "$M" ]; then echo "SKIP(missing): fixture $M missing (run make fixtures)"; exit 77; fi
if [ ! -x /usr/bin/python3 ]; then echo "SKIP(tool): /usr/bin/python3 missing"; exit 77; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$KIPP" info "$M" >"$T/info" || bad "kipp info failed"
P=40 D=3 REPS=2
"$KIPP" bench -m "$M" -t 2 --prompt-tokens $P --decode $D --reps $REPS --profile --json \
    >"$T/rec.json" 2>"$T/e" || bad "kipp bench --profile --json failed: $(cat "$T/e")"
/usr/bin/python3 - "$T/info" "$T/rec.json" $P $D $REPS <<'PY' || fail=1
import json, re, sys
info, rec = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
P, D, reps = (int(a) for a in sys.argv[3:6])
shape = re.search(r"layers (\d+), hidden (\d+), ffn (\d+), .*attention width (\d+)\), kv heads (\d+)", info)
L, H, F, A, KVH = (int(g) for g in shape.groups())
KV, V = KVH * 128, 151936
ok = True
def bad(msg):
    global ok
    ok = False
    print("FAIL:", msg)

# One repetition: the prompt (one eval of P rows, logits for the last) and
# D single-row evals. rows(l, eval) is how many rows layer l's queries,
# attention and MLP take; k and v always take every row.
evals = [(P, 0)] + [(1, P + i) for i in range(D)]  # (rows, first position)
exp = {s: [0, 0.0] for s in ("embed", "norm", "qkv", "qk_rope_store", "attention",
                              "attn_output", "gate_up", "down", "head")}
def add(step, flops):
    exp[step][0] += 1
    exp[step][1] += flops
for rows, pos0 in evals:
    add("embed", 0)
    for l in range(L):
        q = 1 if l == L - 1 else rows  # the last layer: the logit row only
        add("norm", 0)
        add("qkv", 2 * H * (q * A + rows * 2 * KV))
        add("qk_rope_store", 0)
        # a row at position p attends to p + 1 positions: 4 FLOPs a dim
        first = pos0 + rows - q
        add("attention", 4 * A * sum(p + 1 for p in range(first, pos0 + rows)))
        add("attn_output", 2 * A * H * q)
        add("norm", 0)
        add("gate_up", 2 * H * 2 * F * q)
        add("down", 2 * F * H * q)
    add("norm", 0)
    add("head", 2 * H * V)

prof = {s["step"]: s for s in rec.get("profile", [])}
if list(prof) != list(exp):
    bad(f"profile steps {list(prof)}, want {list(exp)}")
in_steps = 0.0
for step, (calls, flops) in exp.items():
    got = prof.get(step)
    if not got:
        continue
    in_steps += got["seconds"]
    if got["calls"] != reps * calls:
        bad(f"{step}: {got['calls']} calls, want {reps * calls}")
    if abs(got["flops"] - reps * flops) > 0.5:
        bad(f"{step}: {got['flops']:.0f} FLOPs, want {reps * flops:.0f}")
    if got["seconds"] < 0 or (got["flops"] and got["seconds"] <= 0):
        bad(f"{step}: {got['seconds']} s")
timed = rec.get("profile_timed_seconds", -1)
if not 0 < in_steps <= timed:
    bad(f"steps hold {in_steps:.6f} s of the repetitions' {timed:.6f} s")
if abs(rec.get("profile_other_seconds", -1) - (timed - in_steps)) > 1e-5:
    bad(f"profile_other_seconds {rec.get('profile_other_seconds')} is not {timed - in_steps:.6f}")
if ok:
    print(f"profile: {len(prof)} steps, calls and FLOPs as the shape gives; {in_steps:.4f} of {timed:.4f} s in steps")
sys.exit(0 if ok else 1)
PY

"$KIPP" bench -m "$M" -t 2 --prompt-tokens 8 --decode 2 --reps 1 --profile >"$T/table" 2>"$T/e" ||
    bad "kipp bench --profile failed: $(cat "$T/e")"
for step in embed norm qkv qk_rope_store attention attn_output gate_up down head other; do
    grep -q "^ .* $step " "$T/table" || bad "the --profile table has no '$step' row"
done

"$KIPP" bench -m "$M" --backend ref --prompt-tokens 2 --decode 0 --reps 1 --profile \
    >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 2 ] && grep -q "kipp bench: --profile: the ref backend keeps no profile" "$T/e" ||
    bad "--backend ref --profile: exit $rc, $(cat "$T/e")"

"$KIPP" bench -m "$M" -t 2 --prompt-tokens 4 --decode 1 --reps 1 --json >"$T/plain.json" 2>"$T/e" ||
    bad "kipp bench --json failed: $(cat "$T/e")"
grep -q '"profile"' "$T/plain.json" && bad "a record without --profile has a profile"

[ $fail -eq 0 ] && echo "bench --profile: OK"
exit $fail
