#include "vecops.h"
#include <cuda_runtime.h>

template <int BLOCK>
__global__ void sum_kernel(const float* x, float* out, int n) {
    __shared__ float part[BLOCK];
    float acc = 0.0f;
    for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += BLOCK * gridDim.x) acc += x[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

int vecops_sum(const float* x, float* out, int n) {
    cudaError_t e = cudaMemset(out, 0, sizeof(float));
    if (e != cudaSuccess) return (int)e;
    sum_kernel<256><<<8, 256>>>(x, out, n);
    return (int)cudaGetLastError();
}
