#!/usr/bin/env bash
# package:c-examples-cmake / package:c-examples-pkgconfig: the C examples (bindings/c) built against the installed
# package, with CMake's find_package(Specula) or with pkg-config, and run: streaming, speculative decoding equal to
# plain decoding with a LongSpec draft and with n-grams, and cancellation from a SIGINT handler.
#   c_examples.sh cmake|pkgconfig PREFIX SOURCE_DIR WORK_DIR
set -euo pipefail
mode=$1 prefix=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
unset LD_LIBRARY_PATH
source "$(dirname "$0")/common.sh"
model=$prefix/share/specula/models/stories260K.gguf
draft=$src/models/drafts/stories260K.longspec.gguf

case "$mode" in
cmake)
    cmake -S "$src/bindings/c" -B "$work" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" \
        || { cat "$work/configure.log"; fail "configure"; }
    cmake --build "$work" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
    ;;
pkgconfig)
    command -v pkg-config >/dev/null || { echo "SKIPPED: pkg-config is not installed"; exit 77; }
    export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
    [ "$(pkg-config --modversion specula)" != "" ] || fail "pkg-config does not find specula"
    for example in stream speculative cancel; do build_example_pkgconfig "$prefix" "$src" $example "$work/$example"; done
    ;;
*) fail "mode must be cmake or pkgconfig" ;;
esac

# Every example must load the installed library, not the build tree's.
for example in stream speculative cancel; do require_installed_library "$work/$example" "$prefix/lib/libspecula.so.1"; done

story=$("$work/stream" 2>"$work/stream.err")
echo "stream: $story"
grep -q "48 tokens (max_tokens)" "$work/stream.err" || { cat "$work/stream.err"; fail "stream did not generate 48 tokens"; }

"$work/speculative" "$model" ngram 160 | tee "$work/ngram.out"
grep -q "^identical: 160 tokens" "$work/ngram.out" || fail "n-gram speculative output differs from plain"
if [ -f "$draft" ]; then
    "$work/speculative" "$model" "$draft" 160 | tee "$work/longspec.out"
    grep -q "^identical: 160 tokens" "$work/longspec.out" || fail "LongSpec speculative output differs from plain"
    grep -q "^drafter: longspec" "$work/longspec.out" || fail "the LongSpec draft was not attached"
fi

"$work/cancel" --self-signal 10 >"$work/cancel.out" 2>"$work/cancel.err" || { cat "$work/cancel.err"; fail "cancel"; }
cat "$work/cancel.err"
grep -q "SPECULA_ERR_CANCELLED after 10 tokens: cancelled" "$work/cancel.err" || fail "SIGINT did not cancel after 10 tokens"
grep -q "resumed:" "$work/cancel.err" || fail "the session did not generate on after the cancel"
echo "c examples ($mode): ok"
