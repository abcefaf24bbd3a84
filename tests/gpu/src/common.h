// Shared test helpers for the fatpack GPU suite: CUDA error checks, a fixed-seed RNG,
// comparisons, RAII device buffers. Header-only (static inline) so every TU and both
// shared libraries carry their own copy; nothing here depends on the main program.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

// Every CUDA call goes through CK: on error it prints the call, file:line, the error's
// name and text, and makes the enclosing test function return false.
#define CK(call)                                                          \
    do {                                                                  \
        cudaError_t ck_e_ = (call);                                       \
        if (ck_e_ != cudaSuccess) {                                       \
            tk_report_cuda(#call, ck_e_, __FILE__, __LINE__);             \
            return false;                                                 \
        }                                                                 \
    } while (0)

// After every <<<>>> launch.
#define CK_LAUNCH() CK(cudaGetLastError())

// A failed expectation prints what and where, and fails the enclosing test.
#define EXPECT(cond, ...)                                                 \
    do {                                                                  \
        if (!(cond)) {                                                    \
            std::printf("    expectation failed at %s:%d: %s: ", tk_base(__FILE__), __LINE__, #cond); \
            std::printf(__VA_ARGS__);                                     \
            std::printf("\n");                                            \
            std::fflush(stdout);                                          \
            return false;                                                 \
        }                                                                 \
    } while (0)

static inline const char* tk_base(const char* path) {
    const char* s = std::strrchr(path, '/');
    return s ? s + 1 : path;
}

static inline void tk_report_cuda(const char* what, cudaError_t e, const char* file, int line) {
    std::printf("    CUDA error at %s:%d: %s -> %d %s (%s)\n", tk_base(file), line, what, (int)e,
                cudaGetErrorName(e), cudaGetErrorString(e));
    std::fflush(stdout);
}

// splitmix64: fixed seeds give the same inputs on every run and machine.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // [lo, hi)
    double uniform(double lo, double hi) { return lo + (hi - lo) * ((next() >> 11) * (1.0 / 9007199254740992.0)); }
    int range(int lo, int hi) { return lo + (int)(next() % (uint64_t)(hi - lo + 1)); }  // [lo, hi]
};

template <typename T>
static inline void fill_uniform(std::vector<T>& v, uint64_t seed, double lo = -1.0, double hi = 1.0) {
    Rng r(seed);
    for (auto& x : v) x = (T)r.uniform(lo, hi);
}

static inline void fill_ints(std::vector<int>& v, uint64_t seed, int lo, int hi) {
    Rng r(seed);
    for (auto& x : v) x = r.range(lo, hi);
}

// Tolerance compare (floats): |got - want| <= atol + rtol * |want|, NaN never passes.
template <typename T>
static inline bool close_all(const char* what, const T* got, const T* want, size_t n, double rtol, double atol) {
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        double g = (double)got[i], w = (double)want[i];
        if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
            if (bad < 5) std::printf("    %s[%zu]: got %.9g want %.9g\n", what, i, g, w);
            ++bad;
        }
    }
    if (bad) std::printf("    %s: %zu of %zu values differ\n", what, bad, n);
    std::fflush(stdout);
    return bad == 0;
}

// Exact compare (integers).
template <typename T>
static inline bool equal_all(const char* what, const T* got, const T* want, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!(got[i] == want[i])) {
            if (bad < 5)
                std::printf("    %s[%zu]: got %lld want %lld\n", what, i, (long long)got[i], (long long)want[i]);
            ++bad;
        }
    }
    if (bad) std::printf("    %s: %zu of %zu values differ\n", what, bad, n);
    std::fflush(stdout);
    return bad == 0;
}

// Device buffer, freed on scope exit (the tests return early on the first error).
template <typename T>
struct DBuf {
    T* p = nullptr;
    size_t n = 0;
    DBuf() = default;
    DBuf(const DBuf&) = delete;
    DBuf& operator=(const DBuf&) = delete;
    ~DBuf() {
        if (p) cudaFree(p);
    }
    cudaError_t alloc(size_t count) {
        n = count;
        return cudaMalloc((void**)&p, count * sizeof(T));
    }
    size_t bytes() const { return n * sizeof(T); }
    // 0xFF bytes: NaN for floats, -1 for ints. Outputs are poisoned before every launch.
    cudaError_t poison() { return cudaMemset(p, 0xFF, bytes()); }
    cudaError_t upload(const std::vector<T>& h) { return cudaMemcpy(p, h.data(), bytes(), cudaMemcpyHostToDevice); }
    cudaError_t download(std::vector<T>& h) {
        h.assign(n, T());
        return cudaMemcpy(h.data(), p, bytes(), cudaMemcpyDeviceToHost);
    }
};

struct Stream {
    cudaStream_t s = nullptr;
    Stream() = default;
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream() {
        if (s) cudaStreamDestroy(s);
    }
    // A blocking stream: it orders with the legacy default stream, where DBuf's cudaMemcpy /
    // cudaMemset (poison) run. A non-blocking stream would race with those (seen on the H200:
    // a graph launched on a non-blocking stream ran before the poison memset).
    cudaError_t create() { return cudaStreamCreate(&s); }
    // For stream capture: nothing on the legacy stream can interfere with the capture. Work
    // queued on the legacy stream must be waited for (cudaDeviceSynchronize) before using it.
    cudaError_t create_nonblocking() { return cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
};

struct GraphGuard {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t e = nullptr;
    GraphGuard() = default;
    GraphGuard(const GraphGuard&) = delete;
    GraphGuard& operator=(const GraphGuard&) = delete;
    ~GraphGuard() {
        if (e) cudaGraphExecDestroy(e);
        if (g) cudaGraphDestroy(g);
    }
};

static inline int grid_for(int n, int block) { return (n + block - 1) / block; }

// Informational line (not a check).
#define INFO(...)                        \
    do {                                 \
        std::printf("    info: ");       \
        std::printf(__VA_ARGS__);        \
        std::printf("\n");               \
        std::fflush(stdout);             \
    } while (0)
