// A program linked against the CUDA toolkit's static cuBLAS (1.35 GiB of device code in
// libcublas_static.a + libcublasLt_static.a): SGEMM, DGEMM, HGEMM, strided-batched SGEMM and
// STRSM, each checked against a CPU reference, then a 4096^3 SGEMM timed. Prints the host
// RSS after each step (VmRSS, VmHWM), the time of the first cuBLAS call and the TFLOP/s.
//   cublas_check            -> lines "key=value", last line "cublas_check: PASS|FAIL"
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static double now_ms() {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

static int failures = 0;
#define CK(x)                                                                      \
    do {                                                                           \
        auto _r = (x);                                                             \
        if ((int)_r != 0) {                                                        \
            printf("error: %s = %d (line %d)\n", #x, (int)_r, __LINE__);           \
            failures++;                                                            \
        }                                                                          \
    } while (0)

template <class T>
static void fill(std::vector<T> &v, unsigned seed) {
    for (auto &x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = T(((seed >> 8) % 2001) / 1000.0 - 1.0);
    }
}

// Column-major C = A*B (m x k times k x n).
template <class T>
static std::vector<double> ref_gemm(const std::vector<T> &A, const std::vector<T> &B, int m, int n,
                                    int k) {
    std::vector<double> C((size_t)m * n, 0.0);
    for (int j = 0; j < n; j++)
        for (int p = 0; p < k; p++) {
            double b = (double)B[(size_t)p + (size_t)j * k];
            for (int i = 0; i < m; i++) C[(size_t)i + (size_t)j * m] += (double)A[(size_t)i + (size_t)p * m] * b;
        }
    return C;
}

template <class T>
static bool close_to(const std::vector<T> &got, const std::vector<double> &want, double tol) {
    double worst = 0;
    for (size_t i = 0; i < want.size(); i++) {
        double d = std::fabs((double)got[i] - want[i]) / (1.0 + std::fabs(want[i]));
        if (!(d <= worst)) worst = d;
    }
    return worst <= tol;
}

static void step(const char *name, bool ok) {
    printf("%s=%s rss_kb=%ld\n", name, ok ? "ok" : "FAIL", status_kb("VmRSS"));
    if (!ok) failures++;
}

int main() {
    const int m = 192, n = 160, k = 128;
    double t0 = now_ms();
    cublasHandle_t h;
    CK(cublasCreate(&h));
    printf("rss_after_create_kb=%ld\n", status_kb("VmRSS"));
    {  // SGEMM: the first call that needs device code.
        std::vector<float> A((size_t)m * k), B((size_t)k * n), C((size_t)m * n);
        fill(A, 1), fill(B, 2);
        float *dA, *dB, *dC;
        CK(cudaMalloc(&dA, A.size() * 4)); CK(cudaMalloc(&dB, B.size() * 4)); CK(cudaMalloc(&dC, C.size() * 4));
        CK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemset(dC, 0xFF, C.size() * 4));
        float one = 1, zero = 0;
        double t1 = now_ms();
        CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, m, dB, k, &zero, dC, m));
        CK(cudaDeviceSynchronize());
        printf("first_sgemm_ms=%.2f\n", now_ms() - t1);
        CK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
        step("sgemm", close_to(C, ref_gemm(A, B, m, n, k), 1e-4));
        cudaFree(dA), cudaFree(dB), cudaFree(dC);
    }
    {  // DGEMM
        std::vector<double> A((size_t)m * k), B((size_t)k * n), C((size_t)m * n);
        fill(A, 3), fill(B, 4);
        double *dA, *dB, *dC;
        CK(cudaMalloc(&dA, A.size() * 8)); CK(cudaMalloc(&dB, B.size() * 8)); CK(cudaMalloc(&dC, C.size() * 8));
        CK(cudaMemcpy(dA, A.data(), A.size() * 8, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dB, B.data(), B.size() * 8, cudaMemcpyHostToDevice));
        CK(cudaMemset(dC, 0xFF, C.size() * 8));
        double one = 1, zero = 0;
        CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, m, dB, k, &zero, dC, m));
        CK(cudaMemcpy(C.data(), dC, C.size() * 8, cudaMemcpyDeviceToHost));
        step("dgemm", close_to(C, ref_gemm(A, B, m, n, k), 1e-10));
        cudaFree(dA), cudaFree(dB), cudaFree(dC);
    }
    {  // HGEMM (fp16 in, fp16 out)
        std::vector<__half> A((size_t)m * k), B((size_t)k * n), C((size_t)m * n);
        std::vector<float> Af((size_t)m * k), Bf((size_t)k * n);
        fill(Af, 5), fill(Bf, 6);
        for (size_t i = 0; i < Af.size(); i++) A[i] = __float2half(Af[i]), Af[i] = __half2float(A[i]);
        for (size_t i = 0; i < Bf.size(); i++) B[i] = __float2half(Bf[i]), Bf[i] = __half2float(B[i]);
        __half *dA, *dB, *dC;
        CK(cudaMalloc(&dA, A.size() * 2)); CK(cudaMalloc(&dB, B.size() * 2)); CK(cudaMalloc(&dC, C.size() * 2));
        CK(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemset(dC, 0xFF, C.size() * 2));
        __half one = __float2half(1.f), zero = __float2half(0.f);
        CK(cublasHgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, m, dB, k, &zero, dC, m));
        CK(cudaMemcpy(C.data(), dC, C.size() * 2, cudaMemcpyDeviceToHost));
        std::vector<float> Cf(C.size());
        for (size_t i = 0; i < C.size(); i++) Cf[i] = __half2float(C[i]);
        step("hgemm", close_to(Cf, ref_gemm(Af, Bf, m, n, k), 2e-2));
        cudaFree(dA), cudaFree(dB), cudaFree(dC);
    }
    {  // Strided-batched SGEMM, 8 batches
        const int bt = 8, bm = 64, bn = 48, bk = 32;
        std::vector<float> A((size_t)bm * bk * bt), B((size_t)bk * bn * bt), C((size_t)bm * bn * bt);
        fill(A, 7), fill(B, 8);
        float *dA, *dB, *dC;
        CK(cudaMalloc(&dA, A.size() * 4)); CK(cudaMalloc(&dB, B.size() * 4)); CK(cudaMalloc(&dC, C.size() * 4));
        CK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemset(dC, 0xFF, C.size() * 4));
        float one = 1, zero = 0;
        CK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, bm, bn, bk, &one, dA, bm, (long long)bm * bk,
                                     dB, bk, (long long)bk * bn, &zero, dC, bm, (long long)bm * bn, bt));
        CK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int b = 0; b < bt; b++) {
            std::vector<float> a(A.begin() + (size_t)b * bm * bk, A.begin() + (size_t)(b + 1) * bm * bk);
            std::vector<float> bb(B.begin() + (size_t)b * bk * bn, B.begin() + (size_t)(b + 1) * bk * bn);
            std::vector<float> c(C.begin() + (size_t)b * bm * bn, C.begin() + (size_t)(b + 1) * bm * bn);
            ok = ok && close_to(c, ref_gemm(a, bb, bm, bn, bk), 1e-4);
        }
        step("sgemm_batched", ok);
        cudaFree(dA), cudaFree(dB), cudaFree(dC);
    }
    {  // STRSM: solve L X = B, L lower triangular (well conditioned), X checked by L*X.
        const int tn = 96, tr = 40;
        std::vector<float> L((size_t)tn * tn, 0.f), B((size_t)tn * tr), X((size_t)tn * tr);
        fill(B, 9);
        unsigned s = 10;
        for (int j = 0; j < tn; j++)
            for (int i = j; i < tn; i++) {
                s = s * 1664525u + 1013904223u;
                L[(size_t)i + (size_t)j * tn] = i == j ? 2.0f + (s >> 28) : ((s >> 8) % 2001) / 20000.0f - 0.05f;
            }
        float *dL, *dB;
        CK(cudaMalloc(&dL, L.size() * 4)); CK(cudaMalloc(&dB, B.size() * 4));
        CK(cudaMemcpy(dL, L.data(), L.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
        float one = 1;
        CK(cublasStrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, tn, tr,
                       &one, dL, tn, dB, tn));
        CK(cudaMemcpy(X.data(), dB, X.size() * 4, cudaMemcpyDeviceToHost));
        std::vector<double> LX = ref_gemm(L, X, tn, tr, tn);
        std::vector<double> want(B.begin(), B.end());
        std::vector<float> lxf(LX.begin(), LX.end());
        step("strsm", close_to(lxf, want, 1e-4));
        cudaFree(dL), cudaFree(dB);
    }
    {  // 4096^3 SGEMM throughput (after a warm-up call).
        const int N = 4096;
        float *dA, *dB, *dC;
        CK(cudaMalloc(&dA, (size_t)N * N * 4)); CK(cudaMalloc(&dB, (size_t)N * N * 4)); CK(cudaMalloc(&dC, (size_t)N * N * 4));
        CK(cudaMemset(dA, 0, (size_t)N * N * 4)); CK(cudaMemset(dB, 0, (size_t)N * N * 4));
        float one = 1, zero = 0;
        CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA, N, dB, N, &zero, dC, N));
        CK(cudaDeviceSynchronize());
        const int reps = 10;
        double t1 = now_ms();
        for (int r = 0; r < reps; r++)
            CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA, N, dB, N, &zero, dC, N));
        CK(cudaDeviceSynchronize());
        double ms = (now_ms() - t1) / reps;
        printf("sgemm4096_tflops=%.1f\n", 2.0 * N * N * (double)N / (ms * 1e9));
        cudaFree(dA), cudaFree(dB), cudaFree(dC);
    }
    CK(cublasDestroy(h));
    printf("total_ms=%.1f\n", now_ms() - t0);
    printf("rss_kb=%ld hwm_kb=%ld\n", status_kb("VmRSS"), status_kb("VmHWM"));
    printf("cublas_check: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
