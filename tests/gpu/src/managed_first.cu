// Host code touches __managed__ variables before anything else CUDA has happened in the
// process: nvcc's host code calls __cudaInitModule(handle) first (the module's only load
// trigger here), reads and writes through the host pointer cudart fills in, then launches.
// `managed_first init` calls cudaFree(0) first (context created before the first touch).
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

__managed__ int mv[4] = {1, 2, 3, 4};
__managed__ float mf = 0.5f;

__global__ void bump(int n) {
    int i = threadIdx.x;
    if (i < n) mv[i] = mv[i] * 10 + i;
    if (i == 0) mf *= 2.0f;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "init")) cudaFree(0);
    int before = mv[2];  // host read before any kernel
    mv[3] = 40;          // host write
    mf = 1.5f;
    bump<<<1, 4>>>(4);
    cudaError_t e = cudaDeviceSynchronize();
    bool ok = e == cudaSuccess && before == 3 && mv[0] == 10 && mv[1] == 21 && mv[2] == 32 &&
              mv[3] == 403 && mf == 3.0f;
    printf("managed_first: %s (read %d, cuda %d, mv=%d,%d,%d,%d mf=%g)\n", ok ? "PASS" : "FAIL",
           before, (int)e, mv[0], mv[1], mv[2], mv[3], mf);
    return ok ? 0 : 1;
}
