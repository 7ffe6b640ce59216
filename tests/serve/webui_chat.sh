#!/usr/bin/env bash
# serve:webui_chat - `specula serve` on loopback, then webui_chat.mjs drives the chat page's own script against it
# with Node (the nodejs package, installed by scripts/install-deps.sh --all). Without node: Skipped (exit 77).
# Usage: webui_chat.sh SPECULA_CLI SOURCE_DIR
set -euo pipefail
cli=$1 src=$2
if ! command -v node >/dev/null; then
    echo "SKIPPED: node not found (install the nodejs package: scripts/install-deps.sh --all)"
    exit 77
fi
log=$(mktemp)
trap 'kill -9 $pid 2>/dev/null || true; rm -f "$log"' EXIT
"$cli" serve -m "$src/models/stories260K.gguf" --port 0 -c 512 -t 1 2>"$log" &
pid=$!
for _ in $(seq 1 600); do
    grep -q "server is listening on" "$log" && break
    kill -0 $pid 2>/dev/null || { cat "$log"; echo "FAIL: the server exited"; exit 1; }
    sleep 0.1
done
port=$(sed -n 's/.*server is listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
[ -n "$port" ] || { cat "$log"; echo "FAIL: no listening line"; exit 1; }
node "$(dirname "$0")/webui_chat.mjs" "http://127.0.0.1:$port"
kill -TERM $pid
wait $pid
