#!/bin/sh
# bench/membw.c, the read-bandwidth tool behind bench_native.mjs's decode
# rooflines: --file reads a model file's own pages (the whole file, one
# JSON record with its byte count and positive rates), and bad arguments
# or an unreadable file are refused by name with a nonzero exit.
BUILD=${BUILD:-build}
MODEL=$BUILD/models/synthetic-tiny.gguf
if [ ! -f "$MODEL" ]; then echo "FAIL: $MODEL missing (make fixtures builds it)"; exit 1; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
if ! cc -O2 -pthread -Wall -Wextra -Werror bench/membw.c -o "$T/membw" 2>"$T/cc"; then
    echo "FAIL: bench/membw.c does not build: $(head -c 400 "$T/cc")"
    exit 1
fi
for t in 1 2; do
    if ! "$T/membw" $t --file "$MODEL" >"$T/out" 2>"$T/err"; then
        bad "membw $t --file: exit $? ($(head -c 200 "$T/err"))"
        continue
    fi
    /usr/bin/python3 - "$T/out" "$MODEL" "$t" <<'PY' || fail=1
import json, os, sys
rec = json.loads(open(sys.argv[1]).read())
size = os.path.getsize(sys.argv[2])
ok = (rec.get("threads") == int(sys.argv[3]) and rec.get("bytes") == size
      and all(rec.get(k, 0) > 0 for k in ("read_gb_per_s", "seq_gb_per_s", "rows8_gb_per_s"))
      and rec["read_gb_per_s"] == max(rec["seq_gb_per_s"], rec["rows8_gb_per_s"]))
if not ok:
    print("FAIL: membw --file: bad record %s (file of %d bytes)" % (rec, size))
sys.exit(0 if ok else 1)
PY
done
: >"$T/small"
for args in "0" "65" "2x" "--file" "--bogus" "1 --file $T/no-such-file" "2 --file $T/small"; do
    # shellcheck disable=SC2086
    "$T/membw" $args >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 0 ]; then bad "membw $args: accepted"; continue; fi
    case "$args" in
    *--file\ *) want="cannot read" ;;
    *) want="bad argument" ;;
    esac
    grep -q "$want" "$T/err" || bad "membw $args: exit $rc without '$want' ($(head -c 200 "$T/err"))"
done
[ $fail -eq 0 ] && echo "PASS test_membw.sh"
exit $fail
