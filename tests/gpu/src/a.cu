// TU a: templated kernels, __device__/__constant__ variables through the symbol APIs,
// opt-in dynamic shared memory, function attributes, occupancy. The first CUDA call naming
// anything of this TU is cudaMemcpyToSymbol (module load through a variable).
#include "common.h"
#include "suite.h"

#include <algorithm>

__constant__ float a_coeffs[64];
__device__ int a_counters[16];
__device__ double a_scale;

template <typename T>
__global__ void a_saxpy(int n, T a, const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}

__global__ void a_use_symbols(int n, const float* __restrict__ in, float* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i] * a_coeffs[i & 63] + (float)a_scale;
        atomicAdd(&a_counters[i & 15], 1);
    }
}

__global__ void a_smem_reverse(const int* __restrict__ in, int* __restrict__ out, int per_block) {
    extern __shared__ int buf[];
    const size_t base = (size_t)blockIdx.x * per_block;
    for (int j = threadIdx.x; j < per_block; j += blockDim.x) buf[j] = in[base + j];
    __syncthreads();
    for (int j = threadIdx.x; j < per_block; j += blockDim.x) out[base + j] = buf[per_block - 1 - j] * 3 + (int)blockIdx.x;
}

bool test_a_symbols() {
    std::vector<float> coeffs(64);
    fill_uniform(coeffs, 0xA001, -2.0, 2.0);
    CK(cudaMemcpyToSymbol(a_coeffs, coeffs.data(), 64 * sizeof(float)));
    std::vector<float> back(64, -12345.0f);
    CK(cudaMemcpyFromSymbol(back.data(), a_coeffs, 64 * sizeof(float)));
    if (!equal_all("a_coeffs readback", back.data(), coeffs.data(), 64)) return false;

    size_t sz = 0;
    CK(cudaGetSymbolSize(&sz, a_coeffs));
    EXPECT(sz == 64 * sizeof(float), "cudaGetSymbolSize(a_coeffs) = %zu", sz);
    CK(cudaGetSymbolSize(&sz, a_counters));
    EXPECT(sz == 16 * sizeof(int), "cudaGetSymbolSize(a_counters) = %zu", sz);
    CK(cudaGetSymbolSize(&sz, a_scale));
    EXPECT(sz == sizeof(double), "cudaGetSymbolSize(a_scale) = %zu", sz);
    void* counters = nullptr;
    CK(cudaGetSymbolAddress(&counters, a_counters));
    EXPECT(counters != nullptr, "cudaGetSymbolAddress(a_counters) is NULL");
    CK(cudaMemset(counters, 0, 16 * sizeof(int)));
    const double scale = 0.25;
    CK(cudaMemcpyToSymbol(a_scale, &scale, sizeof scale));
    double scale_back = 0;
    CK(cudaMemcpyFromSymbol(&scale_back, a_scale, sizeof scale_back));
    EXPECT(scale_back == scale, "a_scale readback %g", scale_back);

    // Async copies with an offset: replace the upper half of a_coeffs.
    Stream s;
    CK(s.create());
    std::vector<float> upper(32);
    fill_uniform(upper, 0xA002, -2.0, 2.0);
    CK(cudaMemcpyToSymbolAsync(a_coeffs, upper.data(), 32 * sizeof(float), 32 * sizeof(float),
                               cudaMemcpyHostToDevice, s.s));
    std::copy(upper.begin(), upper.end(), coeffs.begin() + 32);
    std::vector<float> back2(32, -1.0f);
    CK(cudaMemcpyFromSymbolAsync(back2.data(), a_coeffs, 32 * sizeof(float), 32 * sizeof(float),
                                 cudaMemcpyDeviceToHost, s.s));
    CK(cudaStreamSynchronize(s.s));
    if (!equal_all("a_coeffs async readback", back2.data(), upper.data(), 32)) return false;

    const int n = 1 << 16;
    std::vector<float> in(n);
    fill_uniform(in, 0xA003);
    DBuf<float> din, dout;
    CK(din.alloc(n));
    CK(dout.alloc(n));
    CK(din.upload(in));
    CK(dout.poison());
    a_use_symbols<<<grid_for(n, 256), 256>>>(n, din.p, dout.p);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    std::vector<float> out, ref(n);
    CK(dout.download(out));
    for (int i = 0; i < n; ++i) ref[i] = in[i] * coeffs[i & 63] + (float)scale;
    if (!close_all("a_use_symbols", out.data(), ref.data(), n, 1e-5, 1e-6)) return false;

    std::vector<int> cnt(16, -1), cnt2(16, -1), want(16, n / 16);
    CK(cudaMemcpyFromSymbolAsync(cnt.data(), a_counters, 16 * sizeof(int), 0, cudaMemcpyDeviceToHost, s.s));
    CK(cudaStreamSynchronize(s.s));
    CK(cudaMemcpy(cnt2.data(), counters, 16 * sizeof(int), cudaMemcpyDeviceToHost));
    return equal_all("a_counters (FromSymbol)", cnt.data(), want.data(), 16) &&
           equal_all("a_counters (symbol address)", cnt2.data(), want.data(), 16);
}

template <typename T>
static bool saxpy_check(int n, int block, uint64_t seed, double rtol, double atol) {
    std::vector<T> x(n), y(n), ref(n), out;
    fill_uniform(x, seed);
    fill_uniform(y, seed + 1);
    const T a = (T)1.75;
    for (int i = 0; i < n; ++i) ref[i] = a * x[i] + y[i];
    DBuf<T> dx, dy, dout;
    CK(dx.alloc(n));
    CK(dy.alloc(n));
    CK(dout.alloc(n));
    CK(dx.upload(x));
    CK(dy.upload(y));
    CK(dout.poison());
    a_saxpy<T><<<grid_for(n, block), block>>>(n, a, dx.p, dy.p, dout.p);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    CK(dout.download(out));
    return close_all(sizeof(T) == 4 ? "a_saxpy<float>" : "a_saxpy<double>", out.data(), ref.data(), n, rtol, atol);
}

bool test_a_saxpy_float() { return saxpy_check<float>(1 << 20, 256, 0xA010, 1e-5, 1e-6); }
bool test_a_saxpy_double() { return saxpy_check<double>(1 << 20, 128, 0xA020, 1e-13, 1e-14); }

bool test_a_func_attributes() {
    cudaFuncAttributes fa;
    std::memset(&fa, 0, sizeof fa);
    CK(cudaFuncGetAttributes(&fa, a_saxpy<float>));
    INFO("a_saxpy<float>: binaryVersion=%d ptxVersion=%d numRegs=%d maxThreadsPerBlock=%d", fa.binaryVersion,
         fa.ptxVersion, fa.numRegs, fa.maxThreadsPerBlock);
    EXPECT(fa.maxThreadsPerBlock >= 32 && fa.maxThreadsPerBlock <= 1024, "maxThreadsPerBlock %d", fa.maxThreadsPerBlock);
    EXPECT(fa.binaryVersion >= 75, "binaryVersion %d", fa.binaryVersion);
    int dev = 0, major = 0, minor = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    // SASS for the device's major arch, same or lower minor (or JIT output for it).
    EXPECT(fa.binaryVersion / 10 == major && fa.binaryVersion % 10 <= minor, "binaryVersion %d on a %d.%d device",
           fa.binaryVersion, major, minor);
    cudaFuncAttributes fd;
    std::memset(&fd, 0, sizeof fd);
    CK(cudaFuncGetAttributes(&fd, a_saxpy<double>));
    EXPECT(fd.maxThreadsPerBlock >= 32, "a_saxpy<double> maxThreadsPerBlock %d", fd.maxThreadsPerBlock);
    CK(cudaFuncSetCacheConfig(a_saxpy<double>, cudaFuncCachePreferL1));
    CK(cudaFuncSetAttribute(a_saxpy<double>, cudaFuncAttributePreferredSharedMemoryCarveout, 50));
    return true;
}

// Opt-in dynamic shared memory above the 48 KiB default: up to 96 KiB where the device allows.

bool test_a_dynamic_smem() {
    int dev = 0, optin = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const size_t bytes = std::min<size_t>(96 * 1024, (size_t)optin) & ~(size_t)15;
    EXPECT(bytes > 48 * 1024, "device opt-in shared memory limit is only %d bytes", optin);
    const int per_block = (int)(bytes / sizeof(int)), blocks = 48, n = per_block * blocks;
    std::vector<int> in(n), ref(n), out;
    fill_ints(in, 0xA030, -100000, 100000);
    for (int b = 0; b < blocks; ++b)
        for (int j = 0; j < per_block; ++j)
            ref[(size_t)b * per_block + j] = in[(size_t)b * per_block + per_block - 1 - j] * 3 + b;
    DBuf<int> din, dout;
    CK(din.alloc(n));
    CK(dout.alloc(n));
    CK(din.upload(in));

    // Without the attribute this much dynamic shared memory must be refused (not sticky).
    a_smem_reverse<<<blocks, 256, bytes>>>(din.p, dout.p, per_block);
    cudaError_t e = cudaGetLastError();
    EXPECT(e != cudaSuccess, "launch with %zu bytes of dynamic shared memory succeeded without opt-in", bytes);
    CK(cudaDeviceSynchronize());

    CK(cudaFuncSetAttribute(a_smem_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    cudaFuncAttributes fa;
    std::memset(&fa, 0, sizeof fa);
    CK(cudaFuncGetAttributes(&fa, a_smem_reverse));
    EXPECT(fa.maxDynamicSharedSizeBytes == (int)bytes, "maxDynamicSharedSizeBytes %d, set %zu",
           fa.maxDynamicSharedSizeBytes, bytes);
    CK(dout.poison());
    a_smem_reverse<<<blocks, 256, bytes>>>(din.p, dout.p, per_block);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    CK(dout.download(out));
    INFO("dynamic shared memory per block: %zu bytes (opt-in limit %d)", bytes, optin);
    return equal_all("a_smem_reverse", out.data(), ref.data(), n);
}

bool test_a_occupancy() {
    int nb = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, a_saxpy<float>, 256, 0));
    EXPECT(nb >= 1 && nb <= 64, "max active blocks of a_saxpy<float> at 256 threads: %d", nb);
    int nb2 = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&nb2, a_saxpy<double>, 128, 0, cudaOccupancyDefault));
    EXPECT(nb2 >= 1 && nb2 <= 64, "max active blocks of a_saxpy<double> at 128 threads: %d", nb2);
    int min_grid = 0, block = 0;
    CK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, a_saxpy<float>, 0, 0));
    EXPECT(block >= 32 && block <= 1024 && min_grid >= 1, "potential block size %d, min grid %d", block, min_grid);
    size_t avail = 0;
    CK(cudaOccupancyAvailableDynamicSMemPerBlock(&avail, a_smem_reverse, 1, 256));
    EXPECT(avail >= 48 * 1024, "available dynamic shared memory for a_smem_reverse: %zu", avail);
    INFO("occupancy: a_saxpy<float> %d blocks/SM at 256 threads; potential block %d (min grid %d); "
         "a_smem_reverse avail smem %zu",
         nb, block, min_grid, avail);
    return saxpy_check<float>(100003, block, 0xA040, 1e-5, 1e-6);
}
