# Sourced by the server test scripts (not a test: no test_ prefix): a scratch
# directory $T, the server pids in $PIDS killed and reaped on exit, and
# bad() to record a failed check in $fail.
T=$(mktemp -d)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
bad() { echo "FAIL: $*"; fail=1; }
