// The Vulkan backend's registry entry (backend/backend_registry.h).
#pragma once

#include "backend/backend_registry.h"

namespace specula::internal::vulkan {

BackendDesc vulkan_backend();

}  // namespace specula::internal::vulkan
