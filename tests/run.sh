#!/bin/sh
# Runs every test: C unit binaries (build/tests/test_*), then shell/node
# scripts (tests/scripts/test_*.sh), each with its log in $BUILD/test-logs
# (test-logs-KIPP_CPU_ISA when that is set, so make test-tiers keeps both).
#
# A test passes (exit 0), fails, or is skipped whole (exit 77). Skips are
# never passes, and each one says why in one line of its log:
#   SKIP(KIND): REASON               the whole test (with exit 77)
#   SKIP-PART(KIND): PART: REASON    one part of a test that otherwise ran
# Each skipped test and each skipped part (once per test) counts as one skip
# and is named in the summary. KIND says whether the machine explains it:
#   machine  the processor lacks a feature (e.g. avx512), or KIPP_CPU_ISA
#            asks to run as if it did;
#   missing  a file, package or tool the set-up provides (make test-deps,
#            npm ci, make fixtures) is absent. A skip that does not say its
#            kind counts as missing.
# Under CI=true a missing skip fails the run; machine skips are allowed and
# named. Ends with the line "N passed, N failed, N skipped".
#
# KIPP_TEST_ONLY="test_a test_b.sh" runs only those tests (while working on
# them); the summary then says how many were left out.
BUILD=${BUILD:-build}
export BUILD
KIPP=${KIPP:-$BUILD/kipp}
export KIPP
LOGDIR=$BUILD/test-logs${KIPP_CPU_ISA:+-$KIPP_CPU_ISA}
# A sanitizer build (KIPP_TEST_SAN set: make test-sanitize / test-tsan)
# runs several times slower; every bound widens by one factor, exported so
# that a test's own inner bounds widen with the runner's.
KIPP_TEST_TIME_SCALE=1
[ -n "${KIPP_TEST_SAN:-}" ] && KIPP_TEST_TIME_SCALE=4
export KIPP_TEST_TIME_SCALE
TEST_TIMEOUT=${KIPP_TEST_TIMEOUT:-$((1200 * KIPP_TEST_TIME_SCALE))}
mkdir -p "$LOGDIR"
SKIPS=$LOGDIR/skips.tsv # kind, part ("-" for a whole test), reason, test
: >"$SKIPS"
passed=0; failed=0; skipped=0; failed_names=""; left_out=0

# The cpu tier every cpu-backend test runs at by default, as auto picks it
# (never the opt-in avx512bf16; tests that loop over tiers run every one
# the processor has, avx512bf16 included, up to KIPP_CPU_ISA's when set).
# From /proc/cpuinfo, for the log only: the kernels choose with CPUID
# (src/cpu/dispatch.c).
best_tier() {
    f=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
    has() { case " $f " in *" $1 "*) return 0 ;; esac; return 1; }
    if has avx512f && has avx512bw && has avx512vl && has avx512dq &&
       has avx2 && has fma && has f16c; then echo avx512
    elif has avx2 && has fma && has f16c; then echo avx2
    else echo generic; fi
}
if [ -n "$KIPP_CPU_ISA" ]; then
    TIER_NOTE="cpu kernels: KIPP_CPU_ISA=$KIPP_CPU_ISA (forced; auto here: $(best_tier))"
else
    TIER_NOTE="cpu kernels: $(best_tier) (auto: this processor's best exact tier; KIPP_CPU_ISA unset)"
fi
echo "$TIER_NOTE"

run_one() {
    name=$1; shift
    if [ -n "${KIPP_TEST_ONLY:-}" ]; then
        case " $KIPP_TEST_ONLY " in
            *" $name "*) ;;
            *) left_out=$((left_out + 1)); return ;;
        esac
    fi
    log=$LOGDIR/$name.log
    start=$(date +%s)
    echo "# $TIER_NOTE" >"$log"
    # A hung test is a failure, not a stalled CI run.
    timeout -k 10 "$TEST_TIMEOUT" "$@" >>"$log" 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "(timed out after ${TEST_TIMEOUT}s)" >>"$log"
    secs=$(( $(date +%s) - start ))
    # Skipped parts, once per (part, reason) however often a test printed it.
    parts=$(sed -n 's/^SKIP-PART(\([a-z]*\)): \([^:]*\): \(.*\)$/\1\t\2\t\3/p' "$log" | sort -u)
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        if [ -n "$parts" ]; then
            printf '%s\n' "$parts" | sed "s/\$/\t$name/" >>"$SKIPS"
            n=$(printf '%s\n' "$parts" | wc -l)
            skipped=$((skipped + n))
            echo "PASS  $name (${secs}s; skipped parts: $(printf '%s\n' "$parts" | cut -f2 | paste -sd, -))"
        else
            echo "PASS  $name (${secs}s)"
        fi
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1))
        line=$(grep '^SKIP(\(machine\|missing\)): ' "$log" | tail -n 1)
        if [ -n "$line" ]; then
            kind=$(printf '%s' "$line" | sed 's/^SKIP(\([a-z]*\)): .*/\1/')
            why=$(printf '%s' "$line" | sed 's/^SKIP([a-z]*): //')
        else
            kind=missing; why=$(tail -n 1 "$log")
        fi
        printf '%s\t-\t%s\t%s\n' "$kind" "$why" "$name" >>"$SKIPS"
        echo "SKIP  $name ($kind): $why"
    else
        failed=$((failed + 1)); failed_names="$failed_names $name"
        echo "FAIL  $name (exit $rc, ${secs}s); last lines of $log:"
        tail -n 25 "$log" | sed 's/^/    /'
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

# Every skip by name: one line per (part, reason), with the tests it hit.
if [ -s "$SKIPS" ]; then
    sort "$SKIPS" | awk -F'\t' '
        { key = $1 "\t" $2 "\t" $3
          if (key in seen) tests[key] = tests[key] ", " $4
          else { seen[key] = 1; tests[key] = $4; order[++n] = key } }
        END { for (i = 1; i <= n; i++) { split(order[i], k, "\t")
                if (k[2] == "-") printf "skipped: %s (%s) [%s]\n", tests[order[i]], k[3], k[1]
                else printf "skipped: %s (%s) [%s; %s]\n", k[2], k[3], k[1], tests[order[i]] } }'
fi
missing=$(awk -F'\t' '$1 != "machine"' "$SKIPS" | wc -l)
[ -n "$failed_names" ] && echo "failed:$failed_names"
[ $left_out -gt 0 ] && echo "KIPP_TEST_ONLY: $left_out tests not run (not a full run)"
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$CI" = true ] && [ "$missing" -gt 0 ]; then
    echo "CI=true: $missing skip(s) above are not explained by the machine (kind 'missing');" \
         "run make test-deps, npm ci and make fixtures, or fix the test"
    exit 1
fi
[ $failed -eq 0 ]
