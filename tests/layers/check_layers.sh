#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the sources (the build checks the first one too: the
# specula_core target has no include path that reaches backends/, so such an include does not compile).
#   1. The core (sdk/src) includes no backend's header: it reaches backends only through the registry.
#   2. A backend includes no other backend's header (backends/cpu, backends/cuda and backends/vulkan know the core only).
#   3. Only backends/registry.cpp names the backends' entry points.
#   4. Inside the core, folders include only their own and lower ones, in this order (lowest first):
#        core formats gguf tokenizer grammar model chat sampling graph backend speculative snapshot session api
#      (a model is described as a graph, which backends execute; drafters use backends; sessions use drafters and
#      snapshots; the C shims use everything).
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
core_order=(core formats gguf tokenizer grammar model chat sampling graph backend speculative snapshot session api)
rank_of() {
    local i
    for i in "${!core_order[@]}"; do [ "${core_order[$i]}" = "$1" ] && echo "$i" && return; done
    echo -1
}
upward=""
for dir in "${core_order[@]}"; do
    [ -d "sdk/src/$dir" ] || continue
    rank=$(rank_of "$dir")
    while IFS= read -r hit; do
        [ -n "$hit" ] || continue
        target=$(echo "$hit" | sed -E 's/.*#include *"([a-z_]+)\/.*/\1/')
        trank=$(rank_of "$target")
        if [ "$trank" -lt 0 ]; then
            upward+="$hit (includes '$target', a folder the order does not name)"$'\n'
        elif [ "$trank" -gt "$rank" ]; then
            upward+="$hit ($dir is below $target)"$'\n'
        fi
    done < <(grep -rnE '#include *"[a-z_]+/' "sdk/src/$dir" || true)
done
for dir in sdk/src/*/; do
    dir=$(basename "$dir")
    [ "$(rank_of "$dir")" -ge 0 ] || upward+="sdk/src/$dir: a core folder the order does not name"$'\n'
done
report "the core's folders include only their own and lower ones (${core_order[*]})" "$(printf '%s' "$upward")"
exit $fail
