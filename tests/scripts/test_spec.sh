#!/bin/sh
# Speculative decoding end to end (issue 11): the CLI flags and messages,
# kipp chat, and `kipp serve --spec lookup` / `--draft-model` with several
# greedy requests in flight at once, each of which must equal plain
# `kipp generate --temperature 0`; /metrics counts drafted and accepted
# tokens. (Token-level identity over every scheme, bitwise rows and the
# sampled distribution are checked by test_spec and test_spec_sampled.)
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
BASE=$BUILD/models/synthetic-tiny.gguf
DRAFT=$BUILD/models/synthetic-tiny.scale4_gs32.gguf
INSTRUCT=$BUILD/models/synthetic-tiny-instruct.gguf
. tests/scripts/server_scratch.sh
need_fixture "$BASE" "$DRAFT" "$INSTRUCT"
need_tool curl
need_tool python3

# ---- CLI ------------------------------------------------------------------------
"$KIPP" generate --help | grep -q -- "--spec-max" || bad "generate --help lacks --spec-max"
"$KIPP" chat --help | grep -q -- "--draft-model" || bad "chat --help lacks --draft-model"
"$KIPP" serve --help | grep -q -- "--spec-gate" || bad "serve --help lacks --spec-gate"
"$KIPP" generate -m "$BASE" -p hi --spec maybe 2>"$T/e"; [ $? -ne 0 ] && grep -q "lookup, draft or off" "$T/e" || bad "bad --spec value: $(cat "$T/e")"
"$KIPP" generate -m "$BASE" -p hi --spec draft 2>"$T/e"; [ $? -ne 0 ] && grep -q "needs --draft-model" "$T/e" || bad "--spec draft without a model: $(cat "$T/e")"
"$KIPP" generate -m "$BASE" -p hi --spec-max 17 2>"$T/e"; [ $? -ne 0 ] && grep -q "\[1, 16\]" "$T/e" || bad "--spec-max 17 accepted"
"$KIPP" generate -m "$BASE" -p hi --spec lookup --all-logits "$T/x" 2>"$T/e"; [ $? -ne 0 ] || bad "--all-logits with --spec accepted"

N=24
P1="The cat sat on the mat. The cat sat on the mat. The cat"
P2="Hello world, this is"
P3="one two three four five six seven eight nine ten one two three"
P4="<|im_start|>user
Hi<|im_end|>
"
i=0
for p in "$P1" "$P2" "$P3" "$P4"; do
    i=$((i + 1))
    "$KIPP" generate -m "$BASE" -p "$p" -n $N >"$T/ref$i" 2>/dev/null || bad "generate $i"
    for s in "--spec lookup" "--draft-model $DRAFT" "--spec lookup --spec-max 1 --spec-gate off"; do
        # shellcheck disable=SC2086
        "$KIPP" generate -m "$BASE" -p "$p" -n $N $s >"$T/out" 2>"$T/err" || bad "generate $s"
        cmp -s "$T/out" "$T/ref$i" || bad "generate $s on prompt $i differs from plain greedy"
        grep -q "spec .*drafted .*accepted .*target evals (.* saved)" "$T/err" || bad "no stats line: $(cat "$T/err")"
    done
done

printf 'Hello\nAgain, please\n/exit\n' | "$KIPP" chat -m "$INSTRUCT" --temperature 0 -n 16 >"$T/chat.ref" 2>/dev/null
for s in "--spec lookup" "--draft-model $BASE"; do
    # shellcheck disable=SC2086
    printf 'Hello\nAgain, please\n/exit\n' | "$KIPP" chat -m "$INSTRUCT" --temperature 0 -n 16 $s >"$T/chat.out" 2>"$T/chat.err" || bad "chat $s"
    cmp -s "$T/chat.out" "$T/chat.ref" || bad "chat $s differs from plain chat"
    grep -q "spec" "$T/chat.err" || bad "chat $s: no stats line"
done
# --ctx small enough that the capacity ends the reply: same cut-off as plain.
printf 'Hello\n/exit\n' | "$KIPP" chat -m "$INSTRUCT" --temperature 0 -n 64 --ctx 24 >"$T/chat.ref" 2>/dev/null
printf 'Hello\n/exit\n' | "$KIPP" chat -m "$INSTRUCT" --temperature 0 -n 64 --ctx 24 --spec lookup >"$T/chat.out" 2>/dev/null
cmp -s "$T/chat.out" "$T/chat.ref" || bad "chat at the capacity limit differs with --spec lookup"

# ---- server -----------------------------------------------------------------------
start() {
    name=$1; shift
    start_server "$name" -m "$BASE" --threads 2 --max-sessions 4 "$@"
}
start lookup --spec lookup
start draft --draft-model "$DRAFT"

# Every request is built first and all are sent at once; the first asks for
# n=3 choices, so at least three sequences share every batched step.
body() { python3 -c 'import json,sys; print(json.dumps({"model":"synthetic-tiny","prompt":sys.argv[1],"max_tokens":int(sys.argv[2]),"temperature":0,"n":int(sys.argv[3])}))' "$1" "$2" "$3"; }
i=0
for p in "$P1" "$P2" "$P3" "$P4"; do
    i=$((i + 1))
    body "$p" $N $([ $i -eq 1 ] && echo 3 || echo 1) >"$T/req$i"
done
for name in lookup draft; do
    eval "port=\$PORT_$name"
    CURLS=""
    for i in 1 2 3 4; do
        curl -s --max-time 120 -H 'Content-Type: application/json' --data-binary @"$T/req$i" \
            "http://127.0.0.1:$port/v1/completions" >"$T/resp$i" &
        CURLS="$CURLS $!"
    done
    for j in $CURLS; do wait "$j"; done
    for i in 1 2 3 4; do
        python3 - "$T/resp$i" "$T/ref$i" $N <<'PY' || bad "server ($name) request $i differs from kipp generate"
import json, sys
r = json.load(open(sys.argv[1]))
want = open(sys.argv[2], encoding="utf-8", errors="replace").read()
want = want[:-1] if want.endswith("\n") else want
ok = True
for c in r["choices"]:
    if c["text"] != want:
        ok = False
        print("got ", repr(c["text"]), "\nwant", repr(want))
    if c["finish_reason"] == "length" and r["usage"]["completion_tokens"] != int(sys.argv[3]) * len(r["choices"]):
        ok = False
        print("usage", r["usage"])
sys.exit(0 if ok else 1)
PY
    done
    curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" >"$T/metrics"
    d=$(sed -n 's/^kipp_spec_drafted_tokens_total //p' "$T/metrics")
    a=$(sed -n 's/^kipp_spec_accepted_tokens_total //p' "$T/metrics")
    calls=$(sed -n 's/^kipp_eval_calls_total //p' "$T/metrics")
    items=$(sed -n 's/^kipp_eval_items_total //p' "$T/metrics")
    echo "server $name: drafted $d accepted $a; eval calls $calls, items $items"
    [ "${d:-0}" -gt 0 ] && [ "${a:-0}" -gt 0 ] || bad "server $name: spec counters $d / $a"
    [ "${items:-0}" -gt "${calls:-0}" ] || bad "server $name: requests were never batched"
done
for p in $PIDS; do kill -0 "$p" 2>/dev/null || bad "a server died"; done
stop_servers
[ $fail -eq 0 ] || { cat "$T/lookup.log" "$T/draft.log"; }
exit $fail
