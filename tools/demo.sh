#!/bin/sh
# `make demo`: the synthetic instruct model end to end. Make builds the
# binary and BUILD/models/synthetic-tiny-instruct.gguf (kipp synth + kipp
# convert) first; this script shows what the artifact is, generates text
# with timings, and exercises the server when that subcommand is built.
# The weights are random: the text is gibberish by construction.
set -e
BUILD=${1:-build}
KIPP=$BUILD/kipp
M=$BUILD/models/synthetic-tiny-instruct.gguf
[ -x "$KIPP" ] || { echo "demo: $KIPP is not built (run make)" >&2; exit 1; }
[ -f "$M" ] || { echo "demo: $M is missing (make demo builds it)" >&2; exit 1; }

echo "== kipp info $M"
"$KIPP" info "$M" | head -n 25

echo
echo "== kipp generate (synthetic checkpoint: its weights are RANDOM, so the text is gibberish)"
PROMPT='<|im_start|>user
Write a haiku about paged attention.<|im_end|>
<|im_start|>assistant
'
echo "prompt: $(printf '%s' "$PROMPT" | tr '\n' ' ')"
echo "--- output ---"
"$KIPP" generate -m "$M" -p "$PROMPT" -n 32 --temperature 0.8 --top-p 0.95 --seed 1
echo "--- end ---"

echo
echo "== kipp serve (OpenAI-compatible, loopback) + one chat completion through curl"
PORT=${KIPP_DEMO_PORT:-18080}
"$KIPP" serve -m "$M" --port "$PORT" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
i=0
# /health is readiness: 200 once the model is loaded (/healthz, liveness, is
# 200 as soon as the loop listens, while requests still get 503 "loading").
until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 150 ] || { echo "demo: server did not become ready in 30 s" >&2; exit 1; }
    sleep 0.2
done
curl -s "http://127.0.0.1:$PORT/v1/models"
echo
curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"synthetic-tiny-instruct","messages":[{"role":"user","content":"Hello"}],"max_tokens":16}'
echo
