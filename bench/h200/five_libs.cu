// One program on five static CUDA libraries, each call checked against a CPU reference:
// cuBLAS (SGEMM), cuSOLVER (Cholesky, SPOTRF), cuSPARSE (CSR SpMV), cuFFT with a device load
// callback (relocatable device code, device-linked by nvcc) and cuRAND (host generator).
// Link-time benchmark input (bench/h200/link_overlap.sh); prints one PASS line per library.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cufft.h>
#include <cufftXt.h>
#include <curand.h>
#include <cusolverDn.h>
#include <cusparse.h>

#define CK(x) do { auto e_ = (x); if ((int)e_ != 0) { fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, (int)e_); exit(1); } } while (0)

static int failures = 0;
static void verdict(const char *lib, double err, double tol) {
  bool ok = std::isfinite(err) && err <= tol;
  printf("five_libs: %s %s (max error %.3g, tolerance %.3g)\n", ok ? "PASS" : "FAIL", lib, err, tol);
  failures += !ok;
}

__device__ cufftReal load_scaled(void *in, size_t offset, void *, void *) {
  return ((cufftReal *)in)[offset] * 2.0f;
}
__device__ cufftCallbackLoadR d_load = load_scaled;

template <class T> static T *dev(const std::vector<T> &h) {
  T *d;
  CK(cudaMalloc(&d, h.size() * sizeof(T)));
  CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <class T> static std::vector<T> host(const T *d, size_t n) {
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

static void blas() {
  const int n = 96;
  std::vector<float> a(n * n), b(n * n), c(n * n, 0.f);
  for (int i = 0; i < n * n; i++) { a[i] = (i * 7 % 13 - 6) / 8.f; b[i] = (i * 5 % 11 - 5) / 8.f; }
  float *da = dev(a), *db = dev(b), *dc = dev(c), one = 1, zero = 0;
  cublasHandle_t h; CK(cublasCreate(&h));
  CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc, n));
  auto got = host(dc, n * n);
  double err = 0;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++) {
      double s = 0;
      for (int k = 0; k < n; k++) s += (double)a[i + k * n] * b[k + j * n];
      err = fmax(err, fabs(s - got[i + j * n]));
    }
  verdict("cublas sgemm", err, 1e-3);
  cublasDestroy(h);
}

static void solver() {
  const int n = 64;
  std::vector<float> a(n * n);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++) a[i + j * n] = (i == j ? n : 0) + 1.f / (1 + i + j);
  float *da = dev(a);
  cusolverDnHandle_t h; CK(cusolverDnCreate(&h));
  int lwork; CK(cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, da, n, &lwork));
  float *work; int *info; CK(cudaMalloc(&work, lwork * 4)); CK(cudaMalloc(&info, 4));
  CK(cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, da, n, work, lwork, info));
  auto l = host(da, n * n);
  int hinfo = host(info, 1)[0];
  double err = hinfo == 0 ? 0 : INFINITY;
  for (int j = 0; j < n; j++)
    for (int i = j; i < n; i++) {
      double s = 0;
      for (int k = 0; k <= j; k++) s += (double)l[i + k * n] * l[j + k * n];
      err = fmax(err, fabs(s - a[i + j * n]));
    }
  verdict("cusolver spotrf", err, 1e-3);
  cusolverDnDestroy(h);
}

static void sparse() {
  const int n = 1000;
  std::vector<int> rows{0}, cols;
  std::vector<float> vals, x(n), y(n, 0.f);
  for (int i = 0; i < n; i++) {
    for (int j = i - 1; j <= i + 1; j++)
      if (j >= 0 && j < n) { cols.push_back(j); vals.push_back(j == i ? 2.f : -1.f); }
    rows.push_back(cols.size());
    x[i] = (i % 17) / 4.f;
  }
  int *dr = dev(rows), *dcol = dev(cols);
  float *dv = dev(vals), *dx = dev(x), *dy = dev(y), one = 1, zero = 0;
  cusparseHandle_t h; CK(cusparseCreate(&h));
  cusparseSpMatDescr_t m; cusparseDnVecDescr_t vx, vy;
  CK(cusparseCreateCsr(&m, n, n, vals.size(), dr, dcol, dv, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                       CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  CK(cusparseCreateDnVec(&vx, n, dx, CUDA_R_32F));
  CK(cusparseCreateDnVec(&vy, n, dy, CUDA_R_32F));
  size_t bytes; void *buf;
  CK(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, m, vx, &zero, vy, CUDA_R_32F,
                             CUSPARSE_SPMV_ALG_DEFAULT, &bytes));
  CK(cudaMalloc(&buf, bytes + 1));
  CK(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, m, vx, &zero, vy, CUDA_R_32F,
                  CUSPARSE_SPMV_ALG_DEFAULT, buf));
  auto got = host(dy, n);
  double err = 0;
  for (int i = 0; i < n; i++) {
    double s = 0;
    for (int k = rows[i]; k < rows[i + 1]; k++) s += vals[k] * x[cols[k]];
    err = fmax(err, fabs(s - got[i]));
  }
  verdict("cusparse spmv", err, 1e-4);
  cusparseDestroy(h);
}

static void fft() {
  const int n = 256;
  std::vector<float> x(n);
  for (int i = 0; i < n; i++) x[i] = (i * 37 % 101 - 50) / 25.f;
  float *dx = dev(x);
  cufftComplex *dy; CK(cudaMalloc(&dy, (n / 2 + 1) * sizeof(cufftComplex)));
  cufftHandle p; CK(cufftPlan1d(&p, n, CUFFT_R2C, 1));
  cufftCallbackLoadR h_load; CK(cudaMemcpyFromSymbol(&h_load, d_load, sizeof(h_load)));
  CK(cufftXtSetCallback(p, (void **)&h_load, CUFFT_CB_LD_REAL, 0));
  CK(cufftExecR2C(p, dx, dy));
  auto y = host(dy, n / 2 + 1);
  double err = 0;
  for (int k = 0; k <= n / 2; k++) {
    double re = 0, im = 0;
    for (int t = 0; t < n; t++) {
      re += 2.0 * x[t] * cos(2 * M_PI * k * t / n);
      im -= 2.0 * x[t] * sin(2 * M_PI * k * t / n);
    }
    err = fmax(err, fmax(fabs(re - y[k].x), fabs(im - y[k].y)));
  }
  verdict("cufft r2c with a load callback", err, 1e-2);
  cufftDestroy(p);
}

static void rand_() {
  const size_t n = 1 << 20;
  float *d; CK(cudaMalloc(&d, n * 4));
  curandGenerator_t g; CK(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  CK(curandSetPseudoRandomGeneratorSeed(g, 1234));
  CK(curandGenerateUniform(g, d, n));
  auto h = host(d, n);
  double sum = 0, bad = 0;
  for (float v : h) { sum += v; bad += !(v > 0.f && v <= 1.f); }
  verdict("curand uniform (mean 0.5, every value in (0, 1])", fabs(sum / n - 0.5) + bad, 2e-3);
  curandDestroyGenerator(g);
}

int main() {
  blas();
  solver();
  sparse();
  fft();
  rand_();
  printf("five_libs: %s\n", failures ? "FAILED" : "all passed");
  return failures != 0;
}
