#pragma once
// Host API of libvecops. Every function returns a cudaError_t value (0 = success).
#ifdef __cplusplus
extern "C" {
#endif

// Sets the library's __device__ scale factor (used by vecops_saxpy).
int vecops_set_scale(float s);
int vecops_get_scale(float* s);
// y[i] = a * scale * x[i] + y[i], on device pointers.
int vecops_saxpy(float a, const float* x, float* y, int n);
// *out = sum of x[0..n), on device pointers (out: one float).
int vecops_sum(const float* x, float* out, int n);

#ifdef __cplusplus
}
#endif
