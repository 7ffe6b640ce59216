#!/usr/bin/env bash
# The ABI check of libspecula against the committed dump of this release (abi/libspecula.so.N.abi), with Debian's
# abigail-tools (abidw, abidiff).
#
#   tools/abi/abi.sh check     LIB   compare LIB with the baseline for its SONAME; fails on an incompatible change
#                                    (a function removed or changed, a struct changed other than by appending) while
#                                    the SONAME stays; compatible additions pass with a note to refresh the baseline
#   tools/abi/abi.sh update    LIB   write the baseline for LIB's SONAME (after an intended change, or a SONAME bump)
#   tools/abi/abi.sh self-test LIB   shows that check fails on incompatible changes and passes compatible ones, by
#                                    comparing the baseline with edited copies of LIB's dump
# Exit 77 (ctest: skipped) when abigail-tools is not installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
headers=$root/sdk/include/specula
suppressions=$root/abi/specula.abignore
mode=${1:-} lib=${2:-}
[ -n "$mode" ] && [ -f "$lib" ] || { echo "usage: $0 check|update|self-test LIBSPECULA.so"; exit 2; }
if ! command -v abidw >/dev/null || ! command -v abidiff >/dev/null; then
    echo "SKIPPED: abigail-tools is not installed (apt-get install abigail-tools)"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The ABI as users see it: the functions exported and the types of specula.h they reach.
dump() {
    abidw --exported-interfaces-only --headers-dir "$headers" --drop-private-types --no-corpus-path \
          --no-comp-dir-path --no-show-locs "$1" | sed -e "s|path='[^']*/sdk/src/api/|path='sdk/src/api/|"
}
soname_of_dump() { sed -n "s/.*<abi-corpus [^>]*soname='\([^']*\)'.*/\1/p" "$1" | head -1; }

# compare BASELINE CURRENT: prints the verdict; exit 0 compatible, 1 incompatible.
compare() {
    local base=$1 cur=$2 rc=0 report
    report=$(abidiff --no-show-locs --suppressions "$suppressions" "$base" "$cur") || rc=$?
    if [ $((rc & 3)) -ne 0 ]; then echo "$report"; echo "abidiff failed to run (exit $rc)"; return 2; fi
    local removed changed vremoved vchanged
    removed=$(sed -n 's/^Functions changes summary: \([0-9]*\) Removed.*/\1/p' <<<"$report")
    changed=$(sed -n 's/^Functions changes summary: [0-9]* Removed, \([0-9]*\) Changed.*/\1/p' <<<"$report")
    vremoved=$(sed -n 's/^Variables changes summary: \([0-9]*\) Removed.*/\1/p' <<<"$report")
    vchanged=$(sed -n 's/^Variables changes summary: [0-9]* Removed, \([0-9]*\) Changed.*/\1/p' <<<"$report")
    local sym_removed
    sym_removed=$(sed -n 's/^Function symbols changes summary: \([0-9]*\) Removed.*/\1/p' <<<"$report")
    if [ $rc -eq 0 ]; then echo "ABI unchanged"; return 0; fi
    echo "$report"
    if [ $((rc & 8)) -ne 0 ] || [ "${removed:-0}" != 0 ] || [ "${changed:-0}" != 0 ] || [ "${vremoved:-0}" != 0 ] \
       || [ "${vchanged:-0}" != 0 ] || [ "${sym_removed:-0}" != 0 ]; then
        echo "INCOMPATIBLE ABI change (exit $rc)"
        return 1
    fi
    echo "compatible ABI change (additions only): refresh the baseline with tools/abi/abi.sh update"
    return 0
}

check() {  # check CURRENT_DUMP
    local cur=$1 soname base
    soname=$(soname_of_dump "$cur")
    base=$root/abi/$soname.abi
    if [ ! -f "$base" ]; then
        echo "no baseline for $soname in abi/ (baselines: $(cd "$root/abi" && ls *.abi 2>/dev/null | tr '\n' ' '))"
        echo "a new SONAME needs its baseline committed: tools/abi/abi.sh update $lib"
        return 1
    fi
    echo "comparing $soname with abi/$soname.abi"
    compare "$base" "$cur"
}

dump "$lib" >"$work/current.abi"
case "$mode" in
check)
    check "$work/current.abi"
    ;;
update)
    soname=$(soname_of_dump "$work/current.abi")
    cp "$work/current.abi" "$root/abi/$soname.abi"
    echo "wrote abi/$soname.abi ($(grep -c '<function-decl' "$root/abi/$soname.abi") functions)"
    ;;
self-test)
    soname=$(soname_of_dump "$work/current.abi")
    base=$root/abi/$soname.abi
    [ -f "$base" ] || { echo "no baseline abi/$soname.abi"; exit 1; }
    edit() { python3 "$here/edit_abi_dump.py" "$@"; }
    expect() {  # expect pass|fail NAME DUMP
        local want=$1 name=$2 dumpfile=$3 got=pass out
        out=$(compare "$base" "$dumpfile" 2>&1) || got=fail
        if [ "$got" != "$want" ]; then
            echo "$out"; echo "FAIL: $name: the check says $got, expected $want"; exit 1
        fi
        echo "ok: $name -> $got ($(tail -1 <<<"$out"))"
    }
    expect pass "this build against the baseline" "$work/current.abi"
    edit remove-function specula_session_cancel <"$base" >"$work/removed.abi"
    expect fail "specula_session_cancel removed" "$work/removed.abi"
    edit insert-member specula_stats n_generated <"$base" >"$work/inserted.abi"
    expect fail "a field inserted into specula_stats before its end" "$work/inserted.abi"
    edit retype-parameter specula_session_rewind <"$base" >"$work/retyped.abi"
    expect fail "a parameter of specula_session_rewind retyped" "$work/retyped.abi"
    edit append-member specula_stats <"$base" >"$work/appended.abi"
    expect pass "a field appended to specula_stats (versioned by struct_size)" "$work/appended.abi"
    edit add-function specula_session_cancel specula_session_cancel_all <"$base" >"$work/added.abi"
    expect pass "a function added" "$work/added.abi"
    # With a SONAME bump the removal is allowed: the check then looks for the new SONAME's baseline instead.
    edit soname libspecula.so.2 <"$work/removed.abi" >"$work/bumped.abi"
    if check "$work/bumped.abi" >/dev/null; then echo "FAIL: a bumped SONAME without its baseline passed"; exit 1; fi
    echo "ok: a removal with the SONAME bumped to libspecula.so.2 asks for abi/libspecula.so.2.abi instead of failing the old one"
    echo "abi self-test: ok"
    ;;
*)
    echo "unknown mode $mode"; exit 2 ;;
esac
