#!/bin/sh
# Citations of doc sections (docs/NAME.md "Heading") resolve: first the
# checker on a made-up tree, where it must pass the good citations and
# name the bad ones, then on this checkout (tests/scripts/doc_refs.mjs);
# and docs/ARCHITECTURE.md's index of the journal lists its entries.
set -e
command -v node >/dev/null 2>&1 || { echo "SKIP(missing): node not found (make test-deps)"; exit 77; }
T=${BUILD:-build}/tmp-doc-refs
rm -rf "$T"; mkdir -p "$T/docs" "$T/src"
cat >"$T/docs/GUIDE.md" <<'MD'
# Guide
## Sessions and KV: the pool
**Stop 70 (a machine): exp gives 0.** Text.
- **Layout.** Text.
MD
cat >"$T/src/good.c" <<'C'
/* see docs/GUIDE.md "Sessions and KV"; docs/GUIDE.md, "Stop 70" and
 * "Layout"; wrapped: docs/GUIDE.md "Sessions
 * and KV". */
C
node tests/scripts/doc_refs.mjs "$T" >"$T/out" || { cat "$T/out"; echo "FAIL: good citations refused"; exit 1; }
grep -q "4 citations of docs/\*.md sections, 0 unresolved" "$T/out" || { cat "$T/out"; echo "FAIL: expected 4 resolved citations"; exit 1; }
cat >"$T/src/bad.c" <<'C'
/* docs/GUIDE.md "Stop 7"; docs/GUIDE.md "Stop 71"; docs/MISSING.md "Any" */
C
if node tests/scripts/doc_refs.mjs "$T" >"$T/out"; then cat "$T/out"; echo "FAIL: bad citations passed"; exit 1; fi
grep -q 'bad.c:1: docs/GUIDE.md has no section "Stop 7"' "$T/out" &&
    grep -q 'bad.c:1: docs/GUIDE.md has no section "Stop 71"' "$T/out" &&
    grep -q 'bad.c:1: docs/MISSING.md does not exist' "$T/out" ||
    { cat "$T/out"; echo "FAIL: a bad citation was not named"; exit 1; }
echo "checker: good citations pass, each bad one named"
node tests/scripts/doc_refs.mjs .
# docs/ARCHITECTURE.md indexes the journal: one line per entry, in order.
index=$(awk '/^\*\*The journal.s index/{f=1;next} /^### /{f=0} f && /^- /' docs/ARCHITECTURE.md | sed 's/^- //; s/\.$//')
heads=$(grep '^## ' docs/CPU-JOURNAL.md | sed 's/^## //')
if [ "$index" != "$heads" ]; then
    echo "FAIL: docs/ARCHITECTURE.md's journal index and docs/CPU-JOURNAL.md's entries differ:"
    printf '%s\n' "$index" >"$T/index"; printf '%s\n' "$heads" >"$T/heads"
    diff "$T/index" "$T/heads"
    exit 1
fi
echo "journal index: $(printf '%s\n' "$heads" | wc -l) entries, the same as docs/CPU-JOURNAL.md's headings"
