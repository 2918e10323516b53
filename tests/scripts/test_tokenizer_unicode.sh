#!/bin/sh
# The pre-tokenizer's character classes against the regex engine the golden
# reference runs on: node classifies every code point with /\p{L}/u,
# /\p{N}/u and /\s/u (transformers.js compiles the split pattern as a JS
# RegExp with the u flag), and build/tests/test_tokenizer_unicode compares
# that with the generated table on every code point assigned in our UCD
# version (/usr/share/unicode/DerivedAge.txt). Node may know a newer Unicode
# (see tests/vectors/tokenizer/manifest.json); newer code points are skipped.
# Also regenerates src/core/unicode_tables.c and requires it to be identical.
set -u
BUILD=${BUILD:-build}
BIN=$BUILD/tests/test_tokenizer_unicode
OUTF=$BUILD/tmp-tokenizer-unicode/js_classes.bin
command -v node > /dev/null || { echo "SKIP(missing): node not installed"; exit 77; }
[ -r /usr/share/unicode/DerivedAge.txt ] || { echo "SKIP(missing): no /usr/share/unicode/DerivedAge.txt (unicode-data)"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
mkdir -p "$(dirname "$OUTF")"
node -e '
const fs = require("fs");
const age = fs.readFileSync("/usr/share/unicode/DerivedAge.txt", "utf8");
const out = Buffer.alloc(0x110000, "x".charCodeAt(0));
const L = /^\p{L}$/u, N = /^\p{N}$/u, S = /^\s$/u;
for (const line of age.split("\n")) {
  const body = line.split("#")[0].trim();
  if (!body) continue;
  const [lo, hi] = body.split(";")[0].trim().split("..").map((x) => parseInt(x, 16));
  for (let c = lo; c <= (hi ?? lo); c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const s = String.fromCodePoint(c);
    out[c] = (L.test(s) ? "L" : N.test(s) ? "N" : S.test(s) ? "S" : "O").charCodeAt(0);
  }
}
fs.writeFileSync(process.argv[1], out);
' "$OUTF" || { echo "FAIL: node could not classify code points"; exit 1; }
KIPP_JS_CLASSES=$OUTF "$BIN" || exit 1
# the committed tables are exactly what the generator makes from this UCD
if ! python3 tools/gen_unicode_tables.py | cmp -s - src/core/unicode_tables.c; then
    echo "FAIL: src/core/unicode_tables.c differs from tools/gen_unicode_tables.py output"
    exit 1
fi
echo "unicode_tables.c: regenerated, identical"
