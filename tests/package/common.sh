# Shared by the package tests (sourced): a failure message, a C example built against an installed prefix with
# pkg-config, and the check that a program loads the installed libspecula rather than another copy.

fail() { echo "FAIL: $*"; exit 1; }

# build_example_pkgconfig PREFIX SOURCE_DIR EXAMPLE OUT: bindings/c/EXAMPLE.c against PREFIX's specula.pc. The prefix
# is not on the loader's path, so the program records it (-rpath), as a user of a private prefix would.
build_example_pkgconfig() {
    local prefix=$1 src=$2 example=$3 out=$4
    PKG_CONFIG_PATH=$prefix/lib/pkgconfig cc -std=c99 -Wall -Wextra -pedantic -Werror \
        -DSPECULA_EXAMPLE_MODEL="\"$prefix/share/specula/models/stories260K.gguf\"" "$src/bindings/c/$example.c" -o "$out" \
        $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs specula) -Wl,-rpath,"$prefix/lib" \
        || fail "cc $example.c against $prefix"
}

# require_installed_library PROGRAM LIBRARY: PROGRAM resolves libspecula to LIBRARY (after links).
require_installed_library() {
    local resolved
    resolved=$(env -u LD_LIBRARY_PATH ldd "$1" | awk '/libspecula/ {print $3}')
    [ "$(readlink -f "$resolved")" = "$(readlink -f "$2")" ] || fail "$(basename "$1") loads '$resolved', not $2"
}
