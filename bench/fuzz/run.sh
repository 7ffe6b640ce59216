#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (tests/fuzz/README.md says what each covers) and prints a table of what
# each did. Configures and builds the fuzzing build (clang, -DSPECULA_FUZZ=ON) when needed, fuzz targets only.
#
#   bench/fuzz/run.sh [--seconds S | --runs N] [--jobs J] [--targets a,b] [--build-dir DIR]
#
#   --seconds S    fuzz each target for S seconds (-max_total_time; default 60; CI runs 30)
#   --runs N       or for N executions each (-runs)
#   --jobs J       targets fuzzed at the same time (default 2; each is one single-threaded process)
#   --targets a,b  only these (default: all: gguf_model draft_load tokenizer_<family>... chat_template
#                  snapshot_load serve_request serve_json)
#   --build-dir D  the fuzzing build (default build-fuzz in the repository)
#
# Each target starts from a scratch working corpus, D/fuzz-corpus/<target>, into which its committed seeds
# (tests/fuzz/corpus/...) and regression inputs (tests/fuzz/regressions/<target>) are copied; the committed folders
# are never written. The working corpus is kept between runs, so a later run goes on from what earlier ones found
# (delete the folder to start over). Per run: the target's dictionary (tests/fuzz/dict), -timeout=10 per input,
# -rss_limit_mb=2560, -print_final_stats=1; crashes, timeouts and OOMs are written to D/artifacts/<target>/ and
# the full output to D/fuzz-logs/<target>.log. A target whose data (a fixture vocabulary) is missing exits 77 and is
# reported "skipped (why)". The exit status is 1 when any target crashed, timed out or ran out of memory, else 0.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_EACH=60
RUNS=""
JOBS=2
TARGETS=""
BUILD_DIR="$ROOT/build-fuzz"
ALL_TARGETS=(gguf_model draft_load tokenizer_stories260K tokenizer_llama-spm tokenizer_llama-bpe tokenizer_gpt-2 tokenizer_qwen2
             tokenizer_deepseek-coder tokenizer_phi-3 chat_template grammar snapshot_load serve_request serve_json)

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) SECONDS_EACH="$2"; RUNS=""; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        --jobs) JOBS="$2"; shift 2 ;;
        --targets) TARGETS="$2"; shift 2 ;;
        --build-dir) BUILD_DIR="$2"; shift 2 ;;
        -h|--help) usage ;;
        *) echo "run.sh: unknown argument $1" >&2; usage ;;
    esac
done
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$PWD/$BUILD_DIR" ;; esac
if [ -n "$TARGETS" ]; then IFS=',' read -r -a SELECTED <<< "$TARGETS"; else SELECTED=("${ALL_TARGETS[@]}"); fi
for t in "${SELECTED[@]}"; do
    case " ${ALL_TARGETS[*]} " in *" $t "*) ;; *) echo "run.sh: unknown target $t (targets: ${ALL_TARGETS[*]})" >&2; exit 2 ;; esac
done

# ---- build ----------------------------------------------------------------------------------------------
if ! command -v clang++ >/dev/null; then
    echo "run.sh: clang++ is missing (Debian: apt-get install clang libclang-rt-14-dev, or scripts/install-deps.sh --all)" >&2
    exit 2
fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] || ! grep -q '^SPECULA_FUZZ:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then
    launcher=()
    if command -v ccache >/dev/null; then launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
    echo "run.sh: configuring $BUILD_DIR (clang, SPECULA_FUZZ=ON)"
    cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG" \
        -DSPECULA_FUZZ=ON -DSPECULA_BUILD_TESTS=ON -DSPECULA_BUILD_TOOLS=OFF -DSPECULA_BUILD_BENCH=OFF -DSPECULA_BUILD_DEMO=OFF \
        -DSPECULA_CUDA=OFF -DSPECULA_VULKAN=OFF "${launcher[@]}" > "$BUILD_DIR.configure.log" 2>&1 \
        || { cat "$BUILD_DIR.configure.log" >&2; echo "run.sh: configure failed" >&2; exit 2; }
fi
build_targets=()
for t in "${SELECTED[@]}"; do build_targets+=("fuzz_$t"); done
echo "run.sh: building ${build_targets[*]}"
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${build_targets[@]}" > "$BUILD_DIR/fuzz-build.log" 2>&1 \
    || { tail -50 "$BUILD_DIR/fuzz-build.log" >&2; echo "run.sh: build failed (log: $BUILD_DIR/fuzz-build.log)" >&2; exit 2; }

# ---- run ------------------------------------------------------------------------------------------------
FUZZ_DIR="$ROOT/tests/fuzz"
mkdir -p "$BUILD_DIR/fuzz-logs" "$BUILD_DIR/fuzz-results"
corpus_of() { case "$1" in tokenizer_*) echo tokenizer ;; *) echo "$1" ;; esac; }

run_one() {
    local t=$1
    local exe="$BUILD_DIR/bin/fuzz_$t" work="$BUILD_DIR/fuzz-corpus/$t" art="$BUILD_DIR/artifacts/$t/"
    local log="$BUILD_DIR/fuzz-logs/$t.log" res="$BUILD_DIR/fuzz-results/$t" seeds="$FUZZ_DIR/corpus/$(corpus_of "$t")"
    local dict="$FUZZ_DIR/dict/$(corpus_of "$t").dict"
    mkdir -p "$work" "$art"
    cp -n "$seeds"/* "$work"/ 2>/dev/null
    [ -d "$FUZZ_DIR/regressions/$t" ] && cp -n "$FUZZ_DIR/regressions/$t"/* "$work"/ 2>/dev/null
    local before; before=$(ls "$art" | wc -l)
    local limit=(-max_total_time="$SECONDS_EACH")
    [ -n "$RUNS" ] && limit=(-runs="$RUNS")
    local dict_arg=()
    [ -f "$dict" ] && dict_arg=(-dict="$dict")
    local start=$SECONDS
    # error/timeout exit codes moved off 77, which means "skipped" here (libFuzzer's default error code is 77).
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:abort_on_error=0:detect_leaks=1" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:print_stacktrace=1:halt_on_error=1" \
        "$exe" "$work" "${dict_arg[@]}" "${limit[@]}" -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=2048 -print_final_stats=1 \
        -error_exitcode=99 -timeout_exitcode=98 -artifact_prefix="$art" > "$log" 2>&1
    local rc=$?
    local wall=$((SECONDS - start))
    local execs rate status
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    local found; found=$(ls "$art" | tail -n +"$((before + 1))" | sed "s|^|$art|" | tr '\n' ' ')
    local new_artifacts=$(( $(ls "$art" | wc -l) - before ))
    if [ $rc -eq 77 ] && grep -q '^SKIPPED:' "$log"; then
        status="skipped ($(grep -m1 '^SKIPPED:' "$log" | sed 's/^SKIPPED: //'))"
    elif [ $rc -eq 0 ]; then
        status="ok"
    else
        if grep -q 'ERROR: libFuzzer: timeout' "$log"; then status="TIMEOUT"
        elif grep -q 'out-of-memory\|ERROR: libFuzzer: out-of-memory\|malloc(.*) exceeds limit' "$log"; then status="OOM"
        elif grep -q 'LeakSanitizer' "$log"; then status="LEAK"
        else status="CRASH"; fi
        status="$status (rc $rc; $new_artifacts new artifacts: ${found:-none}; log $log)"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "${execs:--}" "${rate:--}" "$(ls "$work" | wc -l)" "$wall" "$status" > "$res"
}

echo "run.sh: fuzzing ${#SELECTED[@]} targets, $JOBS at a time, $( [ -n "$RUNS" ] && echo "$RUNS runs" || echo "${SECONDS_EACH} s") each"
for t in "${SELECTED[@]}"; do rm -f "$BUILD_DIR/fuzz-results/$t"; done
running=0
for t in "${SELECTED[@]}"; do
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
    run_one "$t" &
    running=$((running + 1))
done
wait

# ---- report ---------------------------------------------------------------------------------------------
failed=0
printf '\n%-26s %12s %9s %8s %6s  %s\n' target executions execs/s corpus wall_s result
for t in "${SELECTED[@]}"; do
    if [ ! -f "$BUILD_DIR/fuzz-results/$t" ]; then
        printf '%-26s %12s %9s %8s %6s  %s\n' "$t" - - - - "NO RESULT"
        failed=1
        continue
    fi
    IFS=$'\t' read -r name execs rate corpus wall status < "$BUILD_DIR/fuzz-results/$t"
    printf '%-26s %12s %9s %8s %6s  %s\n' "$name" "$execs" "$rate" "$corpus" "$wall" "$status"
    case "$status" in ok|skipped*) ;; *) failed=1 ;; esac
done
if [ $failed -ne 0 ]; then
    echo "run.sh: FAILED: reproduce with $BUILD_DIR/bin/fuzz_<target> <artifact>; add the input to tests/fuzz/regressions/<target>/"
    exit 1
fi
echo "run.sh: no crash, timeout, leak or OOM"
