// TU m: the common real-world pattern, cudaFuncSetAttribute before the first launch: the
// module is first needed by cudaFuncSetAttribute(MaxDynamicSharedMemorySize).
#include "common.h"
#include "suite.h"

#include <algorithm>

__global__ void m_block_sum(const float* __restrict__ in, float* __restrict__ out, int per_block) {
    extern __shared__ float tile[];
    const size_t base = (size_t)blockIdx.x * per_block;
    for (int j = threadIdx.x; j < per_block; j += blockDim.x) tile[j] = in[base + j];
    __syncthreads();
    // Thread 0 sums in a fixed order, so the host can reproduce it exactly.
    if (threadIdx.x == 0) {
        float acc = 0.0f;
        for (int j = 0; j < per_block; ++j) acc += tile[j];
        out[blockIdx.x] = acc;
    }
}

bool test_m_func_set_attribute_first_use() {
    int dev = 0, optin = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const size_t bytes = std::min<size_t>(64 * 1024, (size_t)optin) & ~(size_t)15;
    CK(cudaFuncSetAttribute(m_block_sum, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    const int per_block = (int)(bytes / sizeof(float)), blocks = 20, n = per_block * blocks;
    std::vector<float> in(n), out, ref(blocks);
    fill_uniform(in, 0x3D01);
    for (int b = 0; b < blocks; ++b) {
        float acc = 0.0f;
        for (int j = 0; j < per_block; ++j) acc += in[(size_t)b * per_block + j];
        ref[b] = acc;
    }
    DBuf<float> din, dout;
    CK(din.alloc(n));
    CK(dout.alloc(blocks));
    CK(din.upload(in));
    CK(dout.poison());
    m_block_sum<<<blocks, 256, bytes>>>(din.p, dout.p, per_block);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    CK(dout.download(out));
    return close_all("m_block_sum", out.data(), ref.data(), blocks, 1e-5, 1e-4);
}
