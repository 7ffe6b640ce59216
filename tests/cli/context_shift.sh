#!/usr/bin/env bash
# `specula generate --context-shift` as a user runs it: a context of 64 tokens generates 300, the stats count the
# shifts, every drafter prints plain decoding's tokens through them, and without the flag generation stops at the
# full context. Usage: context_shift.sh SPECULA_BINARY SOURCE_DIR
# shellcheck source-path=SCRIPTDIR source=cli_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_common.sh"
field() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" "$1"; }

prompt="Once upon a time, there was a little girl named Lily."
run() {  # out-file args...
    local out="$1"; shift
    "$specula" generate -p "$prompt" -n 300 --temp 0 -c 64 --format jsonl "$@" > "$out"
}
run "$work/stop.jsonl"
check "without --context-shift the run stops at the full context" "context_full" "$(field "$work/stop.jsonl" stop_reason)"

run "$work/plain.jsonl" --context-shift --keep 4
expected="$(ids "$work/plain.jsonl")"
check "300 tokens in a context of 64" 300 "$(wc -w <<< "$expected" | tr -d ' ')"
check "the run ends at max tokens" "max_tokens" "$(field "$work/plain.jsonl" stop_reason)"
shifts="$(field "$work/plain.jsonl" context_shifts)"
[ "${shifts:-0}" -ge 8 ] && echo "ok   $shifts context shifts of $(( $(field "$work/plain.jsonl" discarded_tokens) / shifts )) tokens" ||
    fail "expected at least 8 shifts, got '${shifts}'"

for drafters in "--spec ngram --tree fixed" "--draft $draft --tree fixed" "--draft $draft --spec ngram" "--draft $draft --kv-type q8_0 --tree 1,1,1,1"; do
    # shellcheck disable=SC2086
    run "$work/spec.jsonl" --context-shift --keep 4 $drafters
    if [[ "$drafters" == *q8_0* ]]; then
        run "$work/ref.jsonl" --context-shift --keep 4 --kv-type q8_0
        want="$(ids "$work/ref.jsonl")"
    else
        want="$expected"
    fi
    check "$drafters through the shifts: plain decoding's tokens" "$want" "$(ids "$work/spec.jsonl")"
done

# The stats line counts them too.
"$specula" generate -p "$prompt" -n 100 --temp 0 -c 64 --context-shift > /dev/null 2> "$work/err.txt"
grep -q "context shifts (" "$work/err.txt" && echo "ok   stats line: $(grep -o '[0-9]* context shifts ([^)]*)' "$work/err.txt")" ||
    fail "stats line without the shifts: $(cat "$work/err.txt")"

# Sizes that leave no room are refused with a message.
if "$specula" generate -p "$prompt" -n 2 -c 64 --context-shift --keep 63 > /dev/null 2> "$work/err.txt"; then
    fail "--keep 63 in a context of 64 was accepted"
else
    grep -q "keeps 63 tokens" "$work/err.txt" && echo "ok   --keep 63 refused: $(head -1 "$work/err.txt")" || fail "unclear refusal: $(cat "$work/err.txt")"
fi

finish
