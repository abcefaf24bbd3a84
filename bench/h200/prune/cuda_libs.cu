// One program on cuBLAS, cuBLASLt, cuSPARSE and cuFFT: writes every result's bytes to
// argv[1], so that a run against pruned libraries can be compared byte for byte with a run
// against the originals (bench/h200/prune/run.sh).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cusparse.h>
#include <cufft.h>

#define CK(x) do { auto e = (x); if ((int)e != 0) { fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, (int)e); exit(1); } } while (0)

static FILE *out;
template <class T> static void dump(const char *what, const T *dev, size_t n) {
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
  double s = 0; for (size_t i = 0; i < n * sizeof(T) / 4; i++) s += ((const unsigned *)h.data())[i] % 1000;
  fwrite(h.data(), sizeof(T), n, out);
  printf("%-22s %zu bytes, checksum %.0f\n", what, n * sizeof(T), s);
}
template <class T> static T *fill(size_t n, unsigned seed, double scale) {
  std::vector<T> h(n); srand(seed);
  for (auto &x : h) x = (T)((rand() % 2001 - 1000) * scale / 1000.0);
  T *d; CK(cudaMalloc(&d, n * sizeof(T))); CK(cudaMemcpy(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

int main(int argc, char **argv) {
  out = fopen(argv[1], "wb");
  const int n = 1024;
  cublasHandle_t h; CK(cublasCreate(&h));
  { // SGEMM, DGEMM, HGEMM (tensor cores), GemmEx bf16 -> f32
    float *a = fill<float>(n * n, 1, 1), *b = fill<float>(n * n, 2, 1), *c; CK(cudaMalloc(&c, n * n * 4));
    float one = 1, zero = 0;
    CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n)); dump("sgemm", c, n * n);
    double *da = fill<double>(n * n, 3, 1), *db = fill<double>(n * n, 4, 1), *dc; CK(cudaMalloc(&dc, n * n * 8));
    double done = 1, dzero = 0;
    CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &done, da, n, db, n, &dzero, dc, n)); dump("dgemm", dc, n * n);
    __half *ha = fill<__half>(n * n, 5, 1), *hb = fill<__half>(n * n, 6, 1), *hc; CK(cudaMalloc(&hc, n * n * 2));
    __half hone = 1, hzero = 0;
    CK(cublasHgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &hone, ha, n, hb, n, &hzero, hc, n)); dump("hgemm", hc, n * n);
    CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, ha, CUDA_R_16F, n, hb, CUDA_R_16F, n, &zero, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)); dump("gemmex f16->f32", c, n * n);
    int m = 333; // odd sizes take other kernels
    CK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, 77, 519, &one, a, 519, b, 519, &zero, c, m)); dump("sgemm odd", c, m * 77);
  }
  { // cuBLASLt matmul, bf16 in, f32 out
    cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
    typedef unsigned short bf16;
    std::vector<bf16> hv(n * n); srand(7); for (auto &x : hv) { float f = (rand() % 200 - 100) / 64.0f; unsigned u; memcpy(&u, &f, 4); x = u >> 16; }
    bf16 *a, *b; CK(cudaMalloc(&a, n * n * 2)); CK(cudaMalloc(&b, n * n * 2));
    CK(cudaMemcpy(a, hv.data(), n * n * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(b, hv.data(), n * n * 2, cudaMemcpyHostToDevice));
    float *c; CK(cudaMalloc(&c, n * n * 4));
    cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n)); CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n)); CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, n, n));
    float one = 1, zero = 0; void *ws; size_t wss = 32 << 20; CK(cudaMalloc(&ws, wss));
    cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wss, sizeof(wss)));
    cublasLtMatmulHeuristicResult_t r; int got = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &r, &got));
    if (!got) { fprintf(stderr, "no cublasLt algo\n"); return 1; }
    CK(cublasLtMatmul(lt, op, &one, a, la, b, lb, &zero, c, lc, c, lc, &r.algo, ws, wss, 0)); dump("cublasLt bf16", c, n * n);
  }
  { // cuSPARSE SpMV and SpMM on a banded CSR matrix
    cusparseHandle_t sp; CK(cusparseCreate(&sp));
    const int rows = 4096; std::vector<int> rp(rows + 1), ci; std::vector<float> v;
    for (int i = 0; i < rows; i++) { rp[i] = ci.size(); for (int j = i - 3; j <= i + 3; j++) if (j >= 0 && j < rows) { ci.push_back(j); v.push_back((i * 7 + j * 3) % 11 - 5); } }
    rp[rows] = ci.size(); int nnz = ci.size();
    int *drp, *dci; float *dv; CK(cudaMalloc(&drp, (rows + 1) * 4)); CK(cudaMalloc(&dci, nnz * 4)); CK(cudaMalloc(&dv, nnz * 4));
    CK(cudaMemcpy(drp, rp.data(), (rows + 1) * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dci, ci.data(), nnz * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dv, v.data(), nnz * 4, cudaMemcpyHostToDevice));
    float *x = fill<float>(rows * 64, 8, 1), *y; CK(cudaMalloc(&y, rows * 64 * 4));
    cusparseSpMatDescr_t A; CK(cusparseCreateCsr(&A, rows, rows, nnz, drp, dci, dv, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    cusparseDnVecDescr_t vx, vy; CK(cusparseCreateDnVec(&vx, rows, x, CUDA_R_32F)); CK(cusparseCreateDnVec(&vy, rows, y, CUDA_R_32F));
    float one = 1, zero = 0; size_t bs; void *buf;
    CK(cusparseSpMV_bufferSize(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &bs)); CK(cudaMalloc(&buf, bs + 1));
    CK(cusparseSpMV(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, buf)); dump("cusparse spmv", y, rows);
    cusparseDnMatDescr_t X, Y; CK(cusparseCreateDnMat(&X, rows, 64, rows, x, CUDA_R_32F, CUSPARSE_ORDER_COL)); CK(cusparseCreateDnMat(&Y, rows, 64, rows, y, CUDA_R_32F, CUSPARSE_ORDER_COL));
    CK(cusparseSpMM_bufferSize(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &bs)); CK(cudaMalloc(&buf, bs + 1));
    CK(cusparseSpMM(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, buf)); dump("cusparse spmm", y, rows * 64);
  }
  { // cuFFT: C2C 1-D batched, 2-D, R2C, odd size (Bluestein), double Z2Z
    cufftComplex *x = (cufftComplex *)fill<float>(2 * 4096 * 16, 9, 1), *y; CK(cudaMalloc(&y, 4096 * 16 * 8));
    cufftHandle p; CK(cufftPlan1d(&p, 4096, CUFFT_C2C, 16)); CK(cufftExecC2C(p, x, y, CUFFT_FORWARD)); dump("cufft c2c 4096x16", (float *)y, 2 * 4096 * 16);
    cufftHandle p2; CK(cufftPlan2d(&p2, 256, 256, CUFFT_C2C)); CK(cufftExecC2C(p2, x, y, CUFFT_INVERSE)); dump("cufft c2c 256x256", (float *)y, 2 * 256 * 256);
    float *r = fill<float>(8192, 10, 1); cufftHandle p3; CK(cufftPlan1d(&p3, 8192, CUFFT_R2C, 1)); CK(cufftExecR2C(p3, r, y)); dump("cufft r2c 8192", (float *)y, 2 * 4097);
    cufftHandle p4; CK(cufftPlan1d(&p4, 1009, CUFFT_C2C, 4)); CK(cufftExecC2C(p4, x, y, CUFFT_FORWARD)); dump("cufft c2c 1009x4", (float *)y, 2 * 1009 * 4);
    cufftDoubleComplex *dx = (cufftDoubleComplex *)fill<double>(2 * 2048, 11, 1), *dy; CK(cudaMalloc(&dy, 2048 * 16));
    cufftHandle p5; CK(cufftPlan1d(&p5, 2048, CUFFT_Z2Z, 1)); CK(cufftExecZ2Z(p5, dx, dy, CUFFT_FORWARD)); dump("cufft z2z 2048", (double *)dy, 2 * 2048);
  }
  CK(cudaDeviceSynchronize());
  fclose(out);
  printf("ok\n");
  return 0;
}
