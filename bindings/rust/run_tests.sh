#!/usr/bin/env bash
# Builds and tests the Rust bindings against an INSTALLED Specula (its lib/libspecula.so, nothing else).
#
#   run_tests.sh PREFIX TARGET_DIR                  cargo test (every test of both crates, doctests included)
#   run_tests.sh PREFIX TARGET_DIR --build-only     cargo test --no-run (build everything, run nothing)
#   run_tests.sh PREFIX TARGET_DIR ARGS...          cargo test ARGS... (e.g. `--test cancel`, `-p specula-sys`,
#                                                   a test-name filter, `-- --nocapture`)
#
# Uses Debian's cargo (/usr/bin/cargo, with the rustc and rustdoc beside it) when installed, else cargo on PATH.
# Exit 77 (SKIPPED) when there is no cargo at all. Offline: the crates have no dependencies.
# Environment: CARGO_HOME defaults to TARGET_DIR/cargo-home (nothing touches ~/.cargo), CARGO_BUILD_JOBS to 2.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 PREFIX TARGET_DIR [--build-only | cargo test args...]" >&2
    exit 2
fi
prefix="$(cd "$1" 2>/dev/null && pwd)" || { echo "run_tests.sh: prefix '$1' does not exist" >&2; exit 2; }
target_dir="$2"
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

cargo=""
if [ -x /usr/bin/cargo ]; then
    cargo=/usr/bin/cargo
elif command -v cargo >/dev/null 2>&1; then
    cargo="$(command -v cargo)"
fi
if [ -z "$cargo" ] || ! [ -x "$cargo" ] || ! "$cargo" --version >/dev/null 2>&1; then
    echo "SKIPPED: cargo/rustc not installed (apt-get install cargo rustc)"
    exit 77
fi
# The compiler that goes with that cargo: a rustup toolchain earlier on PATH must not be picked instead.
cargo_bin="$(dirname "$cargo")"
if [ -x "$cargo_bin/rustc" ]; then
    export RUSTC="$cargo_bin/rustc"
elif ! command -v rustc >/dev/null 2>&1; then
    echo "SKIPPED: cargo/rustc not installed (apt-get install cargo rustc)"
    exit 77
fi
if [ -x "$cargo_bin/rustdoc" ]; then
    export RUSTDOC="$cargo_bin/rustdoc"
fi

if ! [ -e "$prefix/lib/libspecula.so" ] && ! [ -e "$prefix/lib64/libspecula.so" ]; then
    echo "run_tests.sh: no libspecula.so under $prefix/lib (install Specula there first)" >&2
    exit 1
fi
libdir="$prefix/lib"
[ -e "$libdir/libspecula.so" ] || libdir="$prefix/lib64"

mkdir -p "$target_dir"
target_dir="$(cd "$target_dir" && pwd)"
export SPECULA_PREFIX="$prefix"
unset SPECULA_LIB_DIR
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_HOME="${CARGO_HOME:-$target_dir/cargo-home}"
export CARGO_NET_OFFLINE=true
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"

args=(test --offline --manifest-path "$here/Cargo.toml" --target-dir "$target_dir")
if [ "${1:-}" = "--build-only" ]; then
    shift
    args+=(--no-run)
fi
args+=("$@")

echo "+ $cargo ${args[*]}   ($("$cargo" --version), $("${RUSTC:-rustc}" --version), SPECULA_PREFIX=$prefix)"
exec "$cargo" "${args[@]}"
