#!/usr/bin/env bash
# What share of the tokens the demo highlights as drafted: completions of 64 tokens at 8 places of Python's json and
# email packages (held out from code-7m's training), greedy and at T=1, through the demo's automation (offscreen).
#
#   bash bench/demo/drafted_share.sh [BUILD_DIR] [MODEL] [DRAFT]
#
# Defaults: build, ../shared/fixtures/models/code-7m/model.gguf, models/drafts/code-7m.longspec.gguf.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
MODEL=${2:-../shared/fixtures/models/code-7m/model.gguf}
DRAFT=${3:-models/drafts/code-7m.longspec.gguf}
stdlib=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['stdlib'])")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo"
cp -r "$stdlib/json" "$stdlib/email" "$work/repo/"
find "$work/repo" -name __pycache__ -prune -exec rm -rf {} +
export XDG_CONFIG_HOME=$work/config QT_QPA_PLATFORM=offscreen
for place in json/decoder.py:120:1 json/encoder.py:230:1 json/scanner.py:40:1 email/utils.py:150:1 \
             email/header.py:300:1 email/message.py:200:1 email/parser.py:60:1 email/quoprimime.py:120:1; do
    for temp in 0 1; do
        "$BUILD/bin/specula-demo" --model "$MODEL" --draft "$DRAFT" -c 1024 --complete "$work/repo:$place" --temp "$temp" \
            --seed 3 -n 64 --quit --report "$work/r.json" 2> /dev/null
        python3 -c "import json; d=json.load(open('$work/r.json')); print('$place', 'T=$temp', d['drafted_emitted'], d['generated'], round(d['tau'], 2))"
    done
done | tee "$work/rows.txt"
python3 - "$work/rows.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
for t in ("T=0", "T=1"):
    d = sum(int(r[2]) for r in rows if r[1] == t)
    g = sum(int(r[3]) for r in rows if r[1] == t)
    print(f"{t}: {d} of {g} tokens drafted ({100 * d / g:.1f}%)")
PY
