// TU g: nothing of this TU is used before a stream capture; its module is first needed by
// the <<<>>> launches recorded inside the capture.
#include "common.h"
#include "suite.h"

__global__ void g_affine(const int* __restrict__ in, int* __restrict__ out, int n, int mul, int add) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * mul + add;
}

__global__ void g_xor_shift(int* __restrict__ data, int n, int shift) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] ^= (int)((unsigned)data[i] >> shift);
}

bool test_g_capture_first_use() {
    const int n = 123457, block = 256;
    std::vector<int> in(n), out, ref(n);
    fill_ints(in, 0x6001, -50000, 50000);
    for (int i = 0; i < n; ++i) {
        int v = in[i] * 7 - 3;
        ref[i] = v ^ (int)((unsigned)v >> 5);
    }
    DBuf<int> din, dout;
    CK(din.alloc(n));
    CK(dout.alloc(n));
    CK(din.upload(in));
    CK(dout.poison());
    Stream s;
    CK(s.create_nonblocking());
    CK(cudaDeviceSynchronize());  // the legacy-stream copies before the non-blocking stream
    GraphGuard gg;
    CK(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeGlobal));
    g_affine<<<grid_for(n, block), block, 0, s.s>>>(din.p, dout.p, n, 7, -3);
    cudaError_t e1 = cudaGetLastError();
    g_xor_shift<<<grid_for(n, block), block, 0, s.s>>>(dout.p, n, 5);
    cudaError_t e2 = cudaGetLastError();
    CK(cudaStreamEndCapture(s.s, &gg.g));
    CK(e1);
    CK(e2);
    CK(cudaGraphInstantiate(&gg.e, gg.g, 0));
    CK(cudaGraphLaunch(gg.e, s.s));
    CK(cudaStreamSynchronize(s.s));
    CK(dout.download(out));
    return equal_all("captured g_affine + g_xor_shift", out.data(), ref.data(), n);
}
