#!/bin/sh
# libkipp as a user gets it (issue 14):
#  - the library's symbols: libkipp.so exports exactly the functions
#    include/kipp.h declares KIPP_API (nm -D), soname libkipp.so.MAJOR,
#    needs only libc/libm/pthreads; every global in libkipp.a is kipp_*;
#    the library reads no environment and does not depend on src/convert;
#  - `make install PREFIX=$tmp` lays out bin, lib, include, pkgconfig;
#  - examples/generate.c built with `pkg-config --cflags --libs kipp` against
#    the installed shared library, and linked statically (pkg-config
#    --static, libkipp.a), streams the same greedy tokens and text as
#    `kipp generate` on synthetic-tiny;
#  - DESTDIR staging and `make uninstall` remove what install wrote.
# Needs pkg-config (or pkgconf), nm and readelf; skips (77) naming the one
# that is missing.
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
CC=${KIPP_TEST_CC:-${CC:-cc}}
SANFLAGS=${KIPP_TEST_SANFLAGS:-}
M=$BUILD/models/synthetic-tiny.gguf
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -f "$M" ]; then echo "SKIP(missing): fixture $M missing (run make fixtures)"; exit 77; fi
PKG=$(command -v pkg-config || command -v pkgconf)
[ -n "$PKG" ] || { echo "SKIP(missing): pkg-config (or pkgconf) not installed: apt-get install pkgconf"; exit 77; }
for tool in nm readelf; do
    command -v $tool >/dev/null || { echo "SKIP(missing): $tool not installed (binutils)"; exit 77; }
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# The build's own make, not the caller's job server or flags.
mk() { env -u MAKEFLAGS -u MFLAGS make -s -C "$ROOT" BUILD="$BUILD" CC="$CC" \
       SAN="${KIPP_TEST_SAN:-}" "$@"; }

VERSION=$(sed -n 's/^#define KIPP_VERSION_STRING "\(.*\)"/\1/p' "$ROOT/include/kipp.h")
MAJOR=${VERSION%%.*}
echo "version $VERSION"

# ---- symbols of the built library --------------------------------------
SO=$BUILD/libkipp.so.$VERSION
[ -f "$SO" ] || { bad "$SO not built"; exit 1; }
sed -n 's/^KIPP_API[^(]*[^a-z0-9_]\(kipp_[a-z0-9_]*\)(.*/\1/p' "$ROOT/include/kipp.h" |
    sort -u >"$T/declared"
nm -D --defined-only "$SO" | awk '$2 ~ /^[TDBRVWi]$/ {print $3}' | sort -u >"$T/exported"
[ "$(wc -l <"$T/declared")" -ge 40 ] || bad "parsed only $(wc -l <"$T/declared") KIPP_API functions from kipp.h"
# Every prototype at the header's top level (not a comment, directive,
# typedef or indented continuation) must carry KIPP_API.
grep -v '^ \|^/\*\|^#\|^typedef\|^}' "$ROOT/include/kipp.h" |
    sed -n 's/^[^(]*[^a-z0-9_]\(kipp_[a-z0-9_]*\)(.*/\1/p' | sort -u >"$T/prototypes"
cmp -s "$T/prototypes" "$T/declared" ||
    bad "kipp.h declares functions without KIPP_API: $(comm -23 "$T/prototypes" "$T/declared" | tr '\n' ' ')"
if ! cmp -s "$T/declared" "$T/exported"; then
    bad "libkipp.so exports differ from kipp.h's KIPP_API functions (< declared only, > exported only):"
    diff "$T/declared" "$T/exported" | grep '^[<>]'
fi
echo "exported: $(wc -l <"$T/exported") symbols, all declared in kipp.h"
readelf -d "$SO" | grep -q "SONAME.*\[libkipp\.so\.$MAJOR\]" || bad "soname is not libkipp.so.$MAJOR"
if [ -z "$SANFLAGS" ]; then
    needed=$(readelf -d "$SO" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    for lib in $needed; do
        case $lib in libc.so.*|libm.so.*|libpthread.so.*) ;; *) bad "libkipp.so needs $lib" ;; esac
    done
fi
# Every global the archive defines is kipp_-prefixed: nothing collides with
# ggml, gguf or json symbols of a library linked next to it. (Sanitizer
# builds add their own __odr_asan.* / __asan* markers; those are not ours.)
others=$(nm -g --defined-only "$BUILD/libkipp.a" | awk 'NF == 3 {print $3}' |
         grep -v -e '^kipp_' -e '^__odr_asan' -e '^__asan' -e '^__ubsan' -e '^__tsan' | sort -u)
[ -z "$others" ] || bad "libkipp.a defines globals without the kipp_ prefix: $others"
nm -u "$BUILD/libkipp.a" | grep -qw -e getenv -e secure_getenv && bad "libkipp.a calls getenv"
grep -rn 'getenv' "$ROOT"/src/core "$ROOT"/src/ref "$ROOT"/src/cpu "$ROOT"/src/backends.c &&
    bad "library sources read the environment"
grep -rln '"convert/' "$ROOT"/src/core "$ROOT"/src/ref "$ROOT"/src/cpu "$ROOT"/src/backends.c "$ROOT"/src/backend.h &&
    bad "the library includes the converter"

# ---- install into a temporary prefix --------------------------------------
P=$T/prefix
mk install PREFIX="$P" >"$T/install.log" 2>&1 || { cat "$T/install.log"; bad "make install failed"; exit 1; }
for f in bin/kipp lib/libkipp.a lib/libkipp.so lib/libkipp.so.$MAJOR lib/libkipp.so.$VERSION \
         include/kipp.h lib/pkgconfig/kipp.pc; do
    [ -e "$P/$f" ] || bad "install did not write $f"
done
[ "$(readlink "$P/lib/libkipp.so")" = "libkipp.so.$MAJOR" ] || bad "libkipp.so -> $(readlink "$P/lib/libkipp.so")"
[ "$(readlink "$P/lib/libkipp.so.$MAJOR")" = "libkipp.so.$VERSION" ] || bad "libkipp.so.$MAJOR link"
cmp -s "$P/bin/kipp" "$KIPP" || bad "installed bin/kipp differs from $KIPP"
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
[ "$("$PKG" --modversion kipp)" = "$VERSION" ] || bad "pkg-config --modversion: $("$PKG" --modversion kipp)"

# ---- the example, shared and static ----------------------------------------
CFLAGS_EX="-std=c11 -Wall -Wextra -Werror $SANFLAGS"
# shellcheck disable=SC2046 # pkg-config output is a word list on purpose
$CC $CFLAGS_EX "$ROOT/examples/generate.c" $("$PKG" --cflags --libs kipp) -o "$T/gen_shared" ||
    bad "example does not build against the installed libkipp.so"
# -l:libkipp.a picks the archive even though libkipp.so sits beside it.
# shellcheck disable=SC2046
$CC $CFLAGS_EX "$ROOT/examples/generate.c" $("$PKG" --cflags kipp) \
    $("$PKG" --static --libs kipp | sed 's/-lkipp\b/-l:libkipp.a/') -o "$T/gen_static" ||
    bad "example does not build against the installed libkipp.a"
readelf -d "$T/gen_shared" 2>/dev/null | grep -q "NEEDED.*\[libkipp\.so\.$MAJOR\]" ||
    bad "gen_shared is not linked to libkipp.so.$MAJOR"
readelf -d "$T/gen_static" 2>/dev/null | grep -q "NEEDED.*libkipp" && bad "gen_static needs libkipp.so"

PROMPT="The quick brown fox"
N=20
env -u KIPP_CPU_ISA "$KIPP" generate -m "$M" -p "$PROMPT" -n $N --print-ids >"$T/ref_ids" 2>/dev/null ||
    bad "kipp generate --print-ids failed"
env -u KIPP_CPU_ISA "$KIPP" generate -m "$M" -p "$PROMPT" -n $N >"$T/ref_text" 2>/dev/null ||
    bad "kipp generate failed"
echo "kipp generate: $(cat "$T/ref_ids")"
for kind in shared static; do
    LD_LIBRARY_PATH="$P/lib" "$T/gen_$kind" "$M" "$PROMPT" $N >"$T/$kind.text" 2>"$T/$kind.err" ||
        { bad "$kind example failed:"; cat "$T/$kind.err"; continue; }
    sed -n 's/^ids: //p' "$T/$kind.err" >"$T/$kind.ids"
    cmp -s "$T/$kind.ids" "$T/ref_ids" || bad "$kind example ids $(cat "$T/$kind.ids") differ from kipp generate"
    cmp -s "$T/$kind.text" "$T/ref_text" || bad "$kind example text differs from kipp generate"
    grep -q "^libkipp $VERSION: load .* tok/s" "$T/$kind.err" || bad "$kind example timing line: $(tail -n 1 "$T/$kind.err")"
    grep -q "random weights" "$T/$kind.err" || bad "$kind example: no random-weights notice"
    echo "$kind example: $(tail -n 1 "$T/$kind.err")"
done

# ---- uninstall; DESTDIR staging --------------------------------------------
mk uninstall PREFIX="$P" >/dev/null 2>&1 || bad "make uninstall failed"
left=$(find "$P" ! -type d)
[ -z "$left" ] || bad "uninstall left: $left"
mk install DESTDIR="$T/stage" PREFIX=/opt/kipp >/dev/null 2>&1 || bad "make install DESTDIR failed"
[ -f "$T/stage/opt/kipp/include/kipp.h" ] || bad "DESTDIR install missing include/kipp.h"
grep -q '^prefix=/opt/kipp$' "$T/stage/opt/kipp/lib/pkgconfig/kipp.pc" ||
    bad "staged kipp.pc does not name PREFIX: $(head -n 1 "$T/stage/opt/kipp/lib/pkgconfig/kipp.pc")"
mk uninstall DESTDIR="$T/stage" PREFIX=/opt/kipp >/dev/null 2>&1 || bad "make uninstall DESTDIR failed"
left=$(find "$T/stage" ! -type d)
[ -z "$left" ] || bad "DESTDIR uninstall left: $left"

[ $fail -eq 0 ] && echo "ok"
exit $fail
