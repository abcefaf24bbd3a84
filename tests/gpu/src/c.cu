// TU c: 32 host threads make the first launches of this TU's kernels at the same moment
// (a barrier right before), each on its own data and stream: the module load races.
#include "common.h"
#include "suite.h"

#include <atomic>
#include <string>
#include <thread>

// Per-block partial sums (no atomics: every partial is written, so poison shows).
__global__ void c_reduce(const int* __restrict__ in, int n, long long* __restrict__ partial) {
    __shared__ long long s[256];
    long long acc = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += in[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void c_square(const int* __restrict__ in, int* __restrict__ out, int n, int add) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * in[i] + add;
}

namespace {

constexpr int kThreads = 32, kBlocks = 64, kBlock = 256;

std::atomic<int> g_arrived{0};

struct Result {
    bool ok = false;
    std::string msg;
};

bool worker(int t, Result& r) {
    const int n = (1 << 15) + t * 997;
    std::vector<int> in(n);
    fill_ints(in, 0xC000 + t, -1000, 1000);
    long long want = 0;
    for (int v : in) want += v;
    DBuf<int> din, dsq;
    DBuf<long long> dpart;
    Stream s;
    bool setup = din.alloc(n) == cudaSuccess && dsq.alloc(n) == cudaSuccess && dpart.alloc(kBlocks) == cudaSuccess &&
                 s.create() == cudaSuccess && din.upload(in) == cudaSuccess && dpart.poison() == cudaSuccess &&
                 dsq.poison() == cudaSuccess;
    // Arrive even after a failed setup, so that the others are not left waiting.
    g_arrived.fetch_add(1);
    while (g_arrived.load() < kThreads) std::this_thread::yield();
    if (!setup) {
        r.msg = "setup (cudaMalloc/cudaMemcpy/cudaStreamCreate) failed: " +
                std::string(cudaGetErrorName(cudaGetLastError()));
        return false;
    }
    // First launches, all threads at once, through four entry points. A <<<>>> site looks its
    // kernel up once (a function-local static), so only two threads get there concurrently;
    // cudaLaunchKernel / cudaLaunchKernelEx / cudaFuncGetAttributes go to the runtime each time.
    cudaError_t e1 = cudaSuccess, e2 = cudaSuccess;
    int nn = n, add = t, blocks_n = grid_for(n, kBlock);
    void* rargs[] = {&din.p, &nn, &dpart.p};
    void* sargs[] = {&din.p, &dsq.p, &nn, &add};
    switch (t % 4) {
        case 0:
            c_reduce<<<kBlocks, kBlock, 0, s.s>>>(din.p, n, dpart.p);
            e1 = cudaGetLastError();
            c_square<<<blocks_n, kBlock, 0, s.s>>>(din.p, dsq.p, n, t);
            e2 = cudaGetLastError();
            break;
        case 1:
            c_square<<<blocks_n, kBlock, 0, s.s>>>(din.p, dsq.p, n, t);
            e1 = cudaGetLastError();
            c_reduce<<<kBlocks, kBlock, 0, s.s>>>(din.p, n, dpart.p);
            e2 = cudaGetLastError();
            break;
        case 2:
            e1 = cudaLaunchKernel((const void*)c_reduce, dim3(kBlocks), dim3(kBlock), rargs, 0, s.s);
            e2 = cudaLaunchKernel((const void*)c_square, dim3(blocks_n), dim3(kBlock), sargs, 0, s.s);
            break;
        default: {
            cudaFuncAttributes fa;
            std::memset(&fa, 0, sizeof fa);
            e1 = cudaFuncGetAttributes(&fa, c_square);
            if (e1 == cudaSuccess && fa.maxThreadsPerBlock < kBlock) {
                r.msg = "c_square maxThreadsPerBlock " + std::to_string(fa.maxThreadsPerBlock);
                return false;
            }
            if (e1 == cudaSuccess) e1 = cudaLaunchKernel((const void*)c_square, dim3(blocks_n), dim3(kBlock), sargs, 0, s.s);
            cudaLaunchConfig_t cfg;
            std::memset(&cfg, 0, sizeof cfg);
            cfg.gridDim = dim3(kBlocks);
            cfg.blockDim = dim3(kBlock);
            cfg.stream = s.s;
            e2 = cudaLaunchKernelEx(&cfg, c_reduce, (const int*)din.p, n, dpart.p);
            break;
        }
    }
    cudaError_t e3 = cudaStreamSynchronize(s.s);
    if (e1 != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess) {
        cudaError_t e = e1 != cudaSuccess ? e1 : e2 != cudaSuccess ? e2 : e3;
        r.msg = std::string("launch/sync failed: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
        return false;
    }
    std::vector<long long> part(kBlocks);
    std::vector<int> sq(n);
    if (cudaMemcpy(part.data(), dpart.p, kBlocks * sizeof(long long), cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(sq.data(), dsq.p, n * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) {
        r.msg = "cudaMemcpy back failed";
        return false;
    }
    long long got = 0;
    for (long long p : part) got += p;
    if (got != want) {
        r.msg = "sum " + std::to_string(got) + " want " + std::to_string(want);
        return false;
    }
    for (int i = 0; i < n; ++i) {
        if (sq[i] != in[i] * in[i] + t) {
            r.msg = "c_square[" + std::to_string(i) + "] = " + std::to_string(sq[i]) + " want " +
                    std::to_string(in[i] * in[i] + t);
            return false;
        }
    }
    return true;
}

}  // namespace

bool test_c_threads_first_launch() {
    g_arrived.store(0);
    std::vector<Result> res(kThreads);
    std::vector<std::thread> th;
    th.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) th.emplace_back([t, &res] { res[t].ok = worker(t, res[t]); });
    for (auto& x : th) x.join();
    int bad = 0;
    for (int t = 0; t < kThreads; ++t) {
        if (!res[t].ok) {
            if (bad < 8) std::printf("    thread %d: %s\n", t, res[t].msg.c_str());
            ++bad;
        }
    }
    if (bad) std::printf("    %d of %d threads failed\n", bad, kThreads);
    return bad == 0;
}
