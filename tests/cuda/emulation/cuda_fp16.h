// Emulated <cuda_fp16.h>: see cuda_emulation.h.
#pragma once
#include "cuda_emulation.h"
