#!/usr/bin/env bash
# The demo against the CLI on the same request: time to first token and tokens/s, so that what the window costs can be
# read off (docs/demo.md). For each repetition the demo (a real window under Xvfb) completes code in the fixture
# repository with --report and --dump-prompt; then `specula generate` runs the very same prompt ids with the same model,
# draft, tree, context and threads (THREADS=N in the environment; default 2). Prints the medians and the ratios, and checks that both produced the same text.
#
#   bash bench/demo/compare_cli.sh [BUILD_DIR] [MODEL] [DRAFT|none] [N_TOKENS] [REPS] [TASK]
#
# Defaults: build, models/code-7m-f16.gguf with models/drafts/code-7m.longspec.gguf, 256 tokens, 7 repetitions,
# TASK "complete" (the fixture repository, shapes/area.py:37:9) or "summarize" (tests/demo/fixtures/document.txt).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
MODEL=${2:-models/code-7m-f16.gguf}
DRAFT=${3:-models/drafts/code-7m.longspec.gguf}
N=${4:-256}
REPS=${5:-7}
TASK=${6:-complete}
TREE=1,1,1,1
THREADS=${THREADS:-2}
CTX=1024
work=$(mktemp -d)
# One X server for every run, started before the first and idle between them (starting one per run would put its
# start-up work beside the measured generation). The demo and the CLI alternate, so drifts of the machine hit both.
display=:$((100 + RANDOM % 800))
Xvfb "$display" -screen 0 1600x1000x24 -nolisten tcp > /dev/null 2>&1 &
xvfb_pid=$!
trap 'kill $xvfb_pid 2>/dev/null; rm -rf "$work"' EXIT
sleep 1
export DISPLAY=$display XDG_CONFIG_HOME=$work/config XDG_RUNTIME_DIR=$work QT_QPA_PLATFORM=xcb

draft_args=(--draft "$DRAFT")
cli_draft=(--draft "$DRAFT" --tree "$TREE")
if [ "$DRAFT" = none ]; then draft_args=(--draft none); cli_draft=(); fi
if [ "$TASK" = complete ]; then
    cp -r tests/demo/fixtures/repo "$work/repo"
    task_args=(--complete "$work/repo:shapes/area.py:37:9")
else
    task_args=(--summarize tests/demo/fixtures/document.txt --long-document head-tail)
fi

for i in $(seq 1 "$REPS"); do
    "$BUILD/bin/specula-demo" --model "$MODEL" "${draft_args[@]}" --ngram off \
        --tree "$TREE" -t "$THREADS" -c "$CTX" "${task_args[@]}" --temp 0 -n "$N" --print --quit \
        --dump-prompt "$work/ids.txt" --report "$work/demo_$i.json" > "$work/demo_$i.txt" 2> "$work/demo_$i.err"
    "$BUILD/bin/specula" generate -m "$MODEL" "${cli_draft[@]}" -t "$THREADS" -c "$CTX" --prompt-ids "$(cat "$work/ids.txt")" \
        --temp 0 -n "$N" --format jsonl > "$work/cli_$i.jsonl" 2> /dev/null
done

python3 - "$work" "$REPS" <<'PY'
import json, statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
rows = []
for i in range(1, reps + 1):
    d = json.load(open(f"{work}/demo_{i}.json"))
    lines = [json.loads(l) for l in open(f"{work}/cli_{i}.jsonl") if l.strip()]
    cli_text = "".join(l.get("text", "") for l in lines if "text" in l)
    s = lines[-1]["stats"]
    demo_text = open(f"{work}/demo_{i}.txt", encoding="utf-8").read()
    rows.append(dict(same=demo_text == cli_text, d=d, c=s))
med = lambda xs: statistics.median(xs)
d_ttft_ui = med([r["d"]["ui_ttft_ms"] for r in rows]); d_ttft_eng = med([r["d"]["engine_ttft_ms"] for r in rows])
c_ttft = med([r["c"]["ttft_ms"] for r in rows])
d_tps_ui = med([r["d"]["ui_tokens_per_s"] for r in rows]); d_tps_eng = med([r["d"]["decode_tokens_per_s"] for r in rows])
c_tps = med([r["c"]["decode_tokens_per_s"] for r in rows])
d = rows[0]["d"]
print(f"request: {d['task']}, prompt {d['prompt_tokens']} tokens ({d['prompt_form']}), {d['generated']} generated, "
      f"drafter {d['drafter'] or 'none'}, tau {d['tau']:.2f}, {d['drafted_emitted']}/{d['generated']} tokens drafted")
print(f"{'':28}{'TTFT ms':>10}{'tokens/s':>10}")
print(f"{'CLI (specula generate)':28}{c_ttft:10.1f}{c_tps:10.1f}")
print(f"{'demo, engine (library)':28}{d_ttft_eng:10.1f}{d_tps_eng:10.1f}")
print(f"{'demo, on screen':28}{d_ttft_ui:10.1f}{d_tps_ui:10.1f}")
print(f"demo on screen / CLI: TTFT x{d_ttft_ui / c_ttft:.3f}, tokens/s x{d_tps_ui / c_tps:.3f} (medians of {reps})")
build = med([r["d"]["prompt_build_ms"] for r in rows])
ui_cpu = med([r["d"]["ui_thread_cpu_ms"] for r in rows]); total = med([r["d"]["engine_total_ms"] for r in rows])
print(f"the window's thread used {ui_cpu:.1f} ms of CPU during the {total:.0f} ms request")
print(f"of the demo's TTFT, building the prompt (related files, tokenization) took {build:.1f} ms; the CLI gets token ids")
print(f"resident memory of the demo: {med([r['d']['resident_bytes'] for r in rows]) / 2**20:.1f} MiB")
print("same text as the CLI in every run: " + ("yes" if all(r["same"] for r in rows) else "NO"))
sys.exit(0 if all(r["same"] for r in rows) else 1)
PY
