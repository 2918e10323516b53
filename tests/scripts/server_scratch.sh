# Sourced by the server test scripts (not a test: no test_ prefix): a scratch
# directory $T, the server pids in $PIDS killed and reaped on exit, bad() to
# record a failed check in $fail, and servers started on free loopback ports.
T=$(mktemp -d)
PIDS=""
SERVERS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# Whole-test skips (exit 77 with a one-line SKIP(missing) reason, as
# tests/run.sh counts them; the scratch directory is removed on the way):
# need_fixture FILE...   files `make fixtures` makes
# need_tool CMD [HINT]   a command on PATH, or an executable path (HINT: its package)
# need_node_module NAME  an npm package (node_modules from npm ci, or NODE_PATH)
need_fixture() {
    for _f in "$@"; do
        [ -f "$_f" ] || { echo "SKIP(missing): fixture $_f missing (run make fixtures)"; exit 77; }
    done
}
need_tool() {
    case $1 in
        */*) [ -x "$1" ] ;;
        *) command -v "$1" >/dev/null ;;
    esac || { echo "SKIP(missing): $1 is not installed${2:+ ($2)}"; exit 77; }
}
need_node_module() {
    [ -d "node_modules/$1" ] || node -e 'require(process.argv[1])' "$1" 2>/dev/null ||
        { echo "SKIP(missing): node_modules/$1 missing (npm ci)"; exit 77; }
}

# Bounded waits for a server's stderr: START_TIMEOUT seconds (default 60, as
# sanitizer builds load slowly; a normal build takes well under a second).
# wait_log NAME PATTERN: until $T/NAME.log has a line matching PATTERN;
# fails the test (exit 1) with the log if PID_NAME exits or time runs out.
wait_log() {
    eval "_pid=\$PID_$1"
    _i=0
    while ! grep -qs "$2" "$T/$1.log"; do
        _i=$((_i + 1))
        if [ $_i -gt $((${START_TIMEOUT:-60} * 10)) ] || ! kill -0 "$_pid" 2>/dev/null; then
            echo "FAIL: server $1 never logged '$2':"; cat "$T/$1.log"; exit 1
        fi
        sleep 0.1
    done
}

# launch_server NAME ARGS...: `$KIPP serve --port 0 ARGS` in the background,
# stderr in $T/NAME.log; returns once it listens (the model may still be
# loading), with PORT_NAME and PID_NAME set.
launch_server() {
    _name=$1; shift
    "$KIPP" serve --port 0 "$@" 2>"$T/$_name.log" &
    PIDS="$PIDS $!"
    SERVERS="$SERVERS $_name"
    eval "PID_$_name=$!"
    wait_log "$_name" "listening on"
    eval "PORT_$_name=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/$_name.log")"
}

# start_server NAME ARGS...: launch_server, then wait until the model is
# loaded and requests are served ("kipp serve: ready").
start_server() {
    launch_server "$@"
    wait_log "$1" "^kipp serve: ready"
}

# stop_servers: SIGTERM every server still running and check that each one
# exits 0 within 30 s. A sanitizer build exits non-zero when it finds a leak
# at exit (LeakSanitizer: 23), so this is where a server's leaks fail a
# test; its log's tail says why.
stop_servers() {
    for _n in $SERVERS; do
        eval "_pid=\$PID_$_n"
        kill -0 "$_pid" 2>/dev/null || continue
        kill -TERM "$_pid"
        _i=0
        while kill -0 "$_pid" 2>/dev/null && [ $_i -lt 300 ]; do sleep 0.1; _i=$((_i + 1)); done
        if kill -0 "$_pid" 2>/dev/null; then
            bad "server $_n still running 30 s after SIGTERM"; kill -9 "$_pid"
        fi
        wait "$_pid"; _rc=$?
        [ $_rc -eq 0 ] || { bad "server $_n: exit status $_rc after SIGTERM"; tail -n 40 "$T/$_n.log"; }
    done
}
