// Emulated <cuda_runtime.h>: see cuda_emulation.h.
#pragma once
#include "cuda_emulation.h"
