// experts.cu compiled as C++ for the emulator (CMake gives a source file one language, and the real build compiles
// it with nvcc).
#include "backends/cuda/kernels/experts.cu"
