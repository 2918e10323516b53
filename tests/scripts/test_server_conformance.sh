#!/bin/sh
# OpenAI conformance details of `kipp serve` (tests/node/server_conformance.mjs):
# one server on the tiny instruct fixture on a free loopback port, --ctx 512,
# default --max-sessions (checked here: 32). Every wait is bounded.
# KEEP_GOING=1, ONLY=text and VERBOSE=1 are passed to the node test (see
# there); NODE_TIMEOUT (s) for slow builds (ASan).
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
MODEL=$BUILD/models/synthetic-tiny-instruct.gguf
[ -f "$MODEL" ] || { echo "SKIP(missing): fixture $MODEL missing (run make fixtures)"; exit 77; }
command -v node >/dev/null || { echo "SKIP(missing): node is not installed"; exit 77; }
[ -d node_modules/openai ] || { echo "SKIP(missing): node_modules/openai missing (npm ci)"; exit 77; }

T=$(mktemp -d)
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0

"$KIPP" serve -m "$MODEL" --port 0 --threads 1 --ctx 512 2>"$T/log" &
PID=$!
i=0
while ! grep -qs "listening on" "$T/log"; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 $PID 2>/dev/null; then echo "FAIL: server did not start:"; cat "$T/log"; exit 1; fi
    sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/log")
grep -q "max sessions 32," "$T/log" || { echo "FAIL: --max-sessions does not default to 32: $(grep 'max sessions' "$T/log")"; fail=1; }

URL="http://127.0.0.1:$port" timeout "${NODE_TIMEOUT:-120}" node tests/node/server_conformance.mjs || fail=1
kill -0 $PID 2>/dev/null || { echo "FAIL: the server died"; fail=1; }
[ $fail -eq 0 ] || { echo "--- server log"; cat "$T/log"; }
exit $fail
