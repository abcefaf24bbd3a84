// first_kernel: the startup cost of a binary with a lot of device code of which one kernel
// is used. Launches heavy_0 once, synchronises, checks the result, and prints one line:
//   first_kernel: main_to_first_kernel_ms=... first_launch_ms=... rss_kb=... dev_used_mb=... dev_total_mb=... check=PASS
//   first_kernel --baseline   only cudaFree(0): the device memory of a bare context.
//   first_kernel --host-ms N  N ms of host work (a sleep) between the allocations and the
//                             launch: a program that sets up before its first kernel.
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern "C" cudaError_t heavy_launch_0(const float* in, float* out, int n, cudaStream_t s);
extern "C" float heavy_ref_0(float a);

static long rss_kb() {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, "VmRSS:", 6) == 0) {
            kb = std::strtol(line + 6, nullptr, 10);
            break;
        }
    }
    std::fclose(f);
    return kb;
}

#define CKF(call)                                                                                      \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            std::fprintf(stderr, "first_kernel: %s -> %s (%s)\n", #call, cudaGetErrorName(e_),        \
                         cudaGetErrorString(e_));                                                      \
            std::printf("first_kernel: error=%s check=FAIL\n", cudaGetErrorName(e_));                  \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

int main(int argc, char** argv) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool baseline = argc > 1 && std::strcmp(argv[1], "--baseline") == 0;
    const double host_ms = argc > 2 && std::strcmp(argv[1], "--host-ms") == 0 ? std::atof(argv[2]) : 0.0;
    const int n = 1 << 16;
    bool ok = true;
    if (baseline) {
        CKF(cudaFree(0));
    } else {
        std::vector<float> in(n), out(n, 0.0f);
        for (int i = 0; i < n; ++i) in[i] = (float)((i * 7919) % 2001 - 1000) * 0.001f;
        float *din = nullptr, *dout = nullptr;
        CKF(cudaMalloc(&din, n * sizeof(float)));
        CKF(cudaMalloc(&dout, n * sizeof(float)));
        CKF(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        CKF(cudaMemset(dout, 0xFF, n * sizeof(float)));
        CKF(cudaDeviceSynchronize());
        if (host_ms > 0) std::this_thread::sleep_for(std::chrono::microseconds((long)(host_ms * 1000)));
        // The context exists now: from here on it is loading the module (fatpack: decompress +
        // register; cudart/driver: load the cubin) plus a very short kernel.
        const auto tl = std::chrono::steady_clock::now();
        CKF(heavy_launch_0(din, dout, n, 0));
        CKF(cudaDeviceSynchronize());
        const auto t1 = std::chrono::steady_clock::now();
        CKF(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
        // Checked on a prefix: the host reference is slow (software fmaf) and runs before exit.
        int bad = 0;
        for (int i = 0; i < 2048; ++i) {
            float want = heavy_ref_0(in[i]);
            if (!(std::fabs(out[i] - want) <= 1e-4f + 1e-4f * std::fabs(want))) {
                if (bad < 3) std::fprintf(stderr, "first_kernel: out[%d] = %.9g, want %.9g\n", i, out[i], want);
                ++bad;
            }
        }
        ok = bad == 0;
        size_t free_b = 0, total_b = 0;
        CKF(cudaMemGetInfo(&free_b, &total_b));
        const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
        const double launch_ms = std::chrono::duration<double, std::milli>(t1 - tl).count();
        std::printf("first_kernel: main_to_first_kernel_ms=%.2f first_launch_ms=%.3f rss_kb=%ld dev_used_mb=%.1f "
                    "dev_total_mb=%.1f check=%s\n",
                    ms, launch_ms, rss_kb(), (total_b - free_b) / 1048576.0, total_b / 1048576.0, ok ? "PASS" : "FAIL");
        return ok ? 0 : 1;
    }
    size_t free_b = 0, total_b = 0;
    CKF(cudaMemGetInfo(&free_b, &total_b));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("first_kernel: main_to_first_kernel_ms=%.2f first_launch_ms=0 rss_kb=%ld dev_used_mb=%.1f "
                "dev_total_mb=%.1f check=PASS baseline\n",
                ms, rss_kb(), (total_b - free_b) / 1048576.0, total_b / 1048576.0);
    return 0;
}
