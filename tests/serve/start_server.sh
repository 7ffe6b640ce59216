# Sourced by the serve tests' scripts: start_server CLI LOG [ARGS...] runs `CLI serve --port 0 ARGS...` on loopback
# with its stderr in LOG, waits for its "server is listening on" line and sets $pid and $port (exits 1 with the log
# when the server exits or never listens). The caller's EXIT trap kills $pid.
start_server() {
    local cli=$1 log=$2
    shift 2
    "$cli" serve --port 0 "$@" 2>"$log" &
    pid=$!
    for _ in $(seq 1 600); do
        grep -q "server is listening on" "$log" && break
        kill -0 $pid 2>/dev/null || { cat "$log"; echo "FAIL: the server exited"; exit 1; }
        sleep 0.1
    done
    port=$(sed -n 's/.*server is listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] || { cat "$log"; echo "FAIL: no listening line"; exit 1; }
}
