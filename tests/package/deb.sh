#!/usr/bin/env bash
# package:deb: CPack's Debian packages of this build (libspecula1, libspecula-dev, specula), checked the way Debian
# splits a library, then unpacked into a scratch root and used there: the installed CLI runs, and a C program
# builds against the unpacked -dev package through pkg-config and runs on the unpacked runtime package.
#   deb.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 src=$2 work=$3
source "$(dirname "$0")/common.sh"
for tool in cpack dpkg-deb dpkg-shlibdeps file; do
    command -v $tool >/dev/null || { echo "SKIPPED: $tool is not installed (apt-get install dpkg-dev file)"; exit 77; }
done
rm -rf "$work" && mkdir -p "$work"
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")/\1/p' "$build/CPackConfig.cmake")
runtime=$(ls "$work"/libspecula1_*.deb) dev=$(ls "$work"/libspecula-dev_*.deb) tools=$(ls "$work"/specula_*.deb) \
    || fail "expected libspecula1, libspecula-dev and specula packages; got: $(ls "$work"/*.deb)"

field() { dpkg-deb -f "$1" "$2"; }
contents() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|'; }
# Runtime: the shared library under its SONAME and real name, nothing for development.
contents "$runtime" | grep -q '/lib/libspecula.so.1$' || fail "libspecula1 lacks libspecula.so.1"
contents "$runtime" | grep -q '/lib/libspecula.so.1\.[0-9]*\.[0-9]*$' || fail "libspecula1 lacks the real name"
if contents "$runtime" | grep -E '\.h$|\.pc$|/libspecula\.so$|cmake'; then fail "libspecula1 carries development files"; fi
# -dev: headers, the unversioned link, pkg-config and CMake files; depends on the exact runtime version.
for f in /include/specula/specula.h /include/specula/specula.hpp /lib/libspecula.so /lib/pkgconfig/specula.pc \
         /lib/cmake/specula/SpeculaConfig.cmake; do
    contents "$dev" | grep -q "$f\$" || fail "libspecula-dev lacks $f"
done
field "$dev" Depends | grep -q "libspecula1 (= $version)" || fail "libspecula-dev does not depend on libspecula1 (= $version)"
# The runtime's Depends come from dpkg-shlibdeps: the libraries it links (zstd, PCRE2, the C++ runtime).
deps=$(field "$runtime" Depends)
for lib in libc6 libstdc++6 libzstd1 libpcre2-8-0; do
    grep -q "$lib" <<<"$deps" || fail "libspecula1 Depends lacks $lib: $deps"
done
field "$tools" Depends | grep -q "libspecula1 (= $version)" || fail "specula does not depend on libspecula1"
contents "$tools" | grep -q '/bin/specula$' || fail "the specula package lacks the CLI"

root=$work/root
for deb in "$runtime" "$dev" "$tools"; do dpkg-deb -x "$deb" "$root"; done
prefix=$(dirname "$(dirname "$(find "$root" -path '*/bin/specula' | head -1)")")
unset LD_LIBRARY_PATH
out=$("$prefix/bin/specula" generate -p "Once upon a time" -n 8 --temp 0 2>/dev/null) || fail "the packaged CLI did not run"
[ -n "$out" ] || fail "the packaged CLI generated nothing"
build_example_pkgconfig "$prefix" "$src" stream "$work/stream"
require_installed_library "$work/stream" "$prefix/lib/libspecula.so.1"
"$work/stream" >"$work/stream.out" 2>&1 || { cat "$work/stream.out"; fail "the program built against the packages"; }
printf 'packages: %s\n' "$(cd "$work" && ls *.deb | tr '\n' ' ')"
printf 'libspecula1 Depends: %s\n' "$deps"
echo "packaged CLI: $out"
echo "deb: ok"
