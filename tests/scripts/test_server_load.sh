#!/bin/sh
# `kipp serve` listens before its model is loaded (issue 10): while it
# loads, /healthz is 200 (liveness), /health and every /v1 endpoint 503 with
# Retry-After and a JSON error, /metrics valid Prometheus text with
# kipp_model_loaded 0; /health turns 200 once loaded; SIGTERM during the
# load exits 0 at once; a load that fails after the port opened exits 1
# with the reason. The load is made observable by the hidden, test-only
# option --debug-load-delay-ms (a sleep before the model is opened, in the
# CLI only). Every wait is bounded.
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
MODEL=$BUILD/models/synthetic-tiny-instruct.gguf
. tests/scripts/server_scratch.sh
need_fixture "$MODEL"
need_tool curl

# req PORT PATH [CURL ARGS]: prints the status; body in $T/body, head in $T/head.
req() {
    _port=$1 _path=$2; shift 2
    curl -s --max-time 10 -o "$T/body" -D "$T/head" -w '%{http_code}' "$@" \
        "http://127.0.0.1:$_port$_path"
}
# loading_503 WHAT: the last response was a 503 saying the model is loading.
loading_503() {
    grep -qi '^Retry-After: 1' "$T/head" || bad "$1: no Retry-After: $(cat "$T/head")"
    grep -q '"error":{"message":"the model is loading' "$T/body" || bad "$1: body $(cat "$T/body")"
}
# exits_within NAME SECONDS: the server exits within SECONDS; sets rc.
exits_within() {
    eval "_pid=\$PID_$1"
    _i=0
    while kill -0 "$_pid" 2>/dev/null && [ $_i -lt $(($2 * 10)) ]; do sleep 0.1; _i=$((_i + 1)); done
    if kill -0 "$_pid" 2>/dev/null; then
        bad "server $1 still running after $2 s"; kill -9 "$_pid"
    fi
    wait "$_pid"; rc=$?
}

# ---- a load that does not end during the test: what each endpoint says -------
launch_server loading -m "$MODEL" --threads 1 --debug-load-delay-ms 600000
P=$PORT_loading
s=$(req $P /healthz); [ "$s" = 200 ] && grep -q '"loaded":false' "$T/body" || bad "/healthz while loading: $s $(cat "$T/body")"
s=$(req $P /health); [ "$s" = 503 ] || bad "/health while loading: $s"; loading_503 /health
s=$(req $P /v1/models); [ "$s" = 503 ] || bad "/v1/models while loading: $s"; loading_503 /v1/models
s=$(req $P /v1/models/synthetic-tiny-instruct); [ "$s" = 503 ] || bad "/v1/models/{id} while loading: $s"
for ep in /v1/completions /v1/chat/completions; do
    s=$(req $P $ep -H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"hi"}],"prompt":"hi"}')
    [ "$s" = 503 ] || bad "POST $ep while loading: $s"; loading_503 "POST $ep"
done
s=$(req $P /v1/chat/completions); [ "$s" = 405 ] || bad "GET /v1/chat/completions while loading: $s (want 405)"
s=$(req $P /metrics); [ "$s" = 200 ] || bad "/metrics while loading: $s"
grep -q '^kipp_model_loaded 0$' "$T/body" || bad "/metrics while loading lacks kipp_model_loaded 0"
grep -q '^kipp_requests_running 0$' "$T/body" || bad "/metrics while loading lacks kipp_requests_running 0"
if command -v promtool >/dev/null; then
    promtool check metrics <"$T/body" >"$T/promtool.out" 2>&1 || bad "promtool (loading): $(cat "$T/promtool.out")"
else
    echo "SKIP-PART(missing): promtool check: promtool not installed (Debian package prometheus)"
fi
grep -q "kipp serve: ready" "$T/loading.log" && bad "the 600 s load finished?"
# SIGTERM during the load: a clean, prompt exit.
kill -TERM "$PID_loading"
exits_within loading 5
[ "$rc" = 0 ] || bad "SIGTERM during the load: exit status $rc"
grep -q "kipp serve: stopped" "$T/loading.log" || bad "SIGTERM during the load: no 'stopped'"

# ---- a 2 s load: /health goes from 503 to 200 ---------------------------------
launch_server quick -m "$MODEL" --threads 1 --debug-load-delay-ms 2000
P=$PORT_quick
n503=0 i=0
while :; do
    s=$(req $P /health)
    [ "$s" = 200 ] && break
    [ "$s" = 503 ] && n503=$((n503 + 1)) || bad "/health during the load: $s"
    i=$((i + 1))
    [ $i -gt $((${START_TIMEOUT:-60} * 10)) ] && { bad "/health never 200"; break; }
    sleep 0.1
done
echo "/health: $n503 x 503 before 200"
[ $n503 -ge 1 ] || bad "/health was never 503 before the model was loaded"
grep -q '"status":"ok"' "$T/body" && grep -q '"loaded":true' "$T/body" || bad "/health once loaded: $(cat "$T/body")"
grep -q "kipp serve: ready" "$T/quick.log" || bad "/health 200 before the ready line"
s=$(req $P /v1/models); [ "$s" = 200 ] && grep -q '"synthetic-tiny-instruct"' "$T/body" || bad "/v1/models once loaded: $s"
s=$(req $P /v1/completions -H 'Content-Type: application/json' -d '{"prompt":"hi","max_tokens":2}')
[ "$s" = 200 ] || bad "POST /v1/completions once loaded: $s $(cat "$T/body")"
s=$(req $P /metrics); grep -q '^kipp_model_loaded 1$' "$T/body" || bad "/metrics once loaded lacks kipp_model_loaded 1"
kill -TERM "$PID_quick"
exits_within quick 15
[ "$rc" = 0 ] || bad "SIGTERM after the load: exit status $rc"

# ---- a load that fails after the port opened: exit 1 with the reason ---------
launch_server broken -m "$MODEL" --threads 1 --debug-load-delay-ms 1000 --draft-model "$T/none.gguf"
s=$(req $PORT_broken /health); [ "$s" = 503 ] || bad "/health before a failing load: $s"
exits_within broken 30
[ "$rc" = 1 ] || bad "failed load: exit status $rc (want 1)"
grep -q "cannot open draft model" "$T/broken.log" || bad "failed load: no reason: $(cat "$T/broken.log")"

stop_servers
[ $fail -eq 0 ] || for n in loading quick broken; do echo "--- $n"; cat "$T/$n.log"; done
exit $fail
