// TU o: the module is first needed by cudaOccupancyMaxPotentialBlockSize (the header
// template: cudaFuncGetAttributes + cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags).
#include "common.h"
#include "suite.h"

__global__ void o_clamp(const float* __restrict__ in, float* __restrict__ out, int n, float lo, float hi) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fminf(fmaxf(in[i], lo), hi);
}

bool test_o_occupancy_first_use() {
    int min_grid = 0, block = 0;
    CK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, o_clamp, 0, 0));
    EXPECT(block >= 32 && block <= 1024 && min_grid >= 1, "potential block size %d, min grid %d", block, min_grid);
    int nb = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, o_clamp, block, 0));
    EXPECT(nb >= 1, "max active blocks %d at block %d", nb, block);
    const int n = 250001;
    std::vector<float> in(n), out, ref(n);
    fill_uniform(in, 0x0C01, -2.0, 2.0);
    for (int i = 0; i < n; ++i) ref[i] = std::fmin(std::fmax(in[i], -0.75f), 1.25f);
    DBuf<float> din, dout;
    CK(din.alloc(n));
    CK(dout.alloc(n));
    CK(din.upload(in));
    CK(dout.poison());
    o_clamp<<<grid_for(n, block), block>>>(din.p, dout.p, n, -0.75f, 1.25f);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    CK(dout.download(out));
    return equal_all("o_clamp", out.data(), ref.data(), n);
}
