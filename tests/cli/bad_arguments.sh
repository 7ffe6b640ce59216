#!/usr/bin/env bash
# The CLI's part of the malformed-input catalogue (docs/reliability.md; the library's part is
# tests/catalogue/test_malformed_catalogue.cpp): the `specula` CLI run with bad arguments and bad files. Each entry
# must exit with its code (2 usage error, 1 runtime failure: tools/specula/main.cpp) and print a short message on
# stderr that names the problem: no abort, no stack trace, no signal, nothing on stdout.
# Usage: bad_arguments.sh SPECULA_BINARY SOURCE_DIR [--markdown FILE]  (--markdown also appends each entry's row, with
# the message it got, to FILE: the table of docs/reliability.md)
# shellcheck source=tests/cli/cli_common.sh
source "$(dirname "$0")/cli_common.sh"
markdown=""
if [ "${3:-}" == "--markdown" ]; then markdown="$4"; fi

model="$src/models/stories260K.gguf"
other_draft="$src/models/drafts/code-7m.longspec.gguf"
printf 'hello, not a model\n' > "$work/text.gguf"
head -c 1000 "$model" > "$work/truncated.gguf"
printf 'garbage' > "$work/bad.snap"
mkdir -p "$work/dir.gguf"

# entry ID "WHAT IS WRONG" EXIT "MESSAGE FRAGMENT" -- ARGS...
entry() {
    local id="$1" what="$2" code="$3" fragment="$4"
    shift 5
    local out err rc=0
    out="$work/$id.out"
    err="$work/$id.err"
    timeout 60 "$specula" "$@" > "$out" 2> "$err" < /dev/null || rc=$?
    local problems=""
    [ "$rc" == "$code" ] || problems+=" exit $rc (expected $code);"
    grep -qiF -- "$fragment" "$err" || problems+=" stderr lacks '$fragment';"
    [ "$(wc -l < "$err")" -le 3 ] || problems+=" stderr has $(wc -l < "$err") lines;"
    grep -qiE 'terminate called|Aborted|Segmentation|stack trace|what\(\)' "$err" && problems+=" a crash/abort message;"
    [ ! -s "$out" ] || problems+=" output on stdout;"
    if [ -n "$markdown" ]; then
        local cmd="$*" message
        cmd="${cmd//$src/.}"
        cmd="${cmd//$work/TMP}"
        message="$(head -n 1 "$err" | sed "s#$work#TMP#g; s#$src#.#g; s#|# #g")"
        printf '| `%s` | `specula %s`: %s | %s | "%s" | %s |\n' "$id" "$cmd" "$what" "$code" "$fragment" "$message" >> "$markdown"
    fi
    if [ -z "$problems" ]; then
        echo "ok   $id (exit $rc): $(head -n 1 "$err")"
    else
        fail "$id:$problems"
        echo "  stderr: $(head -c 600 "$err")"
    fi
}

entry cli-no-command "no subcommand" 2 "subcommand" --
entry cli-unknown-command "an unknown subcommand" 2 "unknown command 'frobnicate'" -- frobnicate
entry cli-unknown-flag "an unknown flag" 2 "--bogus" -- generate --bogus
entry cli-missing-value "-n without its value" 2 "-n" -- generate -m "$model" -p hi -n
entry cli-non-numeric "-n abc" 2 "abc" -- generate -m "$model" -p hi -n abc
entry cli-negative-threads "--threads -3" 2 "threads" -- generate -m "$model" -p hi -t -3
entry cli-out-of-range-top-p "--top-p 1.5" 2 "top-p" -- generate -m "$model" -p hi --top-p 1.5
entry cli-huge-ctx "--ctx-size 99999999999 (overflows int32)" 2 "ctx-size" -- generate -m "$model" -p hi -c 99999999999
entry cli-bad-backend "--backend tpu" 2 "tpu" -- generate -m "$model" -p hi --backend tpu
entry cli-bad-kv-type "--kv-type q2" 2 "q2" -- generate -m "$model" -p hi --kv-type q2
entry cli-bad-draw "--draw mt19937 (neither race nor llama.cpp)" 2 "draw" -- generate -m "$model" -p hi --temp 1 --draw mt19937
entry cli-bad-format "--format xml" 2 "xml" -- generate -m "$model" -p hi --format xml
entry cli-bad-prompt-ids "--prompt-ids 1,x,3" 2 "'x' is not a token id" -- generate -m "$model" --prompt-ids 1,x,3
entry cli-invalid-token-id "--prompt-ids 1,99999 (outside the vocabulary)" 1 "99999" -- generate -m "$model" --prompt-ids 1,99999 -n 2
entry cli-conflicting-prompts "-p and --prompt-ids together" 2 "excludes" -- generate -m "$model" -p hi --prompt-ids 1,2
entry cli-conflicting-drafts "--draft and --draft-model together" 2 "excludes" -- generate -m "$model" -p hi --draft "$draft" --draft-model "$model"
entry cli-tree-without-draft "--tree 2,2 without a model drafter" 2 "--tree" -- generate -m "$model" -p hi --tree 2,2
entry cli-zero-context-penalty "--context-penalty 0" 2 "must be a number > 0, not '0'" -- generate -m "$model" -p hi --context-penalty 0
entry cli-nan-repeat-penalty "--repeat-penalty nan" 2 "must be a number > 0" -- generate -m "$model" -p hi --repeat-penalty nan
entry cli-nan-temperature "--temp nan" 1 "temperature is NaN" -- generate -m "$model" -p hi --temp nan -n 2
entry cli-bad-tree "--tree 0,5 with a draft" 2 "'0' is not a level width" -- generate -m "$model" -p hi --draft "$draft" --tree 0,5
entry cli-ngram-nodes-alone "--ngram-nodes without --spec ngram" 2 "needs --spec ngram" -- generate -m "$model" -p hi --ngram-nodes 5
entry cli-bad-spec "--spec foo" 2 "foo" -- generate -m "$model" -p hi --spec foo
entry cli-spec-grammar-alone "--spec grammar without a grammar" 2 "needs --grammar" -- generate -m "$model" -p hi --spec grammar
entry cli-shift-keep "--context-shift keeping more than the context" 1 "keeps 5000 tokens" -- generate -m "$model" -p hi --context-shift -c 64 --keep 5000
entry cli-prompt-cache-file "--prompt-cache naming a regular file" 1 "SPECULA_ERR_IO" -- generate -m "$model" -p hi --prompt-cache "$work/text.gguf" -n 2
entry cli-draft-model-other-vocab "--draft-model with another vocabulary (code-7m)" 1 "SPECULA_ERR_INCOMPATIBLE" -- generate -m "$model" -p hi --draft-model "$src/models/code-7m-f16.gguf"
entry cli-snapshot-is-model "--load-session of a GGUF model" 1 "not a Specula snapshot" -- generate -m "$model" -p hi --load-session "$model"
entry cli-missing-model "a model file that does not exist" 1 "missing.gguf" -- generate -m "$work/missing.gguf" -p hi
entry cli-text-model "a text file as the model" 1 "bad magic" -- generate -m "$work/text.gguf" -p hi
entry cli-truncated-model "a model truncated to 1000 bytes" 1 "SPECULA_ERR_FORMAT" -- generate -m "$work/truncated.gguf" -p hi
entry cli-directory-model "a directory as the model" 1 "not a regular file" -- info "$work/dir.gguf"
entry cli-draft-other-model "a draft made for another model (code-7m)" 1 "SPECULA_ERR_INCOMPATIBLE" -- generate -m "$model" -p hi --draft "$other_draft"
entry cli-bad-snapshot "--load-session of a file that is not a snapshot" 1 "SPECULA_ERR_FORMAT" -- generate -m "$model" -p hi --load-session "$work/bad.snap"
entry cli-missing-prompt-file "-f of a missing file" 1 "nope.txt" -- generate -m "$model" -f "$work/nope.txt"
entry cli-tokenize-no-input "tokenize without text" 2 "give the text" -- tokenize -m "$model"
entry cli-draft-init-no-out "draft-init without --out" 2 "--out" -- draft-init -m "$model"
entry cli-synth-bad-shape "synth --shape gpt-5" 2 "gpt-5" -- synth --shape gpt-5 --type f32 --vocab "$model" --out "$work/x.gguf"
entry cli-serve-bad-port "serve --port 70000" 2 "port" -- serve -m "$model" --port 70000
entry cli-serve-slot-path-file "serve --slot-save-path naming a file" 2 "not a folder" -- serve -m "$model" --slot-save-path "$work/bad.snap"
entry cli-serve-bad-request-timeout "serve --request-timeout 0" 2 "request-timeout" -- serve -m "$model" --request-timeout 0

finish
