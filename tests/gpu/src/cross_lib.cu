// The documented limitation (docs/RUNTIME.md): a packed library's module is loaded by calls
// made from that library. Built twice: as libcross.so (-DCROSS_LIB) and as the program that
// names the library's kernel from outside before the library used it, then after.
#include <cstdio>
#include <cuda_runtime.h>

#ifdef CROSS_LIB
__global__ void cross_kernel(int *p) { *p = 42; }
extern "C" const void *cross_kernel_address() { return (const void *)cross_kernel; }
extern "C" int cross_launch() {
    int *d = nullptr, h = 0;
    if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) return -1;
    cross_kernel<<<1, 1>>>(d);
    cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d);
    return h;
}
#else
extern "C" const void *cross_kernel_address();
extern "C" int cross_launch();
int main() {
    cudaFree(0);
    cudaFuncAttributes a;
    cudaError_t before = cudaFuncGetAttributes(&a, cross_kernel_address());
    cudaGetLastError();
    int r = cross_launch();
    cudaError_t after = cudaFuncGetAttributes(&a, cross_kernel_address());
    printf("cross_lib: before=%d after=%d launch=%d\n", (int)before, (int)after, r);
    return r == 42 && after == cudaSuccess ? 0 : 1;
}
#endif
