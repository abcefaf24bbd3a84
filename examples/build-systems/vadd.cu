// A small CUDA program for the build-system examples: adds two vectors on the GPU and checks
// the result against the CPU; without a GPU it says so and exits 0 (the link is what is
// being tested there).
#include <cstdio>
#include <cuda_runtime.h>

__global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("vadd: ok (no GPU)\n");
        return 0;
    }
    const int n = 1 << 16;
    float *a, *b, *c;
    cudaMallocManaged(&a, n * sizeof(float));
    cudaMallocManaged(&b, n * sizeof(float));
    cudaMallocManaged(&c, n * sizeof(float));
    for (int i = 0; i < n; i++) { a[i] = float(i); b[i] = float(2 * i); }
    vadd<<<(n + 255) / 256, 256>>>(a, b, c, n);
    if (cudaDeviceSynchronize() != cudaSuccess) { std::printf("vadd: launch failed\n"); return 1; }
    for (int i = 0; i < n; i++)
        if (c[i] != float(3 * i)) { std::printf("vadd: wrong at %d\n", i); return 1; }
    std::printf("vadd: ok (GPU)\n");
    return 0;
}
