#!/bin/sh
# Tool calling, reasoning and structured output end to end: one `kipp serve`
# of the instruct fixture, driven by tests/node/tools_reasoning.mjs and
# tests/node/structured_output.mjs (the official `openai` client; ajv as
# the independent JSON Schema validator). The server is killed on exit;
# every wait is bounded.
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
INSTRUCT=$BUILD/models/synthetic-tiny-instruct.gguf
. tests/scripts/server_scratch.sh
need_fixture "$INSTRUCT"
need_tool node
need_node_module openai
need_node_module ajv

start_server serve -m "$INSTRUCT" --threads 1
export INSTRUCT_URL="http://127.0.0.1:$PORT_serve" KIPP MODEL="$INSTRUCT"
# A sanitizer build serves several times slower (under ASan on the Intel
# Xeon of stop 58 tools_reasoning took ~13 minutes beside another job and
# was cut off at 600 s): the bounds widen by tests/run.sh's factor.
scale=${KIPP_TEST_TIME_SCALE:-1}
timeout $((600 * scale)) node tests/node/tools_reasoning.mjs || { echo "FAIL: tools_reasoning.mjs"; fail=1; }
timeout $((900 * scale)) node tests/node/structured_output.mjs || { echo "FAIL: structured_output.mjs"; fail=1; }
stop_servers
exit $fail
