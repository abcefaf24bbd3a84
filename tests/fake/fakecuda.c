/* A fake libcuda.so.1 for the runtime's tests: just the four calls the runtime makes.
 *
 *   FAKE_CUDA_DEVICES=90,86   one device per number (major*10+minor), in ordinal order
 *   FAKE_CUDA_INIT_FAIL=1     cuInit fails (CUDA_ERROR_NO_DEVICE)
 *   FAKE_CUDA_LOG=path        append one line per call */
#include <stdio.h>
#include <stdlib.h>

static void note(const char *what) {
    const char *p = getenv("FAKE_CUDA_LOG");
    if (!p) return;
    FILE *f = fopen(p, "a");
    if (!f) return;
    fprintf(f, "%s\n", what);
    fclose(f);
}

static int caps[64];
static int ncaps = -1;

static void parse(void) {
    if (ncaps >= 0) return;
    ncaps = 0;
    const char *s = getenv("FAKE_CUDA_DEVICES");
    while (s && *s && ncaps < 64) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s) break;
        caps[ncaps++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
}

int cuInit(unsigned flags) {
    (void)flags;
    note("cuInit");
    return getenv("FAKE_CUDA_INIT_FAIL") ? 100 : 0;
}

int cuDeviceGetCount(int *n) {
    note("cuDeviceGetCount");
    parse();
    *n = ncaps;
    return 0;
}

int cuDeviceGet(int *dev, int ordinal) {
    parse();
    if (ordinal < 0 || ordinal >= ncaps) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}

int cuDeviceGetAttribute(int *v, int attr, int dev) {
    parse();
    if (dev < 0 || dev >= ncaps) return 101;
    if (attr == 75) *v = caps[dev] / 10;
    else if (attr == 76) *v = caps[dev] % 10;
    else return 1; /* CUDA_ERROR_INVALID_VALUE */
    return 0;
}
