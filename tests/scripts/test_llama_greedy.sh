#!/bin/sh
# Agreement with llama.cpp (node-llama-cpp, via tools/llama_peer.mjs) on the
# same artifact: the greedy continuation of a few prompts on synthetic-tiny
# is the same token sequence. llama_peer does not stop at end-of-generation
# tokens and kipp does, so llama.cpp's sequence is cut after its first stop
# token (151643 for this base entry) before comparing.
BUILD=${BUILD:-build}
KIPP=${KIPP:-$BUILD/kipp}
M=$BUILD/models/synthetic-tiny.gguf
N=16
if [ ! -f "$M" ]; then echo "SKIP(missing): fixture $M missing (run make fixtures)"; exit 77; fi
if ! command -v node >/dev/null || [ ! -d node_modules/node-llama-cpp ]; then
    echo "SKIP(missing): node or node_modules/node-llama-cpp missing (npm ci)"; exit 77
fi
fail=0
# Short text-like ids; one with chat special tokens; one of 40 tokens that
# crosses a 32-position KV block.
LONG=$(seq 1000 1039 | awk '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % 150000 }')
for P in 9707,11,847,829,374 151644,872,198,9707,151645,198,151644,77091,198 "$LONG"; do
    want=$(node tools/llama_peer.mjs greedy "$M" --tokens "$P" -n $N 2>/dev/null | tr -d '[] \n' |
           awk -F, '{o=""; for(i=1;i<=NF;i++){o=o (i>1?",":"") $i; if($i==151643) break} print o}')
    got=$("$KIPP" generate -m "$M" --tokens "$P" -n $N --temperature 0 --print-ids 2>/dev/null)
    if [ -z "$want" ]; then
        echo "FAIL: llama_peer gave no tokens for prompt $P"; fail=1
    elif [ "$want" != "$got" ]; then
        echo "FAIL: prompt $P"; echo "  llama.cpp: $want"; echo "  kipp:      $got"; fail=1
    else
        echo "ok: prompt ${P%%,*}... -> $got"
    fi
done
exit $fail
