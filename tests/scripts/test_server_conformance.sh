#!/bin/sh
# OpenAI conformance details of `kipp serve` (tests/node/server_conformance.mjs):
# one server on the tiny instruct fixture on a free loopback port, --ctx 512,
# default --max-sessions (checked here: 32). Every wait is bounded.
# KEEP_GOING=1, ONLY=text and VERBOSE=1 are passed to the node test (see
# there); NODE_TIMEOUT (s) for slow builds (ASan).
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
MODEL=$BUILD/models/synthetic-tiny-instruct.gguf
. tests/scripts/server_scratch.sh
need_fixture "$MODEL"
need_tool node
need_node_module openai

start_server srv -m "$MODEL" --threads 1 --ctx 512
grep -q "max sessions 32," "$T/srv.log" || bad "--max-sessions does not default to 32: $(grep 'max sessions' "$T/srv.log")"

URL="http://127.0.0.1:$PORT_srv" timeout "${NODE_TIMEOUT:-120}" node tests/node/server_conformance.mjs || fail=1
kill -0 "$PID_srv" 2>/dev/null || bad "the server died"
stop_servers
[ $fail -eq 0 ] || { echo "--- server log"; cat "$T/srv.log"; }
exit $fail
