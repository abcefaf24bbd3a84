// TU f1 (-rdc=true): a kernel calling a __device__ function and updating a __device__
// variable that are both defined in f2.cu, resolved by the device link (nvcc -dlink).
#include "common.h"
#include "suite.h"

extern __device__ float f2_poly(float x);
extern __device__ int f2_calls;

__device__ float f1_local(float x) { return x * 0.5f; }

__global__ void f1_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = f2_poly(in[i]) + f1_local(in[i]);
        atomicAdd(&f2_calls, 1);
    }
}

static float poly_ref(float x) { return std::fma(x, std::fma(x, 0.5f, -0.25f), 1.0f); }

bool test_rdc() {
    if (!f2_reset_calls()) return false;
    // The same variable through this TU's extern declaration.
    int calls = -1;
    CK(cudaMemcpyFromSymbol(&calls, f2_calls, sizeof calls));
    EXPECT(calls == 0, "f2_calls after reset: %d", calls);
    const int n = 99991;
    std::vector<float> in(n), out, ref(n);
    fill_uniform(in, 0xF001, -4.0, 4.0);
    for (int i = 0; i < n; ++i) ref[i] = poly_ref(in[i]) + in[i] * 0.5f;
    DBuf<float> din, dout;
    CK(din.alloc(n));
    CK(dout.alloc(n));
    CK(din.upload(in));
    CK(dout.poison());
    f1_kernel<<<grid_for(n, 256), 256>>>(din.p, dout.p, n);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    CK(dout.download(out));
    if (!close_all("f1_kernel (calls f2_poly)", out.data(), ref.data(), n, 1e-5, 1e-5)) return false;
    calls = -1;
    if (!f2_read_calls(&calls)) return false;
    EXPECT(calls == n, "f2_calls = %d, want %d", calls, n);
    return true;
}
