#include "backends/cuda/cublas_library.h"


#ifndef SPECULA_CUDA_EMULATION
#include <dlfcn.h>

#include <cstdlib>
#include <vector>
#endif

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

struct Loaded {
    CublasLibrary lib;
    std::string why;
    bool ok = false;
};

#ifdef SPECULA_CUDA_EMULATION
Loaded load() {
    Loaded l;
    l.lib.create = &cublasCreate_v2;
    l.lib.destroy = &cublasDestroy_v2;
    l.lib.set_stream = &cublasSetStream_v2;
    l.lib.gemm_ex = &cublasGemmEx;
    l.lib.status_string = &cublasGetStatusString;
    l.lib.name = "emulator";
    l.ok = true;
    return l;
}
#else
template <typename Fn> bool resolve(void *handle, const char *symbol, Fn &out) {
    out = reinterpret_cast<Fn>(dlsym(handle, symbol));
    return out != nullptr;
}

Loaded load() {
    Loaded l;
    // The major version the backend was compiled against first (its ABI), then whatever libcublas.so names.
    // Then the toolkit's own folder, which the loader's cache often lacks ($CUDA_HOME, /usr/local/cuda).
    const std::string versioned = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    std::vector<std::string> candidates = {versioned};
    for (const char *env : {"CUDA_HOME", "CUDA_PATH"})
        if (const char *dir = std::getenv(env); dir != nullptr && *dir != '\0') candidates.push_back(std::string(dir) + "/lib64/" + versioned);
    candidates.push_back("/usr/local/cuda/lib64/" + versioned);
    candidates.push_back("libcublas.so");
    void *handle = nullptr;
    for (const std::string &name : candidates) {
        handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle != nullptr) {
            l.lib.name = name;
            break;
        }
    }
    if (handle == nullptr) {
        const char *err = dlerror();
        l.why = "cuBLAS not found (" + versioned + ": " + (err ? err : "dlopen failed") + ")";
        return l;
    }
    if (!resolve(handle, "cublasCreate_v2", l.lib.create) || !resolve(handle, "cublasDestroy_v2", l.lib.destroy) ||
        !resolve(handle, "cublasSetStream_v2", l.lib.set_stream) || !resolve(handle, "cublasGemmEx", l.lib.gemm_ex) ||
        !resolve(handle, "cublasGetStatusString", l.lib.status_string)) {
        l.why = "cuBLAS (" + l.lib.name + ") lacks a function the backend calls";
        return l;  // the handle stays open: dlclose of a CUDA library at an arbitrary time is not worth the risk
    }
    l.ok = true;
    return l;
}
#endif

}  // namespace

const CublasLibrary *cublas_library(std::string *why) {
    static const Loaded loaded = load();  // thread-safe once
    if (!loaded.ok) {
        if (why) *why = loaded.why;
        return nullptr;
    }
    return &loaded.lib;
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
