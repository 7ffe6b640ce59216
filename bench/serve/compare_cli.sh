#!/usr/bin/env bash
# The server against the CLI on the same code-completion requests: code-7m, prompts cut from a package it never saw
# in training (asyncio of this machine's Python), greedy, 64 new tokens each; with and without speculation.
#   bench/serve/compare_cli.sh [BUILD_DIR] [MODEL] [N_PROMPTS] [THREADS]
# CLI: one `specula generate` process per prompt; its latency is prompt_ms + decode (from its stats, load excluded),
# its wall time includes loading the model. Server: one client, the same prompts in order, latency measured by the
# client (HTTP included); the slot cache reuses only the BOS between these unrelated files.
set -euo pipefail
build=${1:-build}
model=${2:-../shared/fixtures/models/code-7m/model.gguf}
n=${3:-16}
threads=${4:-2}
[ -f "$model" ] || { echo "SKIPPED: $model not found"; exit 0; }
src="$(python3 -c "import sysconfig; print(sysconfig.get_paths()['stdlib'])")/asyncio"
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$build/bin/serve_load" --port 1 --source "$src" --snippets "$n" --prefix-chars 1500 --dump-prompts "$tmp/prompts" >/dev/null

echo "model $model, $n prompts from $src (1500-byte prefixes), 64 tokens, greedy, $threads threads"
for spec in none ngram; do
    # The server first: with --spec ngram it sizes the n-gram tree at start; the CLI then uses the same size.
    log="$tmp/serve-$spec.log"
    "$build/bin/specula" serve -m "$model" --port 0 -c 2048 -t "$threads" --spec "$spec" 2>"$log" &
    pid=$!
    for _ in $(seq 1 300); do grep -q "listening" "$log" && break; sleep 0.1; done
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
    nodes=$(sed -n 's/.*n-gram drafting with \([0-9]*\) tree nodes.*/\1/p' "$log")
    grep "n-gram drafting" "$log" || true
    "$build/bin/serve_load" --port "$port" --clients 1 --requests "$n" --source "$src" --snippets "$n" --prefix-chars 1500 \
        -n 64 --temp 0 --json > "$tmp/server-$spec.json"
    kill -TERM $pid; wait $pid || true
    cli_spec="--spec $spec"
    if [ "$spec" = ngram ]; then cli_spec="--spec ngram --ngram-nodes ${nodes:-16}"; fi
    python3 - "$build/bin/specula" "$model" "$tmp/prompts" "$cli_spec" "$threads" <<'PY'
import json, subprocess, sys, time, glob, statistics
cli, model, prompts, spec, threads = sys.argv[1:]
lat, tps, wall = [], [], []
for p in sorted(glob.glob(prompts + "/*.txt")):
    t0 = time.time()
    out = subprocess.run([cli, "generate", "-m", model, "-f", p, "-n", "64", "--temp", "0", *spec.split(),
                          "--format", "jsonl", "-t", threads, "-c", "2048"], capture_output=True, text=True, check=True).stdout
    wall.append((time.time() - t0) * 1e3)
    s = json.loads(out.strip().splitlines()[-1])["stats"]
    prompt_ms = 1e3 * s["prompt_tokens"] / s["prompt_tokens_per_s"]
    decode_ms = 1e3 * s["generated_tokens"] / s["decode_tokens_per_s"]
    lat.append(prompt_ms + decode_ms)
    tps.append(s["decode_tokens_per_s"])
print(f"CLI    {spec:28s}: latency p50 {statistics.median(lat):7.1f} ms (process wall p50 {statistics.median(wall):7.1f} ms), "
      f"decode {statistics.mean(tps):7.1f} tok/s")
PY
    python3 - "$tmp/server-$spec.json" "--spec $spec" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"server {sys.argv[2]:28s}: latency p50 {s['latency_ms']['p50']:7.1f} ms (p99 {s['latency_ms']['p99']:7.1f}), "
      f"decode {s['decode_tokens_per_s_per_request']:7.1f} tok/s, acceptance {100*s['draft_acceptance']:.1f}%, tau {s['tau']:.2f}, "
      f"{s['errors']} errors")
PY
done
