#!/usr/bin/env bash
# serve:load - a short bounded load on loopback: `specula serve` with two slots, serve_load with 4 clients for a few
# seconds on /completion, then SIGTERM. Fails on any error response, on a server that does not stop cleanly, or (under
# the sanitizers, where ctest runs it too) on any report of theirs, which makes the server exit non-zero.
# Usage: load_smoke.sh SPECULA_CLI SERVE_LOAD SOURCE_DIR
set -euo pipefail
cli=$1 load=$2 src=$3
log=$(mktemp)
trap 'kill -9 $pid 2>/dev/null || true; rm -f "$log"' EXIT
source "$(dirname "$0")/start_server.sh"
start_server "$cli" "$log" -m "$src/models/stories260K.gguf" --parallel 2 -c 512 -t 1
"$load" --port "$port" --clients 4 --seconds "${SERVE_LOAD_SECONDS:-5}" --n-predict 24 --temp 0.8
kill -TERM $pid
status=0
wait $pid || status=$?
cat "$log"
[ $status -eq 0 ] || { echo "FAIL: the server exited with $status after SIGTERM"; exit 1; }
echo "OK"
