// cuFFT with a load callback (static cuFFT, relocatable device code): an R2C transform
// whose input is scaled by 2 in the callback. Writes the result's bytes to argv[1], to be
// compared between libcufft_static.a and the same archive pruned by fatpack.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <cufft.h>
#include <cufftXt.h>

#define CK(x) do { auto e = (x); if ((int)e != 0) { fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, (int)e); exit(1); } } while (0)

__device__ cufftReal load_scaled(void *in, size_t offset, void *, void *) {
  return ((cufftReal *)in)[offset] * 2.0f;
}
__device__ cufftCallbackLoadR d_load = load_scaled;

int main(int argc, char **argv) {
  const int n = 4096, batch = 8;
  std::vector<float> h(n * batch);
  for (int i = 0; i < n * batch; i++) h[i] = (i * 37 % 101 - 50) / 25.0f;
  float *x; cufftComplex *y;
  CK(cudaMalloc(&x, h.size() * 4)); CK(cudaMalloc(&y, (n / 2 + 1) * batch * 8));
  CK(cudaMemcpy(x, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  cufftHandle p; CK(cufftPlan1d(&p, n, CUFFT_R2C, batch));
  cufftCallbackLoadR h_load; CK(cudaMemcpyFromSymbol(&h_load, d_load, sizeof(h_load)));
  CK(cufftXtSetCallback(p, (void **)&h_load, CUFFT_CB_LD_REAL, 0));
  CK(cufftExecR2C(p, x, y));
  std::vector<float> out((n / 2 + 1) * batch * 2);
  CK(cudaMemcpy(out.data(), y, out.size() * 4, cudaMemcpyDeviceToHost));
  FILE *f = fopen(argv[1], "wb"); fwrite(out.data(), 4, out.size(), f); fclose(f);
  printf("cufft r2c with load callback: %zu bytes, y[1] = %g%+gi\n", out.size() * 4, out[2], out[3]);
  return 0;
}
