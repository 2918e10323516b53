#!/bin/sh
# Runs every test: C unit binaries (build/tests/test_*), then shell/node
# scripts (tests/scripts/test_*.sh). Each test is one pass or one fail; a
# script exiting 77 counts as skipped and is reported as such, never as a
# pass. Ends with the line "N passed, N failed, N skipped".
BUILD=${BUILD:-build}
export BUILD
KIPP=${KIPP:-$BUILD/kipp}
export KIPP
LOGDIR=$BUILD/test-logs
TEST_TIMEOUT=${KIPP_TEST_TIMEOUT:-1200}
mkdir -p "$LOGDIR"
passed=0; failed=0; skipped=0; failed_names=""

run_one() {
    name=$1; shift
    start=$(date +%s)
    # A hung test is a failure, not a stalled CI run.
    timeout -k 10 "$TEST_TIMEOUT" "$@" >"$LOGDIR/$name.log" 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "(timed out after ${TEST_TIMEOUT}s)" >>"$LOGDIR/$name.log"
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS  $name (${secs}s)"
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); echo "SKIP  $name: $(tail -n 1 "$LOGDIR/$name.log")"
    else
        failed=$((failed + 1)); failed_names="$failed_names $name"
        echo "FAIL  $name (exit $rc, ${secs}s); last lines of $LOGDIR/$name.log:"
        tail -n 25 "$LOGDIR/$name.log" | sed 's/^/    /'
    fi
}

for t in "$BUILD"/tests/test_*; do
    case "$t" in *.d) continue ;; esac
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for s in tests/scripts/test_*.sh; do
    [ -f "$s" ] || continue
    run_one "$(basename "$s")" sh "$s"
done

[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
