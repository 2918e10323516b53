#!/bin/sh
# Builds llama.cpp's own tools natively for this CPU, for measurement only.
#
# The source is the git bundle that node-llama-cpp ships
# (node_modules/node-llama-cpp/llama/gitRelease.bundle: the llama.cpp release
# node-llama-cpp was built from). It is cloned and built OUTSIDE this repo, in
# a cache folder keyed by the bundle's commit, the CPU model and its flags,
# so a rerun on the same machine is instant and a different CPU gets its own
# build (GGML_NATIVE=ON compiles for the build machine's ISA). Nothing of
# llama.cpp is ever committed here.
#
#   sh bench/build_llama_native.sh            # prints the bin/ folder
#   LLAMA_NATIVE_CACHE=/path sh bench/...     # cache root (default /work/cache
#                                             #   if writable, else build/cache)
#   LLAMA_ISA=avx2 sh bench/build_llama_native.sh
#       # an AVX2 + FMA + F16C build (GGML_NATIVE=OFF, no AVX-512): llama.cpp
#       # at its best on a Zen 3-class tier, to race kipp's avx2 tier on an
#       # AVX-512 machine (bench_native.mjs --llama-bin DIR --kipp-isa avx2);
#       # cached under its own folder (suffix -avx2)
#
# Tools built: llama-bench, llama-server, llama-speculative, llama-lookup,
# llama-cli. A lock serialises concurrent callers.
set -eu
cd "$(dirname "$0")/.."
bundle=node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] || { echo "build_llama_native: $bundle missing (run npm ci)" >&2; exit 2; }
command -v cmake >/dev/null || { echo "build_llama_native: cmake missing (apt-get install cmake)" >&2; exit 2; }

if [ -n "${LLAMA_NATIVE_CACHE:-}" ]; then root=$LLAMA_NATIVE_CACHE
elif mkdir -p /work/cache 2>/dev/null && [ -w /work/cache ]; then root=/work/cache
else root=$PWD/build/cache; fi
commit=$(git bundle list-heads "$bundle" | head -n 1 | cut -c1-12)
# The model name alone does not tell machines apart here (every AMD VM reads
# "AMD EPYC", Zen 4 and Zen 5 alike), and a native build for one may use
# instructions the other lacks: key on family and model too.
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/[^A-Za-z0-9]/_/g')
fam=$(grep -m1 '^cpu family' /proc/cpuinfo | sed 's/.*: //')
mdl=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | sed 's/.*: //')
# Nor do family and model: the same Xeon model has come with AVX512_BF16
# passed through by its hypervisor and without it, and a build for the
# first would fault on the second. Key on a checksum of the flags too.
flags=$(grep -m1 '^flags' /proc/cpuinfo | sed 's/.*: //' | tr ' ' '\n' | sort | tr '\n' ' ')
fsum=$(printf '%s' "$flags" | cksum | cut -d' ' -f1)
cpu=${cpu}_f${fam:-x}m${mdl:-x}_$fsum
isa=${LLAMA_ISA:-native}
case $isa in
native) dir=$root/llama-native-$commit-$cpu
        isa_flags="-DGGML_NATIVE=ON" ;;
avx2)   dir=$root/llama-native-$commit-$cpu-avx2
        isa_flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF" ;;
*)      echo "build_llama_native: LLAMA_ISA must be native or avx2, got '$isa'" >&2; exit 2 ;;
esac
mkdir -p "$root"

exec 9>"$root/llama-native.lock"
flock 9
if [ -x "$dir/bin/llama-bench" ] && [ -x "$dir/bin/llama-server" ]; then
    echo "$dir/bin"; exit 0
fi
rm -rf "$dir.src" "$dir.build"
git clone -q "$bundle" "$dir.src" >&2
git -C "$dir.src" checkout -q "$(git bundle list-heads "$bundle" | head -n 1 | cut -d' ' -f1)" >&2
# shellcheck disable=SC2086 # isa_flags is a list of words
cmake -S "$dir.src" -B "$dir.build" -DCMAKE_BUILD_TYPE=Release $isa_flags \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$dir.build" -j "$(nproc)" --target llama-bench llama-server \
      llama-speculative llama-lookup llama-cli >&2
mkdir -p "$dir/bin"
for t in llama-bench llama-server llama-speculative llama-lookup llama-cli; do
    cp "$dir.build/bin/$t" "$dir/bin/"
done
{ git -C "$dir.src" log -1 --format='%H %s'; echo "isa: $isa ($isa_flags)"; } > "$dir/SOURCE"
rm -rf "$dir.src" "$dir.build"
echo "$dir/bin"
