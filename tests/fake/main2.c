/* A packed program using a packed shared library: both carry their own runtime copy and
 * store. Modes: "linked" (the library is a DT_NEEDED), "dlopen DIR" (dlopen("./liblib.so")
 * from DIR, then chdir("/") or to a third argument, so the library's recorded path is relative
 * and names whatever is there now). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
#ifdef LINKED
extern int lib_launch(void);
#endif

__attribute__((section(".nv_fatbin"), aligned(8))) static const unsigned char stubM[] = STUB_M;
static const __fatBinC_Wrapper_t wrapM __attribute__((aligned(8), section(".nvFatBinSegment"))) =
    {0x466243b1, 1, (const unsigned long long *)stubM, 0};
static void **hM;
void kernM(void) {}
static void unregM(void) { __cudaUnregisterFatBinary(hM); }
__attribute__((constructor)) static void regM(void) {
    hM = __cudaRegisterFatBinary((void *)&wrapM);
    __cudaRegisterFunction(hM, (const char *)kernM, (char *)"kernM", "kernM", -1, 0, 0, 0, 0, 0);
    __cudaRegisterFatBinaryEnd(hM);
    atexit(unregM);
}

int main(int argc, char **argv) {
    dim3 g = {1, 1, 1}, b = {1, 1, 1};
    printf("main=%d\n", cudaLaunchKernel((const void *)kernM, g, b, NULL, 0, NULL));
#ifdef LINKED
    (void)argc; (void)argv;
    printf("lib=%d\n", lib_launch());
#else
    if (argc < 3 || chdir(argv[2])) return 3;
    void *h = dlopen("./liblib.so", RTLD_NOW);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 4; }
    if (chdir(argc > 3 ? argv[3] : "/")) return 5;
    int (*f)(void) = (int (*)(void))dlsym(h, "lib_launch");
    printf("lib=%d\n", f ? f() : -1);
#endif
    return 0;
}
