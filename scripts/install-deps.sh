#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages Specula needs (apt-get, with sudo when not root). Packages already installed
# are left alone, and when nothing is missing apt is not run at all.
#
#   scripts/install-deps.sh          what the build needs (the README's first command): compiler, CMake, the libraries
#   scripts/install-deps.sh --all    also what the optional parts and their tests need: the Qt demo and Xvfb, the
#                                    trainer's PyTorch, Mono for the C# binding, cargo/rustc/bindgen for the Rust one,
#                                    abigail-tools for the ABI check, dpkg-dev for the .deb packages, the Vulkan headers,
#                                    glslc, Mesa's lavapipe and the validation layers for the Vulkan backend, clang with
#                                    libFuzzer for tests/fuzz and CI's sanitizer builds, Node for the server's chat page
#                                    test (what CI installs)
# Without a package, its tests report "Skipped" and say which package to install; the build leaves the part out.
set -euo pipefail

build=(cmake g++ make pkg-config catch2 nlohmann-json3-dev libcli11-dev libpcre2-dev libzstd-dev libxxhash-dev
       libcpp-httplib-dev)
optional=(
    qt6-base-dev qt6-charts-dev libqt6opengl6-dev qt6-qpa-plugins xvfb xauth fonts-dejavu-core git  # the Qt demo
    python3-torch python3-numpy python3-pytest libopenblas0-pthread                                   # the draft trainer
    mono-mcs mono-runtime                                                                             # bindings/csharp
    rustc cargo bindgen libclang-dev                                                                  # bindings/rust
    abigail-tools dpkg-dev file                                                                       # ABI check, .deb
    libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers                                  # Vulkan backend, lavapipe tests
    clang libclang-rt-14-dev                                                                          # CI's sanitizer builds, libFuzzer (bench/fuzz)
    nodejs                                                                                            # the server's chat page, run by its test
)
packages=("${build[@]}")
case "${1:-}" in
    --all) packages+=("${optional[@]}") ;;
    "") ;;
    *) echo "usage: $0 [--all]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages are installed"
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "install-deps: not a Debian/Ubuntu system; install the equivalents of: ${missing[*]}" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
