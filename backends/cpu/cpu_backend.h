// The CPU backend's registry entry (backends/registry.cpp): no devices to list; its runner is CpuRunner.
#pragma once

#include "backend/backend_registry.h"

namespace specula::internal {

BackendDesc cpu_backend();

}  // namespace specula::internal
