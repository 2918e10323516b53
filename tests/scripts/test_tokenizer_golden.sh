#!/bin/sh
# The tokenizer end to end (artifact -> kipp tokenize/detokenize) against the
# golden corpus made by transformers.js (tests/vectors/tokenizer, see its
# manifest.json and tools/gen_tokenizer_golden.mjs):
#   1. `kipp tokenize --jsonl` gives exactly the expected ids on every case;
#   2. `kipp detokenize --jsonl` of those ids gives NFC(input) on every case;
#   3. the single-text CLI forms, invalid UTF-8 from a file, and the errors.
# With KIPP_TEST_FULL=1 it also regenerates the corpus with node and requires
# it to be identical to the committed one.
set -u
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
MODEL=$BUILD/models/synthetic-tiny.gguf
VEC=tests/vectors/tokenizer
TMP=$BUILD/tmp-tokenizer-golden
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
fail=0

if [ ! -f "$MODEL" ]; then
    echo "SKIP(missing): $MODEL missing (make fixtures)"
    exit 77
fi
mkdir -p "$TMP"

# 1. ids
if ! "$KIPP" tokenize -m "$MODEL" --jsonl "$VEC/inputs.jsonl" > "$TMP/ids.jsonl"; then
    echo "FAIL: kipp tokenize --jsonl exited non-zero"
    fail=1
fi
if cmp -s "$TMP/ids.jsonl" "$VEC/expected.jsonl"; then
    echo "ids: $(wc -l < "$VEC/expected.jsonl") cases identical"
else
    echo "FAIL: ids differ from the golden corpus"
    "$PY" - "$TMP/ids.jsonl" "$VEC/expected.jsonl" "$VEC/cases.jsonl" "$VEC/inputs.jsonl" <<'EOF'
import json, sys
got = open(sys.argv[1], encoding="utf-8").read().splitlines()
want = open(sys.argv[2], encoding="utf-8").read().splitlines()
names = [json.loads(l)["name"] for l in open(sys.argv[3], encoding="utf-8")]
inputs = open(sys.argv[4], encoding="utf-8").read().splitlines()
bad = [i for i in range(len(want)) if i >= len(got) or got[i] != want[i]]
print(f"{len(bad)} of {len(want)} cases differ ({len(got)} lines produced)")
for i in bad[:10]:
    print(f"  {names[i]}: {inputs[i][:120]}")
    print(f"    want {want[i][:200]}")
    print(f"    got  {got[i][:200] if i < len(got) else '(missing)'}")
EOF
    fail=1
fi

# 2. decode(encode(x)) == NFC(x)
if ! "$KIPP" detokenize -m "$MODEL" --jsonl "$VEC/expected.jsonl" > "$TMP/text.jsonl"; then
    echo "FAIL: kipp detokenize --jsonl exited non-zero"
    fail=1
fi
if ! "$PY" - "$TMP/text.jsonl" "$VEC/nfc.jsonl" "$VEC/cases.jsonl" <<'EOF'
import json, sys
got = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
want = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
names = [json.loads(l)["name"] for l in open(sys.argv[3], encoding="utf-8")]
bad = [i for i in range(len(want)) if i >= len(got) or got[i] != want[i]]
if bad or len(got) != len(want):
    print(f"FAIL: {len(bad)} of {len(want)} cases do not decode to NFC(input)")
    for i in bad[:10]:
        print(f"  {names[i]}: want {want[i][:80]!r} got {got[i][:80] if i < len(got) else None!r}")
    sys.exit(1)
print(f"round trip: {len(want)} cases decode to NFC(input)")
EOF
then
    fail=1
fi

# 3. single-text forms and errors
check() { # name expected actual
    if [ "$2" != "$3" ]; then
        echo "FAIL: $1: expected [$2], got [$3]"
        fail=1
    fi
}
# line 1 of the corpus through --text, --json and --file
text=$("$PY" -c "import json,sys; sys.stdout.write(json.loads(open('$VEC/inputs.jsonl', encoding='utf-8').readline()))")
want=$(head -n 1 "$VEC/expected.jsonl")
check "--text --json" "$want" "$("$KIPP" tokenize -m "$MODEL" --text "$text" --json)"
check "--text" "$(echo "$want" | tr -d '[]' | tr ',' ' ')" "$("$KIPP" tokenize -m "$MODEL" --text "$text")"
printf '%s' "$text" > "$TMP/one.txt"
check "--file" "$want" "$("$KIPP" tokenize -m "$MODEL" --file "$TMP/one.txt" --json)"
# invalid UTF-8 from a file: the first invalid_utf8.jsonl case containing text
"$PY" - "$VEC/invalid_utf8.jsonl" "$TMP/bad.bin" "$TMP/bad.want" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    case = json.loads(line)
    if len(case["hex"]) > 8:
        open(sys.argv[2], "wb").write(bytes.fromhex(case["hex"]))
        open(sys.argv[3], "w").write(json.dumps(case["ids"], separators=(",", ":")))
        break
EOF
check "--file invalid UTF-8" "$(cat "$TMP/bad.want")" \
    "$("$KIPP" tokenize -m "$MODEL" --file "$TMP/bad.bin" --json)"
check "empty text" "[]" "$("$KIPP" tokenize -m "$MODEL" --text "" --json)"
check "detokenize --ids" "Hello world<|im_end|>" \
    "$("$KIPP" detokenize -m "$MODEL" --ids 9707,1879,151645)"
check "detokenize --ids (spaces)" "Hello world" "$("$KIPP" detokenize -m "$MODEL" --ids "9707 1879")"
for bad in "--ids 151936" "--ids -1" "--ids 12,x" "--ids"; do
    # shellcheck disable=SC2086
    if "$KIPP" detokenize -m "$MODEL" $bad > /dev/null 2>&1; then
        echo "FAIL: detokenize $bad should fail"
        fail=1
    fi
done
if "$KIPP" tokenize -m "$MODEL" > /dev/null 2>&1; then echo "FAIL: tokenize without text should fail"; fail=1; fi
if "$KIPP" tokenize --text x > /dev/null 2>&1; then echo "FAIL: tokenize without -m should fail"; fail=1; fi
if "$KIPP" tokenize -m "$TMP/nonexistent.gguf" --text x > /dev/null 2>&1; then
    echo "FAIL: tokenize with a missing model should fail"; fail=1
fi
printf '"ok"\n[1,2]\n' > "$TMP/notstring.jsonl"
if "$KIPP" tokenize -m "$MODEL" --jsonl "$TMP/notstring.jsonl" > /dev/null 2>&1; then
    echo "FAIL: tokenize --jsonl with a non-string line should fail"; fail=1
fi
"$KIPP" tokenize --help > /dev/null || { echo "FAIL: tokenize --help"; fail=1; }
"$KIPP" detokenize --help > /dev/null || { echo "FAIL: detokenize --help"; fail=1; }

# full mode: the committed corpus is exactly what the generator makes
if [ "${KIPP_TEST_FULL:-0}" = 1 ]; then
    if node tools/gen_tokenizer_golden.mjs --check; then
        echo "corpus: regenerated, identical"
    else
        echo "FAIL: tools/gen_tokenizer_golden.mjs --check"
        fail=1
    fi
fi

[ $fail -eq 0 ] && echo "tokenizer golden: all passed"
exit $fail
