#!/usr/bin/env bash
# The CUDA backend's tests and benchmarks in one call on a GPU machine:
#   bash bench/gpu/run.sh            # on the GPU machine; results under $OUT (or ./bench-gpu-out)
#
# The device machine has CMake and nvcc but not this project's Debian libraries (PCRE2, Catch2, CLI11), so the
# binaries are built on the development machine and carried along:
#   bash bench/gpu/run.sh --build-only    # here: builds build-gpu/{bin,lib} for sm_90 and stages the fixtures
#   device tool: command "bash bench/gpu/run.sh", carry ["build-gpu/bin", "build-gpu/lib", "build-gpu/fixtures"]
# When build-gpu/bin is missing, the script builds first (where the machine can).
#
# What it runs, in order (a failure is reported and the rest still runs; the exit status is the tests'):
#   1. specula devices, nvidia-smi
#   2. specula_cuda_tests: kernels vs host loops, CUDA vs CPU parity on the fixture models, bit-identical tree
#      verification, lossless speculative decoding on CUDA, cancellation, the cache's rows; then
#      specula_backend_ops_tests: every registered backend (CUDA on this device) against the CPU, op by op
#   3. specula_api_tests "[speculative],[backend],[sessions],[snapshot]": the public API with the default backend (AUTO =
#      CUDA here), snapshots included
#   4. bench_draft_quality --backend cuda vs cpu on stories260K with its trained draft (speculative vs AR, one run each)
#   5. bench_cuda on a Llama-3.1-8B-shaped F16 synthetic model at 1K, 8K and 32K
#   6. Vulkan on the same card (when the build has it and a Vulkan loader + driver are there: carry .gl with the
#      loader debs, see /work/.library/device/README.md): specula_vulkan_tests, then bench_backends on the 8B
#      shape: decode tokens/s and 16-node verification cost, CUDA against Vulkan against the CPU, in one run
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${SPECULA_GPU_BUILD:-build-gpu}
out=${OUT:-$root/bench-gpu-out}
mkdir -p "$out"

stage_fixtures() {
    local src=${SPECULA_FIXTURES_SRC:-$root/../shared/fixtures}
    mkdir -p "$build/fixtures/models" "$build/fixtures/tokenizer"
    for f in stories260K.gguf stories260K-L3.gguf synth-llama-gqa-f16.gguf synth-llama-q4_k_m.gguf; do
        [ -f "$src/models/$f" ] && cp -u "$src/models/$f" "$build/fixtures/models/"
    done
    [ -f "$src/tokenizer/ggml-vocab-llama-bpe.gguf" ] && cp -u "$src/tokenizer/ggml-vocab-llama-bpe.gguf" "$build/fixtures/tokenizer/"
    du -sh "$build/bin" "$build/lib" "$build/fixtures" 2>/dev/null
}

build_all() {
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPECULA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DSPECULA_VULKAN=AUTO \
        -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON || return 1
    local vulkan_targets=""
    cmake --build "$build" --target help 2>/dev/null | grep -q specula_vulkan_tests && vulkan_targets="specula_vulkan_tests"
    cmake --build "$build" -j"$(nproc)" --target specula_cli specula_cuda_tests specula_backend_ops_tests specula_api_tests bench_cuda bench_draft_quality \
        bench_backends $vulkan_targets || return 1
}

if [ "${1:-}" = "--build-only" ]; then
    build_all && stage_fixtures
    exit $?
fi
if [ ! -x "$build/bin/specula_cuda_tests" ]; then
    echo "== building ($build/bin is missing)"
    build_all || { echo "build failed"; exit 1; }
fi

# Fixtures: the carried copy, else ../shared beside the repository.
if [ -d "$build/fixtures/models" ]; then
    export SPECULA_FIXTURES_DIR=$root/$build/fixtures
else
    export SPECULA_FIXTURES_DIR=$root/../shared/fixtures
fi
export SPECULA_SOURCE_DIR=$root
# The API tests name the repository's models by the build machine's absolute path; point it here if it is absent.
built_root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
built_root=${built_root:-/work/main}
[ -e "$built_root" ] || { mkdir -p "$(dirname "$built_root")" 2>/dev/null && ln -s "$root" "$built_root" 2>/dev/null; } || true
status=0

echo "== devices"
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem,power.draw --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
"$build/bin/specula" devices | tee "$out/devices.txt"

echo "== CUDA tests"
"$build/bin/specula_cuda_tests" -r compact 2>&1 | tee "$out/cuda-tests.txt" | tail -25
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== backend ops: every registered backend against the CPU"
"$build/bin/specula_backend_ops_tests" -r compact 2>&1 | tee "$out/backend-ops.txt" | tail -5
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== API tests on the default backend"
"$build/bin/specula_api_tests" "[speculative],[backend],[sessions],[snapshot]" 2>&1 | tee "$out/api-tests.txt" | tail -5
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== speculative vs autoregressive, stories260K + its trained draft"
for backend in cuda cpu; do
    "$build/bin/bench_draft_quality" --backend $backend --model "$SPECULA_FIXTURES_DIR/models/stories260K.gguf" --workload stories \
        --draft trained=models/drafts/stories260K.longspec.gguf --files 4 -n 256 --threads 8 2>&1 | tee "$out/draft-quality-$backend.txt" | tail -8
done
for tree in 1,1,1,1,1 2,2,2,2,2; do
    "$build/bin/bench_draft_quality" --backend cuda --model "$SPECULA_FIXTURES_DIR/models/stories260K.gguf" --workload stories \
        --draft trained=models/drafts/stories260K.longspec.gguf --files 4 -n 256 --tree $tree 2>&1 | tail -4
done | tee "$out/draft-quality-cuda-trees.txt"

echo "== 8B-shaped F16 model"
model=${SPECULA_BENCH_MODEL:-/tmp/specula-llama-3.1-8b-f16.gguf}
vocab=$SPECULA_FIXTURES_DIR/tokenizer/ggml-vocab-llama-bpe.gguf
[ -f "$vocab" ] || vocab=models/stories260K.gguf
[ -f "$model" ] || "$build/bin/specula" synth --shape llama-3.1-8b --type f16 --vocab "$vocab" -o "$model" | tee "$out/synth.txt"
"$build/bin/bench_cuda" --model "$model" --contexts "${SPECULA_BENCH_CONTEXTS:-1024,8192,32768}" --threads "$(nproc)" 2>&1 | tee "$out/bench-cuda.txt"

echo "== Vulkan on the same card"
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
ldconfig 2>/dev/null
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -x "$build/bin/specula_vulkan_tests" ]; then
    "$build/bin/specula_vulkan_tests" -r compact 2>&1 | tee "$out/vulkan-tests.txt" | tail -12
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || status=1
else
    echo "this build has no Vulkan backend (configure with libvulkan-dev and glslc)"
fi
"$build/bin/bench_backends" --model "$model" --backends cuda,vulkan --contexts "${SPECULA_BENCH_CONTEXTS:-1024,8192,32768}" --reps 10 \
    --threads "$(nproc)" 2>&1 | tee "$out/bench-backends.txt"

echo "== done (tests: $([ $status -eq 0 ] && echo passed || echo FAILED)); logs in $out"
exit $status
