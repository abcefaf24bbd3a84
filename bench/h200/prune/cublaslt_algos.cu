// cuBLASLt with every algorithm its heuristics offer (up to 24 per problem) for several
// types and shapes, so that many of the kernels cuBLASLt keeps in its `.cask_resource`
// load and run. Writes every result's bytes to argv[1], so that a run against a pruned
// libcublasLt can be compared byte for byte with a run against the original
// (bench/h200/prune/run.sh); prints one line per problem with the algorithms that ran.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include <cublasLt.h>

#define CK(x) do { auto e = (x); if ((int)e != 0) { fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, (int)e); exit(1); } } while (0)

static void *device_random(size_t bytes, unsigned seed, cudaDataType t) {
  std::vector<unsigned char> h(bytes); srand(seed);
  size_t es = t == CUDA_R_32F ? 4 : 2;
  for (size_t i = 0; i < bytes / es; i++) {
    float f = (rand() % 200 - 100) / 64.0f;
    if (t == CUDA_R_32F) { memcpy(&h[i * 4], &f, 4); continue; }
    unsigned u; memcpy(&u, &f, 4);
    unsigned short v = t == CUDA_R_16BF ? (unsigned short)(u >> 16) : 0;
    if (t == CUDA_R_16F) { // f32 -> f16, values small and exact in 10 bits
      unsigned sign = (u >> 16) & 0x8000; int exp = ((u >> 23) & 0xff) - 127 + 15; unsigned man = (u >> 13) & 0x3ff;
      v = (f == 0) ? 0 : (unsigned short)(sign | (exp << 10) | man);
    }
    memcpy(&h[i * 2], &v, 2);
  }
  void *d; CK(cudaMalloc(&d, bytes)); CK(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
  return d;
}

int main(int argc, char **argv) {
  FILE *out = fopen(argv[1], "wb");
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  void *ws; size_t wss = 64 << 20; CK(cudaMalloc(&ws, wss));
  struct Kind { const char *name; cudaDataType ab, c; cublasComputeType_t compute; cudaDataType scale; };
  const Kind kinds[] = {
    {"bf16->f32", CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F},
    {"bf16->bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F},
    {"f16->f16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F},
    {"f32 tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F},
    {"f32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F},
  };
  const int shapes[][3] = {{1024, 1024, 1024}, {4096, 512, 2048}, {333, 77, 519}, {64, 8192, 256}};
  int total = 0;
  for (const Kind &k : kinds)
    for (const auto &s : shapes) {
      int m = s[0], n = s[1], kk = s[2];
      size_t es_ab = k.ab == CUDA_R_32F ? 4 : 2, es_c = k.c == CUDA_R_32F ? 4 : 2;
      void *a = device_random((size_t)m * kk * es_ab, 1 + m, k.ab), *b = device_random((size_t)kk * n * es_ab, 2 + n, k.ab);
      void *c; CK(cudaMalloc(&c, (size_t)m * n * es_c));
      cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, k.compute, k.scale));
      cublasOperation_t t = CUBLAS_OP_T;
      CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
      cublasLtMatrixLayout_t la, lb, lc;
      CK(cublasLtMatrixLayoutCreate(&la, k.ab, kk, m, kk)); CK(cublasLtMatrixLayoutCreate(&lb, k.ab, kk, n, kk));
      CK(cublasLtMatrixLayoutCreate(&lc, k.c, m, n, m));
      cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
      CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wss, sizeof(wss)));
      cublasLtMatmulHeuristicResult_t r[24]; int got = 0;
      CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 24, r, &got));
      float one = 1, zero = 0;
      int ran = 0;
      std::vector<unsigned char> h((size_t)m * n * es_c);
      double sum = 0;
      for (int i = 0; i < got; i++) {
        CK(cudaMemset(c, 0, h.size()));
        if (cublasLtMatmul(lt, op, &one, a, la, b, lb, &zero, c, lc, c, lc, &r[i].algo, ws, wss, 0) != CUBLAS_STATUS_SUCCESS) continue;
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(h.data(), c, h.size(), cudaMemcpyDeviceToHost));
        fwrite(h.data(), 1, h.size(), out);
        for (size_t j = 0; j < h.size() / 4; j++) sum += ((const unsigned *)h.data())[j] % 1000;
        ran++;
      }
      total += ran;
      printf("%-10s %5dx%5dx%5d  %2d of %2d algorithms ran, checksum %.0f\n", k.name, m, n, kk, ran, got, sum);
      cudaFree(a); cudaFree(b); cudaFree(c);
    }
  printf("cuBLASLt: %d matmuls\n", total);
  fclose(out);
  return total > 0 ? 0 : 1;
}
