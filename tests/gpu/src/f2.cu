// TU f2 (-rdc=true): defines the __device__ function and variable that f1's kernel uses.
#include "common.h"
#include "suite.h"

__device__ int f2_calls;

__device__ float f2_poly(float x) { return fmaf(x, fmaf(x, 0.5f, -0.25f), 1.0f); }

bool f2_reset_calls() {
    const int zero = 0;
    CK(cudaMemcpyToSymbol(f2_calls, &zero, sizeof zero));
    return true;
}

bool f2_read_calls(int* calls) {
    CK(cudaMemcpyFromSymbol(calls, f2_calls, sizeof(int)));
    return true;
}
