// cuSPARSE SpMV, SpMM and SpSV (CSR, float) on a random sparse matrix, each checked against a
// CPU reference in double; every result's bytes go to argv[1], so that runs against a fat
// and a pruned libcusparse can be compared byte for byte (bench/h200/packages.sh).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <cusparse.h>

#define CK(x) do { auto e = (x); if ((int)e != 0) { fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, (int)e); exit(1); } } while (0)

static FILE *out;
static int failed = 0;

template <class T> static T *dev(const std::vector<T> &h) {
  T *d; CK(cudaMalloc(&d, h.size() * sizeof(T)));
  CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

static void check(const char *what, const float *d, const std::vector<double> &want) {
  std::vector<float> got(want.size());
  CK(cudaMemcpy(got.data(), d, got.size() * 4, cudaMemcpyDeviceToHost));
  fwrite(got.data(), 4, got.size(), out);
  double worst = 0;
  for (size_t i = 0; i < got.size(); i++)
    worst = fmax(worst, fabs(got[i] - want[i]) / fmax(1.0, fabs(want[i])));
  bool ok = worst < 1e-4;
  failed += !ok;
  printf("%-5s %zu values, max rel. error vs CPU %.2e: %s\n", what, got.size(), worst, ok ? "ok" : "FAILED");
}

int main(int argc, char **argv) {
  out = fopen(argv[1], "wb");
  const int n = 4096, k = 16;
  // Lower-triangular CSR: a dominant diagonal and about 8 entries below it per row.
  std::vector<int> rows{0}, cols; std::vector<float> vals;
  srand(7);
  for (int r = 0; r < n; r++) {
    for (int j = 0; j < 8 && r > 0; j++) { cols.push_back(rand() % r); vals.push_back((rand() % 200 - 100) / 400.0f); }
    cols.push_back(r); vals.push_back(4.0f + rand() % 4);
    // Columns in order within a row, as CSR wants (duplicates summed by the CPU side too).
    int s = rows.back(); std::vector<std::pair<int, float>> row;
    for (size_t i = s; i < cols.size(); i++) row.push_back({cols[i], vals[i]});
    std::sort(row.begin(), row.end(), [](auto a, auto b) { return a.first < b.first; });
    for (size_t i = 0; i < row.size(); i++) { cols[s + i] = row[i].first; vals[s + i] = row[i].second; }
    rows.push_back(cols.size());
  }
  std::vector<float> x(n), B(n * k);
  for (auto &v : x) v = (rand() % 2001 - 1000) / 1000.0f;
  for (auto &v : B) v = (rand() % 2001 - 1000) / 1000.0f;
  // CPU references.
  std::vector<double> y(n, 0), C((size_t)n * k, 0), z(n, 0);
  for (int r = 0; r < n; r++)
    for (int i = rows[r]; i < rows[r + 1]; i++) {
      y[r] += (double)vals[i] * x[cols[i]];
      for (int c = 0; c < k; c++) C[(size_t)c * n + r] += (double)vals[i] * B[(size_t)c * n + cols[i]];
    }
  for (int r = 0; r < n; r++) {  // forward substitution: L z = x
    double s = x[r], diag = 1;
    for (int i = rows[r]; i < rows[r + 1]; i++) { if (cols[i] == r) diag = vals[i]; else s -= vals[i] * z[cols[i]]; }
    z[r] = s / diag;
  }
  cusparseHandle_t h; CK(cusparseCreate(&h));
  int *dr = dev(rows), *dc = dev(cols); float *dv = dev(vals), *dx = dev(x), *dB = dev(B);
  float *dy, *dC, *dz; CK(cudaMalloc(&dy, n * 4)); CK(cudaMalloc(&dC, (size_t)n * k * 4)); CK(cudaMalloc(&dz, n * 4));
  cusparseSpMatDescr_t A;
  CK(cusparseCreateCsr(&A, n, n, vals.size(), dr, dc, dv, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  cusparseDnVecDescr_t vx, vy, vz; cusparseDnMatDescr_t mB, mC;
  CK(cusparseCreateDnVec(&vx, n, dx, CUDA_R_32F)); CK(cusparseCreateDnVec(&vy, n, dy, CUDA_R_32F)); CK(cusparseCreateDnVec(&vz, n, dz, CUDA_R_32F));
  CK(cusparseCreateDnMat(&mB, n, k, n, dB, CUDA_R_32F, CUSPARSE_ORDER_COL)); CK(cusparseCreateDnMat(&mC, n, k, n, dC, CUDA_R_32F, CUSPARSE_ORDER_COL));
  float one = 1, zero = 0; size_t sz; void *buf;
  CK(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &sz));
  CK(cudaMalloc(&buf, sz + 1));
  CK(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, buf));
  check("spmv", dy, y);
  CK(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, mB, &zero, mC, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &sz));
  CK(cudaMalloc(&buf, sz + 1));
  CK(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, mB, &zero, mC, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, buf));
  check("spmm", dC, C);
  cusparseFillMode_t fill = CUSPARSE_FILL_MODE_LOWER; cusparseDiagType_t diag = CUSPARSE_DIAG_TYPE_NON_UNIT;
  CK(cusparseSpMatSetAttribute(A, CUSPARSE_SPMAT_FILL_MODE, &fill, sizeof(fill)));
  CK(cusparseSpMatSetAttribute(A, CUSPARSE_SPMAT_DIAG_TYPE, &diag, sizeof(diag)));
  cusparseSpSVDescr_t sv; CK(cusparseSpSV_createDescr(&sv));
  CK(cusparseSpSV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, vz, CUDA_R_32F, CUSPARSE_SPSV_ALG_DEFAULT, sv, &sz));
  CK(cudaMalloc(&buf, sz + 1));
  CK(cusparseSpSV_analysis(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, vz, CUDA_R_32F, CUSPARSE_SPSV_ALG_DEFAULT, sv, buf));
  CK(cusparseSpSV_solve(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, vz, CUDA_R_32F, CUSPARSE_SPSV_ALG_DEFAULT, sv));
  check("spsv", dz, z);
  CK(cudaDeviceSynchronize());
  fclose(out);
  return failed ? 1 : 0;
}
