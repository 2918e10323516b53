#!/bin/sh
# `make demo` (tools/demo.sh), the README's first command, end to end on the
# synthetic instruct fixture: it must show the artifact, generate with
# timings, and get a real chat completion from the server it starts -- not
# the 503 "model is loading" that it printed while it waited on /healthz
# (liveness) instead of /health (readiness).
BUILD=${BUILD:-build}
M=$BUILD/models/synthetic-tiny-instruct.gguf
if [ ! -f "$M" ]; then echo "SKIP(missing): fixture $M missing (run make fixtures)"; exit 77; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
KIPP_DEMO_PORT=$PORT sh tools/demo.sh "$BUILD" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 0 ] || bad "demo exit $rc: $(tail -n 5 "$T/err")"
grep -q "^== kipp info" "$T/out" || bad "no kipp info section"
grep -q "generation 32 tokens in .* tok/s" "$T/err" || bad "no generation timings: $(tail -n 3 "$T/err")"
grep -q '"object":"list","data":\[{"id":"synthetic-tiny-instruct"' "$T/out" || bad "no /v1/models answer"
grep -q '"object":"chat.completion"' "$T/out" || bad "no chat completion: $(grep -m1 error "$T/out")"
grep -q '"completion_tokens":16' "$T/out" || bad "the completion did not stop at max_tokens 16"
grep -q '"error"' "$T/out" && bad "an error answer: $(grep -m1 '"error"' "$T/out")"
grep -q "kipp serve: stopped" "$T/err" || bad "the server did not stop cleanly"
[ $fail -eq 0 ] && echo "PASS test_demo.sh"
exit $fail
