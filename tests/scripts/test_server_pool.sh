#!/bin/sh
# The shared KV pool through `kipp serve` (issue 10): defaults that serve
# n=5 chats without max_tokens and six concurrent chats, cross-request
# reuse in the counters, pool recovery after disconnects, 16 concurrent
# requests on a pool of 8 blocks equal to their isolated answers, and
# /metrics accepted by promtool (Debian package `prometheus`).
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
BASE=$BUILD/models/synthetic-tiny.gguf
INSTRUCT=$BUILD/models/synthetic-tiny-instruct.gguf
. tests/scripts/server_scratch.sh
need_fixture "$BASE" "$INSTRUCT"
need_tool node
need_node_module openai
need_tool curl

start() {
    name=$1 model=$2; shift 2
    start_server "$name" -m "$model" --threads 2 "$@"
}
start dflt "$INSTRUCT"
# synthetic-tiny: 2 layers * 4096 B * 32 = 256 KiB a block; 2 MiB = 8 blocks.
start small "$BASE" --kv-pool-mib 2 --max-sessions 16
grep -q "8 blocks" "$T/small.log" || bad "small pool size: $(cat "$T/small.log")"

DEFAULT_URL="http://127.0.0.1:$PORT_dflt" SMALL_URL="http://127.0.0.1:$PORT_small" \
    timeout 900 node tests/node/server_pool.mjs || bad "server_pool.mjs"

# Prometheus' own checker must accept /metrics (text format and naming lint).
if command -v promtool >/dev/null; then
    for p in $PORT_dflt $PORT_small; do
        curl -sf --max-time 5 "http://127.0.0.1:$p/metrics" >"$T/metrics.txt" || bad "GET /metrics"
        promtool check metrics <"$T/metrics.txt" >"$T/promtool.out" 2>&1 || bad "promtool: $(cat "$T/promtool.out")"
    done
else
    echo "SKIP-PART(missing): promtool check: promtool not installed (Debian package prometheus)"
fi
for name in kipp_requests_total kipp_requests_failed_total kipp_prompt_tokens_total \
    kipp_generation_tokens_total kipp_queue_wait_seconds_sum kipp_queue_wait_seconds_count \
    kipp_ttft_seconds_sum kipp_ttft_seconds_count kipp_decode_seconds_sum kipp_requests_running \
    kipp_batch_choices_running kipp_requests_waiting kipp_kv_pool_blocks_total \
    kipp_kv_pool_blocks_free kipp_kv_pool_reused_blocks_total kipp_kv_pool_evicted_blocks_total \
    kipp_prefix_tokens_reused_total kipp_kv_pool_usage_ratio; do
    grep -q "^$name " "$T/metrics.txt" || bad "/metrics lacks $name"
done
grep -q '^kipp_time_to_first_token_seconds_bucket{le="+Inf"}' "$T/metrics.txt" || bad "no TTFT histogram"
grep -q '^kipp_time_per_output_token_seconds_bucket{le="+Inf"}' "$T/metrics.txt" || bad "no TPOT histogram"

for p in $PIDS; do kill -0 "$p" 2>/dev/null || bad "a server died"; done
stop_servers
[ $fail -eq 0 ] || { echo "--- default server log"; tail -20 "$T/dflt.log"; echo "--- small server log"; tail -20 "$T/small.log"; }
exit $fail
