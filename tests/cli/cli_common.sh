# shellcheck shell=bash disable=SC2034  # the variables are for the scripts that source this file
# What the CLI test scripts share; sourced with the script's own arguments (SPECULA_BINARY SOURCE_DIR). Defines
# specula, src, draft (the bundled stories260K LongSpec draft), a scratch folder $work removed on exit, ids FILE (the
# token ids of a --format jsonl output, space-separated), and a failure count with fail MESSAGE and
# check NAME EXPECTED ACTUAL; a script ends with `finish`.
set -euo pipefail
specula="$1"
src="$2"
draft="$src/models/drafts/stories260K.longspec.gguf"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

ids() { sed -n 's/^{"id":\([0-9-]*\).*/\1/p' "$1" | tr '\n' ' '; }
failures=0
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
check() {  # name expected actual
    if [ "$2" == "$3" ]; then
        echo "ok   $1"
    else
        fail "$1"; echo "  expected: $2"; echo "  actual:   $3"
    fi
}
finish() {
    echo "$failures failed"
    [ "$failures" -eq 0 ]
}
