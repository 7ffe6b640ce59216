#!/usr/bin/env bash
# package:install-tree: `cmake --install` of this build into a scratch prefix (the fixture that the C, C# and Rust
# consumer tests use), then checks the layout a user relies on and runs the installed CLI with nothing of the
# build tree in reach.
#   install_tree.sh BUILD_DIR PREFIX
set -euo pipefail
build=$1 prefix=$2
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null

source "$(dirname "$0")/common.sh"
lib=$prefix/lib
for f in include/specula/specula.h include/specula/specula.hpp include/specula/specula_experimental.h lib/pkgconfig/specula.pc \
         lib/cmake/specula/SpeculaConfig.cmake lib/cmake/specula/SpeculaConfigVersion.cmake \
         lib/cmake/specula/specula-targets.cmake bin/specula share/specula/models/stories260K.gguf; do
    [ -e "$prefix/$f" ] || fail "$f is not installed"
done
# The library: real name libspecula.so.1.M.P, the SONAME link libspecula.so.1, the development link libspecula.so.
soname=$(readelf -d "$lib/libspecula.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libspecula.so.1 ] || fail "SONAME is '$soname', expected libspecula.so.1"
[ -L "$lib/libspecula.so.1" ] && [ -L "$lib/libspecula.so" ] || fail "the SONAME and development links are missing"
real=$(readlink -f "$lib/libspecula.so")
case "$real" in */libspecula.so.1.*) ;; *) fail "the real name is $real" ;; esac
# Only the C ABI is exported.
others=$(nm -D --defined-only "$real" | awk '$2 ~ /[TDBRW]/ && $3 !~ /^specula_/ && $3 !~ /^_(init|fini|edata|end|_bss_start)$/ {print $3}' | head -5)
[ -z "$others" ] || fail "libspecula exports non-specula symbols: $others"

# The installed CLI finds its library (RUNPATH $ORIGIN/../lib) and the installed model, from another folder.
out=$(cd / && env -u LD_LIBRARY_PATH "$prefix/bin/specula" generate -p "Once upon a time" -n 12 --temp 0 2>/dev/null)
[ -n "$out" ] || fail "the installed CLI generated nothing"
require_installed_library "$prefix/bin/specula" "$real"
echo "installed into $prefix: $(basename "$real") (SONAME $soname); the CLI says: $out"
