#include "vecops.h"
#include "vecops_internal.cuh"

__global__ void saxpy_kernel(float a, const float* scale, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * *scale * x[i] + y[i];
}

int vecops_saxpy(float a, const float* x, float* y, int n) {
    const float* scale = vecops_scale_address();
    if (!scale) return (int)cudaErrorInvalidSymbol;
    saxpy_kernel<<<(n + 255) / 256, 256>>>(a, scale, x, y, n);
    return (int)cudaGetLastError();
}
