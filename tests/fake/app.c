/* An "nvcc-like" host program for the runtime's tests. Its static constructors register
 * fatbins exactly as nvcc 13's host stubs do (wrapper in .nvFatBinSegment whose data points
 * into .nv_fatbin, which fatpack has replaced by a stub), and main() makes the calls a CUDA
 * program makes. stubs.h (written by the test) holds the stub bytes:
 *   STUB_A, STUB_B   two ordinary modules ("app#A", "app#B")
 *   STUB_D, STUB_R   a device-linked (-rdc) module and its prelinked relocatable input
 * Usage: app MODE   (see main). Prints one "name=result" line per call. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
extern void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName,
                              int ext, size_t size, int constant, int global);
extern void __cudaRegisterManagedVar(void **h, void **hostVarPtrAddress, char *deviceAddress,
                                     const char *deviceName, int ext, size_t size, int constant,
                                     int global);
extern int cudaFree(void *p);
extern int cudaMalloc(void **p, size_t n);
extern int cudaGetLastError(void);
extern char __cudaInitModule(void **h);
extern int __cudaGetKernel(void **kernel, const void *fun);
extern int cudaLaunchKernel(const void *func, dim3 g, dim3 b, void **args, size_t shared,
                            void *stream);
extern int cudaLaunchKernelExC(const void *config, const void *func, void **args);
extern int cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                              int kind);
extern int cudaFuncGetAttributes(void *attr, const void *func);
extern int cudaGraphAddKernelNode(void **node, void *graph, const void *deps, size_t n,
                                  const void *params);
extern int cudaGraphAddNode(void **node, void *graph, const void *deps, const void *data,
                            size_t n, void *params);

#define MAGIC 0x466243b1

/* ---- module A: a kernel, a variable, a managed variable ---- */
__attribute__((section(".nv_fatbin"), aligned(8))) static const unsigned char stubA[] = STUB_A;
static const __fatBinC_Wrapper_t wrapA __attribute__((aligned(8), section(".nvFatBinSegment"))) =
    {MAGIC, 1, (const unsigned long long *)stubA, 0};
static void **hA;
void kernA(void) {}
int varA;
static int *mvarA;
static void unregA(void) { __cudaUnregisterFatBinary(hA); }
__attribute__((constructor)) static void regA(void) {
    hA = __cudaRegisterFatBinary((void *)&wrapA);
    __cudaRegisterFunction(hA, (const char *)kernA, (char *)"kernA", "kernA", -1, 0, 0, 0, 0, 0);
    __cudaRegisterVar(hA, (char *)&varA, (char *)"varA", "varA", 0, sizeof varA, 0, 0);
    __cudaRegisterManagedVar(hA, (void **)&mvarA, (char *)"mvarA", "mvarA", 0, sizeof(int), 0, 0);
    __cudaRegisterFatBinaryEnd(hA);
    atexit(unregA);
}

/* ---- module B: one kernel ---- */
__attribute__((section(".nv_fatbin"), aligned(8))) static const unsigned char stubB[] = STUB_B;
static const __fatBinC_Wrapper_t wrapB __attribute__((aligned(8), section(".nvFatBinSegment"))) =
    {MAGIC, 1, (const unsigned long long *)stubB, 0};
static void **hB;
void kernB(void) {}
static void unregB(void) { __cudaUnregisterFatBinary(hB); }
__attribute__((constructor)) static void regB(void) {
    hB = __cudaRegisterFatBinary((void *)&wrapB);
    __cudaRegisterFunction(hB, (const char *)kernB, (char *)"kernB", "kernB", -1, 0, 0, 0, 0, 0);
    __cudaRegisterFatBinaryEnd(hB);
    atexit(unregB);
}

/* ---- module D: device link (-rdc), as crt/link.stub registers it ---- */
__attribute__((section("__nv_relfatbin"), aligned(8))) static const unsigned char stubR[] = STUB_R;
__attribute__((section(".nv_fatbin"), aligned(8))) static const unsigned char stubD[] = STUB_D;
static void *prelinked[2];
static const __fatBinC_Wrapper_t wrapD __attribute__((aligned(8), section(".nvFatBinSegment"))) =
    {MAGIC, 2, (const unsigned long long *)stubD, prelinked};
static void **hD;
void kernD(void) {}
static void unregD(void) { __cudaUnregisterFatBinary(hD); }
__attribute__((constructor)) static void regD(void) {
    prelinked[0] = (void *)stubR;
    prelinked[1] = 0;
    hD = __cudaRegisterFatBinary((void *)&wrapD);
    __cudaRegisterFunction(hD, (const char *)kernD, (char *)"kernD", "kernD", -1, 0, 0, 0, 0, 0);
    __cudaRegisterFatBinaryEnd(hD);
    atexit(unregD);
}

static void launch(const char *tag, void (*k)(void)) {
    dim3 g = {2, 3, 4}, b = {5, 6, 7};
    int r = cudaLaunchKernel((const void *)k, g, b, NULL, 128, (void *)0x1234);
    printf("%s=%d\n", tag, r);
}

static pthread_barrier_t barrier;
static int results[32];
static void *racer(void *arg) {
    int i = (int)(long)arg;
    pthread_barrier_wait(&barrier);
    dim3 g = {1, 1, 1}, b = {1, 1, 1};
    results[i] = cudaLaunchKernel((const void *)kernA, g, b, NULL, 0, NULL);
    return NULL;
}

/* Forks a child that launches kernA and kernB (printing child_A=, child_B=) and exits;
 * returns its pid to the parent. */
static pid_t fork_child_launching_both(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        launch("child_A", kernA);
        launch("child_B", kernB);
        fflush(stdout);
        _exit(0);
    }
    return pid;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "host";
    if (!strcmp(mode, "host")) {
        printf("host ok\n");
    } else if (!strcmp(mode, "launchA")) {
        launch("launchA", kernA);
        launch("launchA2", kernA);
    } else if (!strcmp(mode, "launchB")) {
        launch("launchB", kernB);
    } else if (!strcmp(mode, "launchD")) {
        launch("launchD", kernD);
    } else if (!strcmp(mode, "getkernel")) {
        void *k = 0;
        printf("getkernel=%d\n", __cudaGetKernel(&k, (const void *)kernA));
    } else if (!strcmp(mode, "apis")) {
        /* Each of these must load its module first. */
        int x = 1;
        char attr[256];
        printf("memcpytosymbol=%d\n", cudaMemcpyToSymbol(&varA, &x, sizeof x, 0, 1));
        printf("funcgetattributes=%d\n", cudaFuncGetAttributes(attr, (const void *)kernB));
    } else if (!strcmp(mode, "exc")) {
        char cfg[64] = {0};
        printf("launchex=%d\n", cudaLaunchKernelExC(cfg, (const void *)kernA, NULL));
    } else if (!strcmp(mode, "graph")) {
        struct { void *func; dim3 g, b; unsigned shared; void **params, **extra; } kp = {
            (void *)kernA, {1, 1, 1}, {1, 1, 1}, 0, 0, 0};
        void *node = 0;
        printf("graphaddkernelnode=%d\n", cudaGraphAddKernelNode(&node, 0, 0, 0, &kp));
        long long np[32];
        memset(np, 0, sizeof np);
        np[2] = (long long)(size_t)(void *)kernB; /* type 0 (kernel) at 0, kernel.func at 16 */
        printf("graphaddnode=%d\n", cudaGraphAddNode(&node, 0, 0, 0, 0, np));
    } else if (!strcmp(mode, "managed")) {
        /* What nvcc's __nv_init_managed_rt does on host access to a __managed__ variable. */
        char ok = __cudaInitModule(hA);
        printf("initmodule=%d managed=%s\n", ok, mvarA ? "set" : "null");
    } else if (!strcmp(mode, "initmanaged")) {
        /* The same after the program created the context (any CUDA call first). */
        cudaFree(0);
        char ok = __cudaInitModule(hA);
        printf("initmodule=%d managed=%s\n", ok, mvarA ? "set" : "null");
    } else if (!strcmp(mode, "fork")) {
        /* Fork after a module is loaded: the child uses the loaded module and loads another
         * (no lock may be left held, no state half-made); so does the parent afterwards. */
        launch("parent_before", kernA);
        pid_t pid = fork_child_launching_both();
        int st = 0;
        waitpid(pid, &st, 0);
        printf("child_exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        launch("parent_B", kernB);
    } else if (!strcmp(mode, "ahead")) {
        /* What a program does before its first kernel: allocate (the driver is initialised
         * now), set up for a while, then launch. */
        void *p = 0;
        printf("malloc=%d\n", cudaMalloc(&p, 64));
        usleep(300000);
        launch("A", kernA);
        launch("B", kernB);
    } else if (!strcmp(mode, "aheadnow")) {
        /* The first kernel right after the first call (the launch benchmark's shape): the
         * decoding ahead must have been done while that call initialised the driver. */
        void *p = 0;
        int r = cudaMalloc(&p, 64);
        fprintf(stderr, "app: the first call returned\n");
        printf("malloc=%d\n", r);
        launch("A", kernA);
        launch("B", kernB);
    } else if (!strcmp(mode, "aheadfork")) {
        /* Fork at once after the call that starts decoding ahead: the child must neither
         * wait for the parent's helper nor find anything half-held. */
        void *p = 0;
        printf("malloc=%d\n", cudaMalloc(&p, 64));
        pid_t pid = fork_child_launching_both();
        launch("parent_A", kernA);
        int st = 0;
        waitpid(pid, &st, 0);
        printf("child_exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        launch("parent_B", kernB);
    } else if (!strcmp(mode, "unlinkA")) {
        /* The binary (and its side file) deleted before the first kernel. */
        char side[4096];
        snprintf(side, sizeof side, "%s.fatpack", argv[0]);
        unlink(argv[0]);
        unlink(side);
        launch("launchA", kernA);
    } else if (!strcmp(mode, "replaceA")) {
        /* A package upgrade: new files renamed over the binary and its side file before the
         * first kernel. */
        char side[4096], tmp[4096];
        snprintf(side, sizeof side, "%s.fatpack", argv[0]);
        snprintf(tmp, sizeof tmp, "%s.new", argv[0]);
        const char *paths[2] = {argv[0], side};
        for (int i = 0; i < 2; i++) {
            FILE *f = fopen(tmp, "w");
            if (!f) return 6;
            fputs("a newer version\n", f);
            fclose(f);
            if (rename(tmp, paths[i])) return 7;
        }
        launch("launchA", kernA);
    } else if (!strcmp(mode, "tamper")) {
        /* Load A, then rewrite one byte of the store file in place (TAMPER_FILE at
         * TAMPER_AT), then load B. */
        launch("launchA", kernA);
        int fd = open(getenv("TAMPER_FILE"), O_RDWR);
        if (fd < 0) return 8;
        off_t at = (off_t)atoll(getenv("TAMPER_AT"));
        unsigned char c;
        if (pread(fd, &c, 1, at) != 1) return 9;
        c ^= 0x55;
        if (pwrite(fd, &c, 1, at) != 1) return 10;
        close(fd);
        launch("launchB", kernB);
    } else if (!strcmp(mode, "seq")) {
        /* The kernels the arguments name (A, B or D), in that order: modules loaded in any
         * order, several per process. */
        for (int i = 2; i < argc; i++)
            launch(argv[i], argv[i][0] == 'A' ? kernA : argv[i][0] == 'B' ? kernB : kernD);
        /* An error fatpack's runtime met on its own way (a driver that refused a module's
         * compressed entries) is not the program's to read. */
        printf("lasterror=%d\n", cudaGetLastError());
    } else if (!strcmp(mode, "race")) {
        pthread_t t[32];
        pthread_barrier_init(&barrier, NULL, 32);
        for (long i = 0; i < 32; i++) pthread_create(&t[i], NULL, racer, (void *)i);
        for (int i = 0; i < 32; i++) pthread_join(t[i], NULL);
        int ok = 0;
        for (int i = 0; i < 32; i++) ok += results[i] == 0;
        printf("race ok=%d\n", ok);
    } else {
        printf("unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
