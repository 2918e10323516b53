#!/bin/sh
# What the tests need beyond the compiler, set up so that `make test` on a
# fresh clone is the whole set-up (`make test-deps`; .ci/run runs the same).
#
#   sh tools/test_deps.sh node    node_modules from the committed
#                                 package-lock.json (npm ci), when it is
#                                 missing or older than the lock file and
#                                 its packages differ from the lock file's
#   sh tools/test_deps.sh debian  Debian packages whose files or tools the
#                                 tests use; apt-get install when root,
#                                 otherwise says what to install
#
# Either never fails for a package it cannot install: the tests that need it
# then skip with kind "missing" (tests/run.sh), which fails a CI=true run.
set -u
cd "$(dirname "$0")/.." || exit 1

node_deps() {
    if ! command -v npm >/dev/null 2>&1; then
        echo "test-deps: npm not found; tests that use node packages will skip (install Node.js with npm)"
        return 0
    fi
    if [ -f node_modules/.package-lock.json ]; then
        # npm ci writes node_modules/.package-lock.json last. Newer than the
        # lock file: up to date. Older (a fresh checkout touches the lock
        # file): compare versions, so that an unchanged lock file does not
        # reinstall 800 MB.
        [ -n "$(find node_modules/.package-lock.json -newer package-lock.json)" ] && return 0
        if node -e '
            const want = require("./package-lock.json").packages;
            const have = require("./node_modules/.package-lock.json").packages;
            for (const [k, v] of Object.entries(want)) {
                if (!k) continue;
                const h = have[k];
                if (h ? h.version !== v.version : !v.optional) process.exit(1);
            }
            for (const k of Object.keys(have)) if (!(k in want)) process.exit(1);
        ' 2>/dev/null; then
            return 0
        fi
        echo "test-deps: node_modules differs from package-lock.json"
    else
        echo "test-deps: node_modules missing"
    fi
    echo "test-deps: npm ci --no-audit --no-fund (from the committed package-lock.json)"
    npm ci --no-audit --no-fund || {
        echo "test-deps: npm ci failed; tests that use node packages will skip"
        return 0
    }
}

# package: what the tests read from it (checked by the file or tool itself,
# so that a non-Debian system that has them passes too).
debian_deps() {
    need=""
    [ -r /usr/share/unicode/NormalizationTest.txt.bz2 ] && [ -r /usr/share/unicode/DerivedAge.txt ] ||
        need="$need unicode-data"
    command -v bzcat >/dev/null 2>&1 || need="$need bzip2"
    /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need="$need python3-numpy"
    command -v curl >/dev/null 2>&1 || need="$need curl"
    command -v pkg-config >/dev/null 2>&1 || need="$need pkgconf"
    command -v nm >/dev/null 2>&1 || need="$need binutils"
    command -v promtool >/dev/null 2>&1 || need="$need prometheus"
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need="$need nginx"
    [ -z "$need" ] && return 0
    why="unicode-data: NormalizationTest.txt.bz2 and DerivedAge.txt (tokenizer tests);"
    why="$why bzip2: bzcat; python3-numpy: the FP64 reference; curl: server and download tests;"
    why="$why pkgconf, binutils: the installed-library test; prometheus: promtool checks"
    why="$why /metrics; nginx: the two-replica test"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "test-deps: apt-get install$need"
        export DEBIAN_FRONTEND=noninteractive
        # A fresh machine may have no package lists yet; an update failure
        # (offline) still lets the install use whatever lists there are.
        apt-get update -q >/dev/null 2>&1 || true
        # shellcheck disable=SC2086 # word splitting of the list is meant
        if apt-get install -y -q --no-install-recommends $need >/dev/null; then return 0; fi
        echo "test-deps: apt-get install$need failed ($why)"
    else
        echo "test-deps: missing Debian packages:$need ($why)."
        echo "test-deps: install them as root: apt-get install$need"
    fi
    echo "test-deps: the tests that need them will skip (kind 'missing'; a CI=true run fails)"
}

case "${1:-}" in
    node) node_deps ;;
    debian) debian_deps ;;
    *) echo "usage: $0 node|debian" >&2; exit 2 ;;
esac
