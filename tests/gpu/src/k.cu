// TU k: the module is first needed by cudaLaunchKernelEx (templated form, i.e.
// cudaLaunchKernelExC underneath), with no launch attributes.
#include "common.h"
#include "suite.h"

__global__ void k_poly(const double* __restrict__ x, double* __restrict__ y, int n, double c0, double c1, double c2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = c0 + x[i] * (c1 + x[i] * c2);
}

bool test_k_launch_ex_first_use() {
    const int n = 65536 + 17, block = 192;
    std::vector<double> x(n), out, ref(n);
    fill_uniform(x, 0x4B01, -3.0, 3.0);
    const double c0 = 0.5, c1 = -1.25, c2 = 0.125;
    for (int i = 0; i < n; ++i) ref[i] = c0 + x[i] * (c1 + x[i] * c2);
    DBuf<double> dx, dy;
    CK(dx.alloc(n));
    CK(dy.alloc(n));
    CK(dx.upload(x));
    CK(dy.poison());
    cudaLaunchConfig_t cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(grid_for(n, block));
    cfg.blockDim = dim3(block);
    cfg.stream = 0;
    CK(cudaLaunchKernelEx(&cfg, k_poly, (const double*)dx.p, dy.p, n, c0, c1, c2));
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    CK(dy.download(out));
    return close_all("k_poly (cudaLaunchKernelEx)", out.data(), ref.data(), n, 1e-13, 1e-13);
}
