#include "vecops.h"
#include "vecops_internal.cuh"

// The library's device variable: defined here, read by the kernel in saxpy.cu through
// the runtime's symbol API (whole-program compilation: each .cu has its own module).
__device__ float vecops_scale = 1.0f;

int vecops_set_scale(float s) {
    return (int)cudaMemcpyToSymbol(vecops_scale, &s, sizeof s);
}

int vecops_get_scale(float* s) {
    return (int)cudaMemcpyFromSymbol(s, vecops_scale, sizeof *s);
}

float* vecops_scale_address() {
    void* p = nullptr;
    if (cudaGetSymbolAddress(&p, vecops_scale) != cudaSuccess) return nullptr;
    return static_cast<float*>(p);
}
