// libsuite_lib.so: a shared library with its own kernels and __device__/__constant__
// variables, linked into the suite. A packed build gives it its own store and runtime copy.
#include "common.h"

__device__ int lib_table[256];
__constant__ int lib_offset;

__global__ void lib_fill(int* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lib_table[i & 255] * 7 + lib_offset + i;
}

namespace suitelib {
template <typename T>
__global__ void axpb(const T* __restrict__ in, T* __restrict__ out, T a, T b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * in[i] + b;
}
}  // namespace suitelib

static bool symbols_and_kernel() {
    // First use of this library's module: a symbol copy.
    std::vector<int> table(256);
    fill_ints(table, 0xD001, -1000, 1000);
    CK(cudaMemcpyToSymbol(lib_table, table.data(), 256 * sizeof(int)));
    const int offset = 4242;
    CK(cudaMemcpyToSymbol(lib_offset, &offset, sizeof offset));
    std::vector<int> back(256, 0);
    CK(cudaMemcpyFromSymbol(back.data(), lib_table, 256 * sizeof(int)));
    if (!equal_all("lib_table readback", back.data(), table.data(), 256)) return false;
    void* addr = nullptr;
    CK(cudaGetSymbolAddress(&addr, lib_table));
    EXPECT(addr != nullptr, "cudaGetSymbolAddress(lib_table) is NULL");
    const int n = 100000;
    DBuf<int> dout;
    CK(dout.alloc(n));
    CK(dout.poison());
    lib_fill<<<grid_for(n, 256), 256>>>(dout.p, n);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    std::vector<int> out, ref(n);
    CK(dout.download(out));
    for (int i = 0; i < n; ++i) ref[i] = table[i & 255] * 7 + offset + i;
    return equal_all("lib_fill", out.data(), ref.data(), n);
}

template <typename T>
static bool axpb_check(uint64_t seed, double tol) {
    const int n = 50000;
    std::vector<T> in(n), out, ref(n);
    fill_uniform(in, seed);
    const T a = (T)-2.5, b = (T)0.75;
    for (int i = 0; i < n; ++i) ref[i] = a * in[i] + b;
    DBuf<T> din, dout;
    CK(din.alloc(n));
    CK(dout.alloc(n));
    CK(din.upload(in));
    CK(dout.poison());
    suitelib::axpb<T><<<grid_for(n, 128), 128>>>(din.p, dout.p, a, b, n);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    CK(dout.download(out));
    return close_all("suitelib::axpb", out.data(), ref.data(), n, tol, tol);
}

extern "C" int suite_lib_symbols_and_kernel(void) { return symbols_and_kernel() ? 1 : 0; }
extern "C" int suite_lib_template(void) {
    return axpb_check<float>(0xD010, 1e-5) && axpb_check<double>(0xD020, 1e-13) ? 1 : 0;
}
