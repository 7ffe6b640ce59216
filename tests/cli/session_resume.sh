#!/usr/bin/env bash
# `specula generate --save-session` in one process and `--load-session` in another give the tokens of one
# uninterrupted run, greedy and sampled, with each drafter and --tree auto (and fixed trees); `--prompt-cache`
# restores a prompt in a third process and changes nothing in the output; snapshots written by an earlier build still
# load. Usage: session_resume.sh SPECULA_BINARY SOURCE_DIR
# shellcheck source-path=SCRIPTDIR source=cli_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_common.sh"

prompt="Once upon a time, there was a little girl named Lily."
for temp in 0 1; do
    for drafters in "" "--spec ngram" "--draft $draft" "--draft $draft --spec ngram" "--draft-model $src/models/stories260K.gguf --tree 1,1,1"; do
        # Whatever trees --tree auto picks from measured times, a seed fixes the text (docs/speculative.md): sampled
        # runs use auto too, and a fixed tree for the drafters with temp 1 once more below.
        name="temp $temp, drafters '${drafters:-none}'"
        # shellcheck disable=SC2086
        "$specula" generate -p "$prompt" -n 50 --temp "$temp" --seed 17 $drafters --format jsonl > "$work/whole.jsonl"
        # shellcheck disable=SC2086
        "$specula" generate -p "$prompt" -n 21 --temp "$temp" --seed 17 $drafters --format jsonl --save-session "$work/s.snap" > "$work/a.jsonl"
        # shellcheck disable=SC2086
        "$specula" generate --load-session "$work/s.snap" -n 29 $drafters --format jsonl > "$work/b.jsonl"
        check "resume, $name" "$(ids "$work/whole.jsonl")" "$(ids "$work/a.jsonl")$(ids "$work/b.jsonl")"
        grep -q '"restored_tokens"' "$work/b.jsonl" || fail "$name: no restored_tokens in the stats"
        if [ "$temp" = 1 ] && [ -n "$drafters" ] && [[ "$drafters" != *--tree* ]]; then
            # The same sampled run saved with auto resumed on the fixed tree, and the other way round.
            # shellcheck disable=SC2086
            "$specula" generate --load-session "$work/s.snap" -n 29 $drafters --tree fixed --format jsonl > "$work/bf.jsonl"
            check "resume, $name, resumed on a fixed tree" "$(ids "$work/whole.jsonl")" "$(ids "$work/a.jsonl")$(ids "$work/bf.jsonl")"
        fi
    done
done

# Snapshots written by an earlier build (format version 1, by commit b04d84e's specula: data/v1-*.snap) load and
# continue (data/v1-*.ids): an n-gram session, greedy, exactly as that build continued it; a LongSpec session sampled
# at T = 1 on a fixed tree with the 12 tokens its round had queued, as that build emitted them, then the tokens this
# build draws from the saved generator (0.12 draws each sampled token by a keyed race instead of its CDF,
# docs/speculative.md: same distribution, other tokens), the same on another tree.
"$specula" generate --load-session "$src/tests/cli/data/v1-longspec-sampled.snap" -n 29 --draft "$draft" --tree fixed --format jsonl > "$work/v1a.jsonl"
check "a version-1 snapshot of a sampled LongSpec session" "$(cat "$src/tests/cli/data/v1-longspec-sampled.ids")" "$(ids "$work/v1a.jsonl")"
"$specula" generate --load-session "$src/tests/cli/data/v1-longspec-sampled.snap" -n 29 --draft "$draft" --tree 1,1 --format jsonl > "$work/v1c.jsonl"
check "a version-1 snapshot of a sampled LongSpec session, resumed on another tree" "$(cat "$src/tests/cli/data/v1-longspec-sampled.ids")" "$(ids "$work/v1c.jsonl")"
"$specula" generate --load-session "$src/tests/cli/data/v1-ngram-greedy.snap" -n 29 --spec ngram --format jsonl > "$work/v1b.jsonl"
check "a version-1 snapshot of a greedy n-gram session" "$(cat "$src/tests/cli/data/v1-ngram-greedy.ids")" "$(ids "$work/v1b.jsonl")"

# A snapshot made with a draft is refused without it, with the reason and exit status 1.
"$specula" generate -p "$prompt" -n 5 --draft "$draft" --save-session "$work/d.snap" > /dev/null 2>&1
if "$specula" generate --load-session "$work/d.snap" -n 5 > /dev/null 2> "$work/err.txt"; then
    fail "a snapshot with a draft loaded without it"
else
    grep -q "SPECULA_ERR_INCOMPATIBLE" "$work/err.txt" && echo "ok   refused without its draft: $(cat "$work/err.txt")" ||
        fail "unexpected error: $(cat "$work/err.txt")"
fi

# The prompt cache: a second process restores the prompt and prints exactly what the first did.
"$specula" generate -p "$prompt" -n 30 --temp 0 --prompt-cache "$work/cache" --format jsonl > "$work/c1.jsonl"
"$specula" generate -p "$prompt" -n 30 --temp 0 --prompt-cache "$work/cache" --format jsonl > "$work/c2.jsonl"
check "prompt cache, same output" "$(ids "$work/c1.jsonl")" "$(ids "$work/c2.jsonl")"
grep -q '"restored_tokens"' "$work/c2.jsonl" && echo "ok   prompt cache restored: $(grep -o '"restored_tokens":[0-9]*' "$work/c2.jsonl")" ||
    fail "the second run restored nothing"

finish
