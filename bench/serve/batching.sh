#!/bin/bash
# Continuous batching, measured: N concurrent clients against `specula serve --parallel N` with its slots batched
# (the default) and apart (--no-cont-batching), and against llama-server on the same GGUF when LLAMA_SERVER names
# its binary. Every run is the same serve_load job (code completions cut from --source's .py files, greedy, a fixed
# time); the table gives generated tokens/s and the ratios, all measured in this one run.
#
#   bash bench/serve/batching.sh MODEL.gguf [CLIENTS...]          (default clients: 4 8)
#   env: BUILD (build dir, default build), SECONDS_PER_RUN (30), N_PREDICT (128), PREFIX_CHARS (400),
#        SOURCE (/usr/lib/python3.11/asyncio), SPEC (none: plain decoding; ngram: the server's default drafting),
#        THREADS (the machine's cores), LLAMA_SERVER (path to llama-server, optional)
set -euo pipefail
MODEL=${1:?usage: batching.sh MODEL.gguf [CLIENTS...]}
shift
CLIENTS=("${@:-4 8}")
[ $# -eq 0 ] && CLIENTS=(4 8)
BUILD=${BUILD:-build}
SECS=${SECONDS_PER_RUN:-30}
N_PREDICT=${N_PREDICT:-128}
PREFIX_CHARS=${PREFIX_CHARS:-400}
SOURCE=${SOURCE:-/usr/lib/python3.11/asyncio}
SPEC=${SPEC:-none}
THREADS=${THREADS:-$(nproc)}
LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT

wait_ready() {
    for _ in $(seq 240); do
        if curl -s "localhost:$1/health" | grep -q '"ok"'; then return 0; fi
        sleep 0.5
    done
    echo "server on port $1 did not start; its log:" >&2
    cat "$2" >&2
    return 1
}

# run NAME CLIENTS COMMAND...: starts the server command (with --port appended), loads it, prints tokens/s.
run() {
    local name=$1 n=$2
    shift 2
    local port=$((20000 + RANDOM % 20000))
    "$@" --port "$port" > "$LOG/$name.log" 2>&1 &
    local pid=$!
    wait_ready "$port" "$LOG/$name.log"
    "$BUILD/bin/serve_load" --port "$port" --clients "$n" --seconds "$SECS" --endpoint completion --source "$SOURCE" \
        --prefix-chars "$PREFIX_CHARS" -n "$N_PREDICT" --temp 0 --json > "$LOG/$name.json"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$LOG/$name.json"
}

echo "model $MODEL, spec $SPEC, $THREADS threads, $N_PREDICT tokens per request, ${SECS} s per run"
printf "%-8s %14s %14s %10s" clients "batched tok/s" "apart tok/s" "ratio"
[ -n "${LLAMA_SERVER:-}" ] && printf " %16s %10s" "llama-server" "ratio"
echo
for n in "${CLIENTS[@]}"; do
    common=(-m "$MODEL" --parallel "$n" -c $((n * 2048)) --spec "$SPEC")
    per_slot=$(( THREADS / n > 0 ? THREADS / n : 1 ))
    batched=$(run "cb$n" "$n" "$BUILD/bin/specula" serve "${common[@]}" --cont-batching)
    apart=$(run "nocb$n" "$n" "$BUILD/bin/specula" serve "${common[@]}" -t "$per_slot" --no-cont-batching)
    printf "%-8s %14.1f %14.1f %9.2fx" "$n" "$batched" "$apart" "$(python3 -c "print($batched / $apart)")"
    if [ -n "${LLAMA_SERVER:-}" ]; then
        llama=$(run "llama$n" "$n" "$LLAMA_SERVER" -m "$MODEL" -np "$n" -c $((n * 2048)) -t "$THREADS" --temp 0)
        printf " %16.1f %9.2fx" "$llama" "$(python3 -c "print($batched / $llama)")"
    fi
    echo
done
