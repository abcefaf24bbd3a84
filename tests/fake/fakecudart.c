/* A fake cudart for the runtime's tests (no GPU): it records what the fatpack runtime hands
 * to "cudart" and answers lookups the way cudart does (unknown host pointer => error).
 *
 *   FAKE_CUDART_LOG=path    append one line per call (default: stdout)
 *   FAKE_CUDART_DUMP=dir    write each registered container to dir/reg-<id>.bin
 *                           (and prelinked ones to dir/reg-<id>-pre-<k>.bin)
 *   FAKE_CUDART_ZSTD=1      "the driver decodes" nvcc's zstd-compressed entries; without it a
 *                           lookup or launch of a function whose container holds one fails
 *                           with cudaErrorInvalidKernelImage (200), as a driver before 550
 *                           would, and cudaGetLastError reports it until read
 *   FAKE_CUDART_CONTEXT_MS=N the first call that needs the driver takes N ms more (a real
 *                           driver's initialisation and context: 100 ms and more)
 *
 * Lines containing "BAD" mean the runtime passed something cudart would choke on. */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { unsigned x, y, z; } dim3;
typedef struct {
    int magic;
    int version;
    const unsigned long long *data;
    void *filename_or_fatbins;
} wrapper_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

#define MAXN 1024
static struct { const void *host; const char *name; int handle; } funcs[MAXN];
static int nfuncs;
static struct { const void *host; const char *name; int handle; } vars[MAXN];
static int nvars;
static int *handles[MAXN];
static int nhandles;
/* Handles whose container holds a zstd-compressed entry (flag 0x8000). */
static int compressed[MAXN + 1];
/* cudart's per-thread last error. */
static __thread int last_error;

static void logline(const char *fmt, ...) {
    static FILE *f;
    if (!f) {
        const char *p = getenv("FAKE_CUDART_LOG");
        f = p ? fopen(p, "a") : stdout;
        if (!f) f = stdout;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}

static int handle_id(void **h) {
    for (int i = 0; i < nhandles; i++)
        if ((void *)handles[i] == (void *)h) return *handles[i];
    return -1;
}

static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void dump(const unsigned char *d, const char *tag, int id, int k) {
    if (rd32(d) != 0xBA55ED50u) {
        logline("BAD %s %d: not a fatbin container (magic %08x)", tag, id, rd32(d));
        return;
    }
    unsigned hsize = d[6] | (d[7] << 8);
    uint64_t body = rd64(d + 8);
    const char *dir = getenv("FAKE_CUDART_DUMP");
    if (dir) {
        char path[4096];
        if (k < 0) snprintf(path, sizeof path, "%s/reg-%d.bin", dir, id);
        else snprintf(path, sizeof path, "%s/reg-%d-pre-%d.bin", dir, id, k);
        FILE *f = fopen(path, "wb");
        if (f) { fwrite(d, 1, hsize + body, f); fclose(f); }
    }
    uint64_t at = hsize;
    int n = 0;
    while (at < hsize + body) {
        const unsigned char *e = d + at;
        unsigned kind = e[0] | (e[1] << 8);
        uint32_t eh = rd32(e + 4);
        uint64_t psize = rd64(e + 8);
        uint32_t csize = rd32(e + 16);
        uint32_t arch = rd32(e + 28);
        uint64_t flags = rd64(e + 40);
        uint64_t usize = rd64(e + 56);
        const unsigned char *p = e + eh;
        int plen = 0;
        while (plen < 48 && plen < (int)psize && p[plen] >= 32 && p[plen] < 127) plen++;
        logline("%s %d entry kind=%u arch=%u flags=0x%llx hsize=%u psize=%llu csize=%u usize=%llu "
                "payload=%.*s",
                tag, id, kind, arch, (unsigned long long)flags, eh, (unsigned long long)psize, csize,
                (unsigned long long)usize, plen, p);
        if (eh < 64 || psize % 8 != 0) logline("BAD %s %d: malformed entry", tag, id);
        if ((flags & 0x8000) && id > 0 && id <= MAXN) compressed[id] = 1;
        if ((flags & 0x8000) && (csize == 0 || csize > psize || usize == 0))
            logline("BAD %s %d: compressed entry sizes", tag, id);
        at += eh + psize;
        n++;
    }
    logline("%s %d entries=%d", tag, id, n);
}

void **__cudaRegisterFatBinary(void *fc) {
    wrapper_t *w = fc;
    pthread_mutex_lock(&mu);
    int *h = malloc(sizeof *h);
    *h = nhandles + 1;
    handles[nhandles++] = h;
    if (w->magic != 0x466243b1) logline("BAD register %d: wrapper magic %08x", *h, w->magic);
    logline("register %d version=%d", *h, w->version);
    dump((const unsigned char *)w->data, "register", *h, -1);
    if (w->version == 2 && w->filename_or_fatbins) {
        void **pre = w->filename_or_fatbins;
        for (int k = 0; pre[k]; k++) dump(pre[k], "prelinked", *h, k);
    }
    pthread_mutex_unlock(&mu);
    return (void **)h;
}

void __cudaRegisterFatBinaryEnd(void **h) {
    pthread_mutex_lock(&mu);
    int id = handle_id(h);
    logline(id < 0 ? "BAD end: unknown handle" : "end %d", id);
    pthread_mutex_unlock(&mu);
}

void __cudaUnregisterFatBinary(void **h) {
    pthread_mutex_lock(&mu);
    int id = handle_id(h);
    logline(id < 0 ? "BAD unregister: unknown handle" : "unregister %d", id);
    /* cudart forgets the module's functions and variables: a later lookup is an error. */
    for (int i = 0; i < nfuncs; i++)
        if (funcs[i].handle == id) funcs[i].host = NULL;
    for (int i = 0; i < nvars; i++)
        if (vars[i].handle == id) vars[i].host = NULL;
    pthread_mutex_unlock(&mu);
}

void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, void *tid, void *bid, void *bDim, void *gDim,
                            int *wSize) {
    (void)deviceFun; (void)tid; (void)bid; (void)bDim; (void)gDim; (void)wSize;
    pthread_mutex_lock(&mu);
    int id = handle_id(h);
    if (id < 0) logline("BAD function %s: unknown handle", deviceName);
    else if (nfuncs < MAXN) {
        funcs[nfuncs].host = hostFun;
        funcs[nfuncs].name = deviceName;
        funcs[nfuncs].handle = id;
        nfuncs++;
        logline("function %d %s limit=%d", id, deviceName, thread_limit);
    }
    pthread_mutex_unlock(&mu);
}

static void add_var(void **h, const void *host, const char *name, const char *what, size_t size,
                    int constant) {
    pthread_mutex_lock(&mu);
    int id = handle_id(h);
    if (id < 0) logline("BAD %s %s: unknown handle", what, name);
    else if (nvars < MAXN) {
        vars[nvars].host = host;
        vars[nvars].name = name;
        vars[nvars].handle = id;
        nvars++;
        logline("%s %d %s size=%zu constant=%d", what, id, name, size, constant);
    }
    pthread_mutex_unlock(&mu);
}

void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName,
                       int ext, size_t size, int constant, int global) {
    (void)deviceAddress; (void)ext; (void)global;
    add_var(h, hostVar, deviceName, "var", size, constant);
}

/* FAKE_CUDART_STATIC=1 behaves as static cudart 13.0 does on the H200 (docs/RUNTIME.md):
 * a __managed__ host pointer is filled when the module is loaded into the context, i.e.
 * when the context is created (cudaFree(0), or __cudaInitModule creating it) for modules
 * registered by then, or when a kernel or variable of a module registered later is looked
 * up; __cudaInitModule on such a late module leaves it NULL. Otherwise (shared cudart) the
 * pointer is filled at registration. */
static struct { void **ptr; size_t size; int handle; } managed[MAXN];
static int nmanaged, context;
static int static_mode(void) { const char *s = getenv("FAKE_CUDART_STATIC"); return s && *s == '1'; }
static void fill_managed(int handle) { /* -1: every module; call with mu held */
    for (int i = 0; i < nmanaged; i++)
        if ((handle < 0 || managed[i].handle == handle) && !*managed[i].ptr)
            *managed[i].ptr = calloc(1, managed[i].size ? managed[i].size : 1);
}
static void create_context(void) { /* call with mu held */
    if (!context) {
        const char *ms = getenv("FAKE_CUDART_CONTEXT_MS");
        if (ms) usleep(1000 * (useconds_t)atoi(ms));
        context = 1; fill_managed(-1); logline("context");
    }
}
int cudaFree(void *p) {
    (void)p;
    pthread_mutex_lock(&mu);
    create_context();
    pthread_mutex_unlock(&mu);
    return 0;
}

/* Calls that initialise the driver (the runtime starts decoding ahead after the first). */
static int touch(const char *api) {
    pthread_mutex_lock(&mu);
    create_context();
    pthread_mutex_unlock(&mu);
    logline("%s", api);
    return 0;
}
static int alloc_into(const char *api, void **p, size_t n) {
    *p = malloc(n ? n : 1);
    return touch(api);
}
int cudaGetDeviceCount(int *n) { *n = 1; return touch("getdevicecount"); }
int cudaSetDevice(int d) { (void)d; return touch("setdevice"); }
int cudaInitDevice(int d, unsigned df, unsigned f) { (void)d; (void)df; (void)f; return touch("initdevice"); }
int cudaMalloc(void **p, size_t n) { return alloc_into("malloc", p, n); }
int cudaMallocHost(void **p, size_t n) { return alloc_into("mallochost", p, n); }
int cudaHostAlloc(void **p, size_t n, unsigned f) { (void)f; return alloc_into("hostalloc", p, n); }
int cudaMallocManaged(void **p, size_t n, unsigned f) { (void)f; return alloc_into("mallocmanaged", p, n); }
int cudaMallocAsync(void **p, size_t n, void *s) { (void)s; return alloc_into("mallocasync", p, n); }
int cudaMallocAsync_ptsz(void **p, size_t n, void *s) { return cudaMallocAsync(p, n, s); }
int cudaStreamCreate(void **s) { *s = 0; return touch("streamcreate"); }
int cudaStreamCreateWithFlags(void **s, unsigned f) { (void)f; *s = 0; return touch("streamcreate"); }
int cudaDeviceSynchronize(void) { return touch("synchronize"); }
int cudaMemcpy(void *d, const void *s, size_t n, int k) { (void)k; memmove(d, s, n); return touch("memcpy"); }
int cudaMemcpy_ptds(void *d, const void *s, size_t n, int k) { return cudaMemcpy(d, s, n, k); }
int cudaMemcpyAsync(void *d, const void *s, size_t n, int k, void *st) { (void)st; return cudaMemcpy(d, s, n, k); }
int cudaMemcpyAsync_ptsz(void *d, const void *s, size_t n, int k, void *st) { return cudaMemcpyAsync(d, s, n, k, st); }

void __cudaRegisterManagedVar(void **h, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant,
                              int global) {
    (void)deviceAddress; (void)ext; (void)global;
    if (static_mode()) {
        pthread_mutex_lock(&mu);
        if (nmanaged < MAXN) {
            managed[nmanaged].ptr = hostVarPtrAddress;
            managed[nmanaged].size = size;
            managed[nmanaged].handle = handle_id(h);
            nmanaged++;
        }
        pthread_mutex_unlock(&mu);
    } else {
        /* cudart fills the host pointer with the managed allocation. */
        *hostVarPtrAddress = calloc(1, size ? size : 1);
    }
    add_var(h, hostVarPtrAddress, deviceName, "managedvar", size, constant);
}

char __cudaInitModule(void **h) {
    pthread_mutex_lock(&mu);
    int id = handle_id(h);
    logline(id < 0 ? "BAD initmodule: unknown handle" : "initmodule %d", id);
    create_context();
    pthread_mutex_unlock(&mu);
    return id < 0 ? 0 : 1;
}

static const char *func_name(const void *f) {
    const char *r = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nfuncs; i++)
        if (funcs[i].host == f) r = funcs[i].name;
    pthread_mutex_unlock(&mu);
    return r;
}

static const char *var_name(const void *v) {
    const char *r = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nvars; i++)
        if (vars[i].host == v) r = vars[i].name;
    pthread_mutex_unlock(&mu);
    return r;
}

/* The handle of the last registration of host function f, or -1. */
static int func_handle(const void *f) {
    int h = -1;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nfuncs; i++)
        if (funcs[i].host == f) h = funcs[i].handle;
    pthread_mutex_unlock(&mu);
    return h;
}

/* What loading f's module into the context says: 200 for a compressed container when the
 * "driver" does not decode them. */
static int load_of(const char *api, const char *n, const void *f) {
    int h = func_handle(f);
    if (h > 0 && h <= MAXN && compressed[h] && !getenv("FAKE_CUDART_ZSTD")) {
        logline("%s %s refused: compressed entries", api, n);
        return last_error = 200;
    }
    return 0;
}

int cudaGetLastError(void) { int e = last_error; last_error = 0; return e; }
int cudaPeekAtLastError(void) { return last_error; }

/* cudaErrorInvalidDeviceFunction / cudaErrorInvalidSymbol, as cudart answers. */
static int by_func(const char *api, const void *f) {
    const char *n = func_name(f);
    if (!n) { logline("%s unknown-function", api); return 98; }
    if (load_of(api, n, f)) return 200;
    logline("%s %s", api, n);
    /* A lookup loads the function's module into the context. */
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nfuncs; i++)
        if (funcs[i].host == f) { create_context(); fill_managed(funcs[i].handle); }
    pthread_mutex_unlock(&mu);
    return 0;
}

static int by_symbol(const char *api, const void *s) {
    const char *n = var_name(s);
    if (!n) { logline("%s unknown-symbol", api); return 13; }
    logline("%s %s", api, n);
    return 0;
}

/* CUDA 13 <<<>>> path. */
static __thread dim3 cfg_grid, cfg_block;
static __thread size_t cfg_shared;
static __thread void *cfg_stream;

unsigned __cudaPushCallConfiguration(dim3 g, dim3 b, size_t shared, void *stream) {
    cfg_grid = g; cfg_block = b; cfg_shared = shared; cfg_stream = stream;
    return 0;
}

int __cudaPopCallConfiguration(dim3 *g, dim3 *b, size_t *shared, void *stream) {
    *g = cfg_grid; *b = cfg_block; *shared = cfg_shared; *(void **)stream = cfg_stream;
    return 0;
}

int __cudaGetKernel(void **kernel, const void *fun) {
    const char *n = func_name(fun);
    if (!n) { logline("getkernel unknown-function"); return 98; }
    if (load_of("getkernel", n, fun)) return 200;
    logline("getkernel %s", n);
    *kernel = (void *)n; /* the name doubles as the kernel handle */
    return 0;
}

int __cudaLaunchKernel(void *kernel, dim3 g, dim3 b, void **args, size_t shared, void *stream) {
    (void)args; (void)stream;
    if (!kernel) { logline("launchkernel null-handle"); return 400; }
    logline("launchkernel %s grid=%u,%u,%u block=%u,%u,%u shared=%zu", (const char *)kernel, g.x,
            g.y, g.z, b.x, b.y, b.z, shared);
    return 0;
}

int cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **args, size_t shared, void *stream) {
    (void)args;
    const char *n = func_name(f);
    if (!n) { logline("launch unknown-function"); return 98; }
    if (load_of("launch", n, f)) return 200;
    logline("launch %s grid=%u,%u,%u block=%u,%u,%u shared=%zu stream=%p", n, g.x, g.y, g.z, b.x,
            b.y, b.z, shared, stream);
    return 0;
}

int cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t s, void *st) {
    return cudaLaunchKernel(f, g, b, a, s, st);
}
int cudaLaunchCooperativeKernel(const void *f, dim3 g, dim3 b, void **a, size_t s, void *st) {
    return cudaLaunchKernel(f, g, b, a, s, st);
}
int cudaLaunchCooperativeKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t s, void *st) {
    return cudaLaunchKernel(f, g, b, a, s, st);
}
int cudaLaunchKernelExC(const void *c, const void *f, void **a) { (void)c; (void)a; return by_func("launchex", f); }
int cudaLaunchKernelExC_ptsz(const void *c, const void *f, void **a) { (void)c; (void)a; return by_func("launchex", f); }
int cudaFuncSetAttribute(const void *f, int a, int v) { (void)a; (void)v; return by_func("funcsetattribute", f); }
int cudaFuncGetAttributes(void *attr, const void *f) { (void)attr; return by_func("funcgetattributes", f); }
int cudaFuncSetCacheConfig(const void *f, int c) { (void)c; return by_func("funcsetcacheconfig", f); }
int cudaFuncSetSharedMemConfig(const void *f, int c) { (void)c; return by_func("funcsetsharedmemconfig", f); }
int cudaFuncGetName(const char **name, const void *f) { *name = func_name(f); return by_func("funcgetname", f); }
int cudaFuncGetParamInfo(const void *f, size_t i, size_t *o, size_t *s) { (void)i; (void)o; (void)s; return by_func("funcgetparaminfo", f); }
int cudaGetKernel(void **k, const void *f) { *k = (void *)func_name(f); return by_func("getkernel-public", f); }
int cudaGetFuncBySymbol(void **fp, const void *f) { *fp = (void *)func_name(f); return by_func("getfuncbysymbol", f); }
int cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *f, int b, size_t d) { (void)b; (void)d; *n = 1; return by_func("occupancy", f); }
int cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *f, int b, size_t d, unsigned fl) { (void)b; (void)d; (void)fl; *n = 1; return by_func("occupancyflags", f); }
int cudaOccupancyAvailableDynamicSMemPerBlock(size_t *s, const void *f, int n, int b) { (void)n; (void)b; *s = 0; return by_func("occupancysmem", f); }
int cudaOccupancyMaxPotentialClusterSize(int *c, const void *f, const void *cfg) { (void)cfg; *c = 1; return by_func("clustersize", f); }
int cudaOccupancyMaxActiveClusters(int *c, const void *f, const void *cfg) { (void)cfg; *c = 1; return by_func("activeclusters", f); }
int cudaMemcpyToSymbol(const void *s, const void *src, size_t n, size_t o, int k) { (void)src; (void)n; (void)o; (void)k; return by_symbol("memcpytosymbol", s); }
int cudaMemcpyToSymbol_ptds(const void *s, const void *src, size_t n, size_t o, int k) { return cudaMemcpyToSymbol(s, src, n, o, k); }
int cudaMemcpyFromSymbol(void *d, const void *s, size_t n, size_t o, int k) { (void)d; (void)n; (void)o; (void)k; return by_symbol("memcpyfromsymbol", s); }
int cudaMemcpyFromSymbol_ptds(void *d, const void *s, size_t n, size_t o, int k) { return cudaMemcpyFromSymbol(d, s, n, o, k); }
int cudaMemcpyToSymbolAsync(const void *s, const void *src, size_t n, size_t o, int k, void *st) { (void)src; (void)n; (void)o; (void)k; (void)st; return by_symbol("memcpytosymbolasync", s); }
int cudaMemcpyToSymbolAsync_ptsz(const void *s, const void *src, size_t n, size_t o, int k, void *st) { return cudaMemcpyToSymbolAsync(s, src, n, o, k, st); }
int cudaMemcpyFromSymbolAsync(void *d, const void *s, size_t n, size_t o, int k, void *st) { (void)d; (void)n; (void)o; (void)k; (void)st; return by_symbol("memcpyfromsymbolasync", s); }
int cudaMemcpyFromSymbolAsync_ptsz(void *d, const void *s, size_t n, size_t o, int k, void *st) { return cudaMemcpyFromSymbolAsync(d, s, n, o, k, st); }
int cudaGetSymbolAddress(void **p, const void *s) { *p = NULL; return by_symbol("getsymboladdress", s); }
int cudaGetSymbolSize(size_t *z, const void *s) { *z = 4; return by_symbol("getsymbolsize", s); }
int cudaGraphAddKernelNode(void **n, void *g, const void *d, size_t nd, const void *p) { (void)n; (void)g; (void)d; (void)nd; return by_func("graphaddkernelnode", *(void *const *)p); }
int cudaGraphKernelNodeSetParams(void *n, const void *p) { (void)n; return by_func("graphkernelnodesetparams", *(void *const *)p); }
int cudaGraphExecKernelNodeSetParams(void *e, void *n, const void *p) { (void)e; (void)n; return by_func("graphexeckernelnodesetparams", *(void *const *)p); }
int cudaGraphAddMemcpyNodeToSymbol(void **n, void *g, const void *d, size_t nd, const void *s, const void *src, size_t c, size_t o, int k) { (void)n; (void)g; (void)d; (void)nd; (void)src; (void)c; (void)o; (void)k; return by_symbol("graphmemcpytosymbol", s); }
int cudaGraphAddMemcpyNodeFromSymbol(void **n, void *g, const void *d, size_t nd, void *dst, const void *s, size_t c, size_t o, int k) { (void)n; (void)g; (void)d; (void)nd; (void)dst; (void)c; (void)o; (void)k; return by_symbol("graphmemcpyfromsymbol", s); }
int cudaGraphMemcpyNodeSetParamsToSymbol(void *n, const void *s, const void *src, size_t c, size_t o, int k) { (void)n; (void)src; (void)c; (void)o; (void)k; return by_symbol("graphmemcpysettosymbol", s); }
int cudaGraphMemcpyNodeSetParamsFromSymbol(void *n, void *dst, const void *s, size_t c, size_t o, int k) { (void)n; (void)dst; (void)c; (void)o; (void)k; return by_symbol("graphmemcpysetfromsymbol", s); }
int cudaGraphExecMemcpyNodeSetParamsToSymbol(void *e, void *n, const void *s, const void *src, size_t c, size_t o, int k) { (void)e; (void)n; (void)src; (void)c; (void)o; (void)k; return by_symbol("graphexecmemcpytosymbol", s); }
int cudaGraphExecMemcpyNodeSetParamsFromSymbol(void *e, void *n, void *dst, const void *s, size_t c, size_t o, int k) { (void)e; (void)n; (void)dst; (void)c; (void)o; (void)k; return by_symbol("graphexecmemcpyfromsymbol", s); }
static int node_params(const char *api, void *p) {
    if (*(int *)p != 0) { logline("%s not-kernel", api); return 0; }
    return by_func(api, *(void **)((char *)p + 16));
}
int cudaGraphAddNode(void **n, void *g, const void *d, const void *dd, size_t nd, void *p) { (void)n; (void)g; (void)d; (void)dd; (void)nd; return node_params("graphaddnode", p); }
int cudaGraphNodeSetParams(void *n, void *p) { (void)n; return node_params("graphnodesetparams", p); }
int cudaGraphExecNodeSetParams(void *e, void *n, void *p) { (void)e; (void)n; return node_params("graphexecnodesetparams", p); }
