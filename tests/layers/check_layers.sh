#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the sources (the build checks the first one too: the
# specula_core target has no include path that reaches backends/, so such an include does not compile).
#   1. The core (sdk/src) includes no backend's header: it reaches backends only through the registry.
#   2. A backend includes no other backend's header (backends/cpu, backends/cuda and backends/vulkan know the core only).
#   3. Only backends/registry.cpp names the backends' entry points.
set -u
root=${1:?usage: check_layers.sh <source dir>}
cd "$root" || exit 2
fail=0
report() {  # $1: rule, $2: offending lines
    if [ -n "$2" ]; then
        echo "FAIL: $1"
        echo "$2" | sed 's/^/  /'
        fail=1
    else
        echo "ok: $1"
    fi
}
report "the core includes no backend header" "$(grep -rnE '#include *[<"](\.\./)*backends/' sdk/src || true)"
report "backends/cpu includes no other backend" "$(grep -rnE '#include *[<"](\.\./)*backends/(cuda|vulkan)/' backends/cpu || true)"
report "backends/cuda includes no other backend" "$(grep -rnE '#include *[<"](\.\./)*backends/(cpu|vulkan)/' backends/cuda || true)"
report "backends/vulkan includes no other backend" "$(grep -rnE '#include *[<"](\.\./)*backends/(cpu|cuda)/' backends/vulkan || true)"
report "only backends/registry.cpp names a backend's registry entry" \
    "$(grep -rnE '\b(cpu_backend|cuda_backend|vulkan_backend)\(\)' --include='*.cpp' --include='*.h' sdk backends tools tests bench demo_app 2>/dev/null |
        grep -vE '^backends/registry\.cpp:|^backends/[a-z]+/[a-z]+_backend\.(h|cpp):' || true)"
exit $fail
