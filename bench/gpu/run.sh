#!/usr/bin/env bash
# The CUDA backend's tests and benchmarks in one call on a GPU machine:
#   bash bench/gpu/run.sh            # on the GPU machine; results under $OUT (or ./bench-gpu-out)
#
# The device machine has CMake and nvcc but not this project's Debian libraries (PCRE2, Catch2, CLI11), so the
# binaries are built on the development machine and carried along:
#   bash bench/gpu/run.sh --build-only    # here: builds build-gpu/{bin,lib} for sm_90 and stages the fixtures
#   device tool: command "bash bench/gpu/run.sh", carry ["build-gpu/carry", "build-gpu/CMakeCache.txt", ".gl"]
#   (build-gpu/carry holds bin, lib and fixtures packed; .gl the Vulkan loader debs, see the device README)
# When build-gpu/bin is missing, the script builds first (where the machine can).
#
# What it runs, in order (a failure is reported and the rest still runs; the exit status is the tests'):
#   1. specula devices, nvidia-smi
#   2. specula_cuda_tests: kernels vs host loops, CUDA vs CPU parity on the fixture models, bit-identical tree
#      verification, lossless speculative decoding on CUDA, cancellation, the cache's rows; then
#      specula_backend_ops_tests: every registered backend (CUDA on this device) against the CPU, op by op
#   3. specula_api_tests "[speculative],[backend],[session],[snapshot]": the public API with the default backend (AUTO =
#      CUDA here), snapshots included
#   4. bench_cuda on a Llama-3.1-8B-shaped F16 synthetic model at 1K, 8K and 32K; then the CUDA chi-square sampling
#      tests (20,000 samples each)
#   5. Vulkan on the same card (when the build has it and a Vulkan loader + driver are there: carry .gl with the
#      loader debs, see /work/.library/device/README.md): specula_vulkan_tests, then bench_backends on the 8B
#      shape: decode tokens/s and 16-node verification cost, CUDA against Vulkan, in one run
#   6. bench_draft_quality --backend cuda vs cpu on stories260K with its trained draft (speculative vs AR, one run each)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${SPECULA_GPU_BUILD:-build-gpu}
out=${OUT:-$root/bench-gpu-out}
# The logs go to $out/logs and are packed into $out/gpu-logs.tar.gz at the end (the device tool returns at most 8 files).
final_out=$out
out=$final_out/logs
mkdir -p "$out"

stage_fixtures() {
    local src=${SPECULA_FIXTURES_SRC:-$root/../shared/fixtures}
    mkdir -p "$build/fixtures/models" "$build/fixtures/tokenizer"
    for f in stories260K.gguf stories260K-L3.gguf synth-llama-gqa-f16.gguf synth-llama-q4_k_m.gguf; do
        [ -f "$src/models/$f" ] && cp -u "$src/models/$f" "$build/fixtures/models/"
    done
    [ -f "$src/tokenizer/ggml-vocab-llama-bpe.gguf" ] && cp -u "$src/tokenizer/ggml-vocab-llama-bpe.gguf" "$build/fixtures/tokenizer/"
    # The device image has CUDA but not this machine's Debian libraries (PCRE2, zstd, cpp-httplib, brotli): carry
    # the ones the binaries link, found there through the build's $ORIGIN/../lib run path. glibc, libstdc++, OpenSSL
    # and zlib are older here than on the device image, so its own serve.
    ldd "$build"/bin/* 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
        while read -r lib path; do
            case $lib in
                libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|libssl.so*|libcrypto.so*|libz.so*|libspecula*|ld-linux*) ;;
                *) cp -uL "$path" "$build/lib/$lib" ;;
            esac
        done
    du -sh "$build/bin" "$build/lib" "$build/fixtures" 2>/dev/null
}

build_all() {
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPECULA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DSPECULA_VULKAN=AUTO \
        -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON || return 1
    local vulkan_targets=""
    # (grep reads the whole list: with -q it would stop early and pipefail would count cmake's SIGPIPE as a failure)
    cmake --build "$build" --target help 2>/dev/null | grep specula_vulkan_tests >/dev/null && vulkan_targets="specula_vulkan_tests"
    cmake --build "$build" -j"$(nproc)" --target specula_cli specula_cuda_tests specula_backend_ops_tests specula_api_tests bench_cuda bench_draft_quality \
        bench_backends $vulkan_targets || return 1
}

# What travels to the device machine: bin, lib and fixtures in one xz archive (31 MB; 70 MB unpacked, which with the
# 24 MB working tree would pass the device tool's 64 MiB).
pack() {
    mkdir -p "$build/carry"
    tar -C "$build" -cf - bin lib fixtures | xz -T0 -6 > "$build/carry/specula-gpu.tar.xz" || return 1
    du -sh "$build/carry/specula-gpu.tar.xz"
}

if [ "${1:-}" = "--build-only" ]; then
    build_all && stage_fixtures && pack
    exit $?
fi
if [ ! -x "$build/bin/specula_cuda_tests" ] && [ -f "$build/carry/specula-gpu.tar.xz" ]; then
    echo "== unpacking $build/carry/specula-gpu.tar.xz"
    tar -C "$build" -xJf "$build/carry/specula-gpu.tar.xz" 2>/dev/null ||
        python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$build/carry/specula-gpu.tar.xz" "$build"
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
# The backend-ops tests also run the CUDA backend compiled against the CPU emulator; here the real one is tested.
export SPECULA_TEST_SKIP_EMULATED=1
# The API tests name the repository's models by the build machine's absolute path; point it here if it is absent.
built_root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
built_root=${built_root:-/work/main}
[ -e "$built_root" ] || { mkdir -p "$(dirname "$built_root")" 2>/dev/null && ln -s "$root" "$built_root" 2>/dev/null; } || true
status=0
# cuBLAS is opened at run time (backends/cuda/cublas_library.cpp): make the toolkit's copy findable.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(dirname "$(find / -xdev -name 'libcublas.so.1*' 2>/dev/null | head -1)" 2>/dev/null); do
    [ -d "$d" ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
done
# Every step has a time limit, and all of them a deadline (SPECULA_GPU_DEADLINE_S seconds from here, default 540, under
# the device call's 600): a step that hangs on real hardware costs its limit, the rest still runs, and the logs are
# packed before the call ends.
started=$SECONDS
deadline=${SPECULA_GPU_DEADLINE_S:-540}
limit() {
    local left=$((deadline - (SECONDS - started) - 10))
    local cap=$1; shift
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -le 0 ]; then echo "skipped (deadline): $1"; return 124; fi
    timeout --kill-after=5 "$cap" "$@"
}
summary=()
note() { summary+=("$1"); }
# SPECULA_GPU_STEPS picks steps (default all, in this order): cuda,ops,api,bench,sampling,vulkan,backends,draft.
# SPECULA_GPU_FILTER is a Catch2 test filter for the cuda, ops and vulkan steps (a rerun of what failed).
steps=",${SPECULA_GPU_STEPS:-cuda,ops,api,bench,sampling,vulkan,backends,draft},"
want() { [[ $steps == *",$1,"* ]]; }
filter=${SPECULA_GPU_FILTER:-}
catch_step() {  # name, cap, log, binary, args...: each test's duration in the log, failures and the totals on screen
    local name=$1 cap=$2 log=$3; shift 3
    limit "$cap" "$@" -d yes 2>&1 | tee "$out/$log" | grep -v -E '^[0-9.]+ s: |^$' | tail -30
    local rc=${PIPESTATUS[0]}
    note "$name: rc $rc, $(grep -E '^(All tests passed|test cases:)' "$out/$log" | tail -1)$( [ "$rc" -eq 124 ] && echo " (stopped at its limit after: $(grep -E '^[0-9.]+ s: ' "$out/$log" | tail -1))")"
    [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || status=1
}

# Vulkan's loader first (the backend-ops step tests every registered backend, Vulkan on this card included).
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
ldconfig 2>/dev/null
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json

echo "== devices"
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem,power.draw --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
"$build/bin/specula" devices 2>&1 | tee "$out/devices.txt"

# The chi-square sampling tests draw 20,000 two-token samples each (~50 s each on an H100): their own step, below.
if want cuda; then
    echo "== CUDA tests"
    catch_step "cuda tests" 90 cuda-tests.txt "$build/bin/specula_cuda_tests" ${filter:-"~[sampling]"}
fi
if want ops; then
    echo "== backend ops: every registered backend against the CPU"
    catch_step "backend ops" 120 backend-ops.txt "$build/bin/specula_backend_ops_tests" $filter
fi
if want api; then
    echo "== API tests on the default backend"
    catch_step "api tests" 60 api-tests.txt "$build/bin/specula_api_tests" "[speculative],[backend],[session],[snapshot]"
fi

model=${SPECULA_BENCH_MODEL:-/tmp/specula-llama-3.1-8b-f16.gguf}
contexts=${SPECULA_BENCH_CONTEXTS:-1024,8192,32768}
if want bench || want backends; then
    vocab=$SPECULA_FIXTURES_DIR/tokenizer/ggml-vocab-llama-bpe.gguf
    [ -f "$vocab" ] || vocab=models/stories260K.gguf
    t0=$SECONDS
    [ -f "$model" ] || limit 90 "$build/bin/specula" synth --shape llama-3.1-8b --type f16 --vocab "$vocab" -o "$model" 2>&1 | tee "$out/synth.txt"
    note "synth: $((SECONDS - t0)) s"
fi
if want bench; then
    echo "== bench_cuda: 8B-shaped F16 model"
    # A 32K prefill did not finish inside the step on the first run: past 8K the cache is filled by repeating rows.
    limit 150 "$build/bin/bench_cuda" --model "$model" --contexts "$contexts" --prefill-max "${SPECULA_BENCH_PREFILL_MAX:-8192}" \
        --threads "$(nproc)" 2>&1 | tee "$out/bench-cuda.txt"
    note "bench_cuda: rc ${PIPESTATUS[0]}"
fi
if want sampling; then
    echo "== CUDA sampling: the chi-square fits"
    catch_step "cuda sampling" 60 cuda-sampling.txt "$build/bin/specula_cuda_tests" "${SPECULA_GPU_SAMPLING_FILTER:-[sampling]}"
fi
if want vulkan; then
    echo "== Vulkan tests on the same card"
    if [ -x "$build/bin/specula_vulkan_tests" ]; then
        catch_step "vulkan tests" 60 vulkan-tests.txt "$build/bin/specula_vulkan_tests" $filter
    else
        echo "this build has no Vulkan backend (configure with libvulkan-dev and glslc)"
    fi
fi
if want backends; then
    echo "== bench_backends: CUDA against Vulkan, 8B shape"
    limit 120 "$build/bin/bench_backends" --model "$model" --backends cuda,vulkan --contexts "$contexts" --reps 10 \
        --threads "$(nproc)" 2>&1 | tee "$out/bench-backends.txt"
    note "bench_backends: rc ${PIPESTATUS[0]}"
fi
if want draft; then
    echo "== speculative vs autoregressive, stories260K + its trained draft"
    for backend in cuda cpu; do
        limit 60 "$build/bin/bench_draft_quality" --backend $backend --model "$SPECULA_FIXTURES_DIR/models/stories260K.gguf" --workload stories \
            --draft trained=models/drafts/stories260K.longspec.gguf --files 4 -n 256 --threads 8 2>&1 | tee "$out/draft-quality-$backend.txt" | tail -8
    done
    for tree in 1,1,1,1,1 2,2,2,2,2; do
        limit 30 "$build/bin/bench_draft_quality" --backend cuda --model "$SPECULA_FIXTURES_DIR/models/stories260K.gguf" --workload stories \
            --draft trained=models/drafts/stories260K.longspec.gguf --files 4 -n 256 --tree $tree 2>&1 | tail -4
    done | tee "$out/draft-quality-cuda-trees.txt"
fi

echo "== summary"
printf '%s\n' "${summary[@]}"
tar -czf "$final_out/gpu-logs.tar.gz" -C "$final_out" logs && rm -rf "$out"
echo "== done (tests: $([ $status -eq 0 ] && echo passed || echo FAILED)); logs in $final_out/gpu-logs.tar.gz"
exit $status
