#!/bin/sh
# `kipp serve` end to end: two servers on free loopback ports (base and
# instruct tiny fixtures), references from `kipp generate`, then
# tests/node/server_client.mjs drives them with the official `openai` npm
# client. Servers are killed on exit; every wait is bounded.
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
BASE=$BUILD/models/synthetic-tiny.gguf
INSTRUCT=$BUILD/models/synthetic-tiny-instruct.gguf
. tests/scripts/server_scratch.sh
need_fixture "$BASE" "$INSTRUCT"
need_tool node
need_node_module openai
need_tool curl

# ---- CLI errors -------------------------------------------------------------
"$KIPP" serve --help | grep -q "loopback" || bad "serve --help"
"$KIPP" serve -m "$BASE" --backend gpu 2>"$T/e"; [ $? -eq 2 ] || bad "unknown backend exit status"
"$KIPP" serve -m "$T/none.gguf" --port 0 2>"$T/e"; [ $? -eq 1 ] && grep -q "cannot open" "$T/e" || bad "missing model: $(cat "$T/e")"
"$KIPP" serve -m "$BASE" --ctx 999999 2>"$T/e"; [ $? -eq 2 ] || bad "--ctx beyond the context accepted"

# start NAME MODEL [ARGS]: starts a server on a free port; sets PORT_<NAME>.
start() {
    name=$1 model=$2; shift 2
    start_server "$name" -m "$model" --threads 1 --max-body 65536 "$@"
    eval "port=\$PORT_$name"
    curl -sf --max-time 5 "http://127.0.0.1:$port/healthz" >/dev/null || { echo "FAIL: $name /healthz"; exit 1; }
}
start base "$BASE" --max-sessions 4 --kv-budget 8192
start instruct "$INSTRUCT"
grep -q "weights are random" "$T/base.log" || bad "no random-weights notice on stderr"

# A second server on a port in use must fail, not fall back.
"$KIPP" serve -m "$BASE" --port "$PORT_base" 2>"$T/e" &
p=$!; i=0
while kill -0 $p 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill $p 2>/dev/null && bad "a second server on a used port kept running"
wait $p 2>/dev/null; [ $? -ne 0 ] || bad "port in use: exit status 0"

# ---- references from kipp generate (same backend as the server) ----------------
N_GEN=12
BASE_PROMPT="Hello world, this is"
BASE_TOKENS=9707,11,847,829,374,264,1273
gen() { "$KIPP" generate --backend cpu --temperature 0 -n $N_GEN "$@" 2>>"$T/gen.log"; }
gen -m "$BASE" -p "$BASE_PROMPT" >"$T/base_text.txt" || bad "generate base"
gen -m "$BASE" --tokens $BASE_TOKENS --all-logits "$T/logits.f32" >"$T/base_tokens.txt" || bad "generate tokens"
# The ChatML prompts are what test_chat checks against the Jinja template.
gen -m "$INSTRUCT" -p "<|im_start|>user
Hello<|im_end|>
<|im_start|>assistant
" >"$T/chat_think.txt" || bad "generate chat"
gen -m "$INSTRUCT" -p "<|im_start|>user
Hello<|im_end|>
<|im_start|>assistant
<think>

</think>

" >"$T/chat_nothink.txt" || bad "generate chat (no thinking)"

# ---- kipp chat: two turns through stdin; each reply equals kipp generate on
# the rendered conversation (the second one re-renders turn one's reply).
printf 'Hello\nAgain, please\n/exit\n' | timeout 60 "$KIPP" chat -m "$INSTRUCT" --backend cpu \
    --temperature 0 -n $N_GEN >"$T/chat.out" 2>"$T/chat.err" || bad "kipp chat: $(cat "$T/chat.err")"
grep -q "weights are random" "$T/chat.err" || bad "kipp chat: no random-weights notice"
{ printf '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n'
  head -c -1 "$T/chat_think.txt"
  printf '<|im_end|>\n<|im_start|>user\nAgain, please<|im_end|>\n<|im_start|>assistant\n'; } >"$T/p2"
P2=$(cat "$T/p2"; printf x); P2=${P2%x}
{ cat "$T/chat_think.txt"; gen -m "$INSTRUCT" -p "$P2"; } >"$T/chat.want"
cmp -s "$T/chat.out" "$T/chat.want" || bad "kipp chat transcript differs from kipp generate: $(od -c "$T/chat.out" | head -5) vs $(od -c "$T/chat.want" | head -5)"
printf 'Hi\n' | "$KIPP" chat -m "$BASE" >/dev/null 2>"$T/e" && bad "kipp chat on a base model succeeded"
grep -q "instruct" "$T/e" || bad "kipp chat base-model message: $(cat "$T/e")"

BASE_URL="http://127.0.0.1:$PORT_base" INSTRUCT_URL="http://127.0.0.1:$PORT_instruct" \
REF_DIR="$T" LOGITS_FILE="$T/logits.f32" N_GEN=$N_GEN BASE_PROMPT="$BASE_PROMPT" BASE_TOKENS=$BASE_TOKENS \
    timeout 120 node tests/node/server_client.mjs || bad "server_client.mjs"

# A corrupt artifact (a NaN norm weight, every metadata check passed) gives
# NaN logits: the request fails with a 500 that blames the model, not bans.
python3 tests/scripts/gguf_tool.py set-f32 "$BASE" "$T/nan.gguf" blk.0.attn_norm.weight 0 nan ||
    bad "cannot write the NaN artifact"
start nan "$T/nan.gguf"
code=$(curl -s --max-time 30 -o "$T/nan.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    -d '{"model":"synthetic-tiny","prompt":"Hello","max_tokens":2}' "http://127.0.0.1:$PORT_nan/v1/completions")
[ "$code" = 500 ] && grep -q "the model's logits are NaN" "$T/nan.json" ||
    bad "NaN logits: HTTP $code, $(cat "$T/nan.json")"

# --head q8_0: the server reads the Q8_0 copy of the head (GET /v1/models
# says which head it reads) and answers a greedy completion with what
# `kipp generate --head q8_0` prints (which ends with a newline the
# completion does not have); the stored-head server says bf16; the Q8_0
# head's logits are not the stored head's (the 12 greedy tokens here are
# the same either way: the head's rounding moves logits by NMSE ~3e-5).
"$KIPP" serve -m "$BASE" --head q4_0 2>"$T/e"; [ $? -eq 2 ] && grep -q "unknown output head format 'q4_0'" "$T/e" ||
    bad "serve --head q4_0: $(cat "$T/e")"
start head "$BASE" --head q8_0
curl -sf --max-time 5 "http://127.0.0.1:$PORT_head/v1/models" | grep -q '"output_head":"q8_0"' ||
    bad "--head q8_0 server: /v1/models does not say output_head q8_0"
curl -sf --max-time 5 "http://127.0.0.1:$PORT_base/v1/models" | grep -q '"output_head":"bf16"' ||
    bad "stored-head server: /v1/models does not say output_head bf16"
gen -m "$BASE" --head q8_0 -p "$BASE_PROMPT" >"$T/head_text.txt" || bad "generate --head q8_0"
"$KIPP" generate --backend cpu -n 4 --head q8_0 -m "$BASE" --tokens $BASE_TOKENS \
    --all-logits "$T/head_logits.f32" >/dev/null 2>&1 &&
    "$KIPP" generate --backend cpu -n 4 -m "$BASE" --tokens $BASE_TOKENS \
        --all-logits "$T/stored_logits.f32" >/dev/null 2>&1 || bad "generate --all-logits, both heads"
cmp -s "$T/head_logits.f32" "$T/stored_logits.f32" && bad "--head q8_0 gave the stored head's logits (no effect)"
curl -sf --max-time 30 -H 'Content-Type: application/json' \
    -d "{\"model\":\"synthetic-tiny\",\"prompt\":\"$BASE_PROMPT\",\"max_tokens\":$N_GEN,\"temperature\":0}" \
    "http://127.0.0.1:$PORT_head/v1/completions" >"$T/head.json" || bad "--head q8_0 completion"
node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
         process.stdout.write(j.choices[0].text + "\n");' "$T/head.json" >"$T/head_served.txt" ||
    bad "--head q8_0 completion: $(cat "$T/head.json")"
cmp -s "$T/head_served.txt" "$T/head_text.txt" ||
    bad "--head q8_0: the server's completion differs from kipp generate --head q8_0"

# Every server must still be alive (no crash on any of the bad requests).
for p in $PIDS; do kill -0 "$p" 2>/dev/null || bad "a server died"; done
curl -sf --max-time 5 "http://127.0.0.1:$PORT_base/metrics" | grep -q "^kipp_active_sessions 0" || bad "metrics after the run"

# Graceful shutdown on SIGTERM: exit status 0 (a sanitizer build's leak
# report at exit fails here).
stop_servers
grep -q "stopped" "$T/base.log" || bad "no clean stop"
[ $fail -eq 0 ] || { echo "--- base server log"; cat "$T/base.log"; }
exit $fail
