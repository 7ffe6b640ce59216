#!/usr/bin/env bash
# run_tests.sh - build and test the C# binding with Debian's Mono against an INSTALLED libspecula.
#
#   bindings/csharp/run_tests.sh PREFIX BUILD_DIR --build-only         compile Specula.dll, Example.exe, SpeculaTests.exe, sizes
#   bindings/csharp/run_tests.sh PREFIX BUILD_DIR [test ...]            (re)build if needed, run the tests (none: all)
#   bindings/csharp/run_tests.sh PREFIX BUILD_DIR --check-list name...  the test list registered in CMake must match
#
# PREFIX is an install prefix of Specula (lib/libspecula.so.1, include/specula/specula.h, bin/specula). The tests load
# the library from PREFIX/lib only (LD_LIBRARY_PATH=PREFIX/lib, never the build tree) through Specula.dll.config, the
# Mono dllmap from "specula" to libspecula.so.1. The models come from this repository's models/ directory.
# Exit status: 0 passed, 1 failed, 2 usage or unknown test, 77 skipped (no mcs/mono).
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 PREFIX BUILD_DIR [--build-only | --check-list NAME... | TEST...]" >&2
    exit 2
fi
if ! command -v mcs >/dev/null 2>&1 || ! command -v mono >/dev/null 2>&1; then
    echo "SKIPPED: mono-mcs/mono-runtime not installed (apt-get install mono-mcs mono-runtime)"
    exit 77
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PREFIX="$(cd "$1" 2>/dev/null && pwd)" || { echo "error: install prefix '$1' does not exist" >&2; exit 1; }
mkdir -p "$2"
BUILD_DIR="$(cd "$2" && pwd)"
shift 2

HEADER="$PREFIX/include/specula/specula.h"
LIB="$PREFIX/lib/libspecula.so.1"
for f in "$HEADER" "$LIB"; do
    [[ -e "$f" ]] || { echo "error: $f not found: is '$PREFIX' an installed Specula prefix?" >&2; exit 1; }
done
MODEL="$REPO/models/stories260K.gguf"
DRAFT="$REPO/models/drafts/stories260K.longspec.gguf"

SOURCES=("$HERE"/src/*.cs)
OUTPUTS=("$BUILD_DIR/Specula.dll" "$BUILD_DIR/Specula.dll.config" "$BUILD_DIR/Example.exe" "$BUILD_DIR/SpeculaTests.exe"
         "$BUILD_DIR/sizes.txt")

# Up to date when every output exists and is newer than every input (sources, this script, the installed header).
up_to_date() {
    local out
    for out in "${OUTPUTS[@]}"; do
        [[ -e "$out" ]] || return 1
        if [[ -n "$(find "$HERE/src" "$HERE/tests" "$HERE/examples" "$HERE/run_tests.sh" "$HEADER" -newer "$out" -print -quit)" ]]; then
            return 1
        fi
    done
    return 0
}

build() {
    # ctest may start several entries at once: one builds, the others wait and then find it done.
    exec 9>"$BUILD_DIR/.build.lock"
    flock 9
    if up_to_date; then
        flock -u 9
        return 0
    fi
    local stage="$BUILD_DIR/.stage"
    rm -rf "$stage"
    mkdir -p "$stage"
    echo "building the C# binding into $BUILD_DIR"
    mcs -nologo -target:library -unsafe -debug -warn:4 -warnaserror+ -out:"$stage/Specula.dll" \
        -r:System.dll -r:System.Core.dll "${SOURCES[@]}"
    cp "$HERE/src/Specula.dll.config" "$stage/Specula.dll.config"
    mcs -nologo -target:exe -debug -warn:4 -warnaserror+ -out:"$stage/Example.exe" \
        -r:System.dll -r:"$stage/Specula.dll" "$HERE/examples/Example.cs"
    mcs -nologo -target:exe -unsafe -debug -warn:4 -out:"$stage/SpeculaTests.exe" \
        -r:System.dll -r:System.Core.dll -r:"$stage/Specula.dll" -r:"$stage/Example.exe" "$HERE/tests/Tests.cs"
    # The C compiler's view of the installed header, for the struct_layout test.
    ${CC:-cc} -std=c99 -Wall -Werror -I"$PREFIX/include" "$HERE/tests/sizes.c" -o "$stage/sizes"
    "$stage/sizes" >"$stage/sizes.txt"
    mv -f "$stage"/* "$BUILD_DIR"/
    rmdir "$stage"
    flock -u 9
}

if [[ "${1:-}" == "--build-only" ]]; then
    build
    echo "built: $BUILD_DIR/Specula.dll $BUILD_DIR/SpeculaTests.exe"
    exit 0
fi

build

export LD_LIBRARY_PATH="$PREFIX/lib"
export SPECULA_PREFIX="$PREFIX"
export SPECULA_CS_SIZES="$BUILD_DIR/sizes.txt"
export SPECULA_CS_TMP="$BUILD_DIR/tmp"
mkdir -p "$SPECULA_CS_TMP"

if [[ "${1:-}" == "--check-list" ]]; then
    shift
    exec mono "$BUILD_DIR/SpeculaTests.exe" --check-list "$@"
fi
exec mono "$BUILD_DIR/SpeculaTests.exe" "$MODEL" "$DRAFT" "$@"
