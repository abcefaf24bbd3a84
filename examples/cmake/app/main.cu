// vecops_demo: runs the library's kernels and one of its own, checks them against the CPU.
// Without a GPU (cudaGetDeviceCount fails or finds none) it runs the host-only path and
// exits 0 with "ok (no GPU)".
#include <cmath>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "reference.h"
#include "vecops.h"

__constant__ float app_offset;

__global__ void square_plus(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i] + app_offset;
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        int e_ = (int)(call);                                                          \
        if (e_ != 0) {                                                                 \
            std::fprintf(stderr, "%s failed: %s\n", #call,                             \
                         cudaGetErrorString((cudaError_t)e_));                         \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

static int check(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::fabs(got[i] - want[i]) > 1e-4f * (1.0f + std::fabs(want[i]))) {
            std::fprintf(stderr, "%s: mismatch at %zu: got %g, want %g\n", what, i, got[i], want[i]);
            return 1;
        }
    }
    std::printf("%s: %zu values match the CPU\n", what, want.size());
    return 0;
}

int main() {
    const int n = 10000;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
        x[i] = 0.001f * (i % 1000) - 0.25f;
        y[i] = 1.0f - 0.0005f * (i % 300);
    }
    // Host-only work, always done: the CPU reference itself.
    const float a = 1.5f, scale = 3.0f, offset = 0.5f;
    std::vector<float> want_saxpy = ref_saxpy(a, scale, x, y);
    std::vector<float> want_sq = ref_square_plus(x, offset);
    double want_sum = ref_sum(x);

    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        std::printf("ok (no GPU): %s; host reference sum %.3f\n",
                    e != cudaSuccess ? cudaGetErrorString(e) : "no devices", want_sum);
        return 0;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device 0: %s (sm_%d%d), %d device(s)\n", prop.name, prop.major, prop.minor, devices);

    float *dx, *dy, *dz, *dsum;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMalloc(&dz, n * sizeof(float)));
    CHECK(cudaMalloc(&dsum, sizeof(float)));
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    // The library: its __device__ variable, saxpy and the reduction.
    float got_scale = 0;
    CHECK(vecops_set_scale(scale));
    CHECK(vecops_get_scale(&got_scale));
    if (got_scale != scale) {
        std::fprintf(stderr, "vecops scale: got %g, want %g\n", got_scale, scale);
        return 1;
    }
    CHECK(vecops_saxpy(a, dx, dy, n));
    CHECK(vecops_sum(dx, dsum, n));
    // The executable's own kernel and __constant__ variable.
    CHECK(cudaMemcpyToSymbol(app_offset, &offset, sizeof offset));
    square_plus<<<(n + 127) / 128, 128>>>(dx, dz, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());

    std::vector<float> got_saxpy(n), got_sq(n);
    float got_sum = 0;
    CHECK(cudaMemcpy(got_saxpy.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(got_sq.data(), dz, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&got_sum, dsum, sizeof(float), cudaMemcpyDeviceToHost));
    int bad = check("vecops_saxpy", got_saxpy, want_saxpy) + check("square_plus", got_sq, want_sq);
    if (std::fabs(got_sum - want_sum) > 1e-3 * (1.0 + std::fabs(want_sum))) {
        std::fprintf(stderr, "vecops_sum: got %g, want %g\n", got_sum, want_sum);
        ++bad;
    } else {
        std::printf("vecops_sum: %.3f matches the CPU\n", got_sum);
    }
    cudaFree(dx); cudaFree(dy); cudaFree(dz); cudaFree(dsum);
    if (bad) return 1;
    std::printf("ok (GPU): all results match\n");
    return 0;
}
