#!/usr/bin/env bash
# `specula generate --tree auto|fixed|W,W,..` as a user runs it: every mode prints the model's own greedy tokens, the
# stats say which tree the last round drafted ("tree" in JSON, "(tree ...)" on the stats line), and bad values are
# usage errors. Usage: tree_modes.sh SPECULA_BINARY SOURCE_DIR
# shellcheck source-path=SCRIPTDIR source=cli_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_common.sh"
tree() { sed -n 's/.*"tree":"\([^"]*\)".*/\1/p' "$1"; }

prompt="Once upon a time, there was a little girl named Lily."
run() {  # out-file args...
    local out="$1"; shift
    "$specula" generate -p "$prompt" -n 60 --temp 0 --format jsonl "$@" > "$out"
}
run "$work/plain.jsonl"
expected="$(ids "$work/plain.jsonl")"

for drafters in "--spec ngram" "--draft $draft" "--draft $draft --spec ngram"; do
    # shellcheck disable=SC2086
    run "$work/default.jsonl" $drafters
    # shellcheck disable=SC2086
    run "$work/auto.jsonl" $drafters --tree auto
    # shellcheck disable=SC2086
    run "$work/fixed.jsonl" $drafters --tree fixed
    for mode in default auto fixed; do
        [ "$(ids "$work/$mode.jsonl")" == "$expected" ] || fail "$drafters, $mode: tokens differ from plain decoding"
    done
    case "$(tree "$work/default.jsonl")" in auto:*) ;; *) fail "$drafters: default tree is not auto: '$(tree "$work/default.jsonl")'" ;; esac
    case "$(tree "$work/auto.jsonl")" in auto:*) ;; *) fail "$drafters, --tree auto: '$(tree "$work/auto.jsonl")'" ;; esac
    want="4,16,16,16,16+ngram:16"
    [[ "$drafters" == *--draft* ]] || want="ngram:16"
    [[ "$drafters" == *--spec* ]] || want="4,16,16,16,16"
    [ "$(tree "$work/fixed.jsonl")" == "$want" ] || fail "$drafters, --tree fixed: '$(tree "$work/fixed.jsonl")', expected '$want'"
    echo "ok   $drafters: auto's last tree $(tree "$work/auto.jsonl"), fixed $(tree "$work/fixed.jsonl")"
done

# Widths draft that tree every round; the text stats line names it.
"$specula" generate -p "$prompt" -n 20 --temp 0 --draft "$draft" --tree 1,1,1 > /dev/null 2> "$work/err.txt"
grep -q "spec longspec (tree 1,1,1): tau" "$work/err.txt" && echo "ok   stats line: $(grep -o 'spec longspec (tree [^)]*)' "$work/err.txt")" ||
    fail "stats line without the tree: $(cat "$work/err.txt")"

# Bad values are usage errors (exit 2) that say what is expected.
for bad in "--tree 0,4" "--tree auto,4" "--tree" ; do
    # shellcheck disable=SC2086
    if "$specula" generate -p "$prompt" -n 2 --draft "$draft" $bad > /dev/null 2> "$work/err.txt"; then
        fail "'$bad' was accepted"
    else
        status=$?
        [ "$status" -eq 2 ] && echo "ok   '$bad' refused: $(head -1 "$work/err.txt")" || fail "'$bad': exit $status, expected 2"
    fi
done
"$specula" generate -p "$prompt" -n 2 --spec ngram --tree 1,1 > /dev/null 2> "$work/err.txt" && fail "--tree widths without a model drafter accepted" ||
    echo "ok   widths need a model drafter: $(head -1 "$work/err.txt")"

finish
