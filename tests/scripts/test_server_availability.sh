#!/bin/sh
# No client can take `kipp serve` away from the others, and SIGTERM drains
# (tests/node/server_availability.mjs). Three servers on the tiny instruct
# fixture on free loopback ports: one with 1-second deadlines, two that the
# node test SIGTERMs (--shutdown-timeout 10 and 0.3); both must exit 0 and
# say so. Every wait is bounded. KEEP_GOING=1, ONLY=text and VERBOSE=1 are
# passed to the node test (see there); NODE_TIMEOUT (s) for slow builds.
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
MODEL=$BUILD/models/synthetic-tiny-instruct.gguf
. tests/scripts/server_scratch.sh
need_fixture "$MODEL"
need_tool node
need_node_module openai

# start NAME ARGS...: sets PORT_<NAME> and PID_<NAME>.
start() {
    name=$1; shift
    start_server "$name" -m "$MODEL" --threads 1 "$@"
}
start main --ctx 512 --max-body 2097152 --header-timeout 1 --body-timeout 1 --send-timeout 1 --idle-timeout 30
start drain --ctx 512 --shutdown-timeout 10
start cut --shutdown-timeout 0.3

URL="http://127.0.0.1:$PORT_main" \
DRAIN_URL="http://127.0.0.1:$PORT_drain" DRAIN_PID=$PID_drain \
CUT_URL="http://127.0.0.1:$PORT_cut" CUT_PID=$PID_cut \
    timeout "${NODE_TIMEOUT:-180}" node tests/node/server_availability.mjs || { fail=1; kill -TERM $PID_drain $PID_cut 2>/dev/null; }

kill -0 "$PID_main" 2>/dev/null || { echo "FAIL: the main server died"; fail=1; }
# ONLY=text (one section alone, see the .mjs) may skip the SIGTERM sections.
[ -n "$ONLY" ] && kill -TERM $PID_drain $PID_cut 2>/dev/null
for name in drain cut; do
    eval "pid=\$PID_$name"
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        echo "FAIL: server $name still running 15 s after SIGTERM"; fail=1; kill -9 "$pid"
    fi
    wait "$pid"; rc=$?
    [ $rc -eq 0 ] || { echo "FAIL: server $name exit status $rc after SIGTERM"; fail=1; }
    grep -q "draining" "$T/$name.log" && grep -q "stopped" "$T/$name.log" || { echo "FAIL: $name did not drain and stop"; fail=1; }
done
stop_servers # main
if [ $fail -ne 0 ]; then
    for name in main drain cut; do echo "--- $name server log"; tail -n 20 "$T/$name.log"; done
fi
exit $fail
