/* A packed shared library for the runtime's tests: one module ("lib#L") registered in its
 * constructor as nvcc does, and an entry point that launches its kernel. */
#include <stddef.h>
#include <stdlib.h>

#include "stubs.h"

typedef struct { unsigned x, y, z; } dim3;
typedef struct {
    int magic;
    int version;
    const unsigned long long *data;
    void *filename_or_fatbins;
} __fatBinC_Wrapper_t;

extern void **__cudaRegisterFatBinary(void *fatCubin);
extern void __cudaRegisterFatBinaryEnd(void **h);
extern void __cudaUnregisterFatBinary(void **h);
extern void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun,
                                   const char *deviceName, int thread_limit, void *tid, void *bid,
                                   void *bDim, void *gDim, int *wSize);
extern int cudaLaunchKernel(const void *func, dim3 g, dim3 b, void **args, size_t shared,
                            void *stream);

__attribute__((section(".nv_fatbin"), aligned(8))) static const unsigned char stubL[] = STUB_L;
static const __fatBinC_Wrapper_t wrapL __attribute__((aligned(8), section(".nvFatBinSegment"))) =
    {0x466243b1, 1, (const unsigned long long *)stubL, 0};
static void **hL;
void kernL(void) {}
static void unregL(void) { __cudaUnregisterFatBinary(hL); }
__attribute__((constructor)) static void regL(void) {
    hL = __cudaRegisterFatBinary((void *)&wrapL);
    __cudaRegisterFunction(hL, (const char *)kernL, (char *)"kernL", "kernL", -1, 0, 0, 0, 0, 0);
    __cudaRegisterFatBinaryEnd(hL);
    atexit(unregL);
}

int lib_launch(void) {
    dim3 g = {1, 1, 1}, b = {64, 1, 1};
    return cudaLaunchKernel((const void *)kernL, g, b, NULL, 0, NULL);
}
