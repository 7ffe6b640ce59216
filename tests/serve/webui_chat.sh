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
source "$(dirname "$0")/start_server.sh"
start_server "$cli" "$log" -m "$src/models/stories260K.gguf" -c 512 -t 1
node "$(dirname "$0")/webui_chat.mjs" "http://127.0.0.1:$port"
kill -TERM $pid
wait $pid
