#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define ZSTD_STATIC_LINKING_ONLY
#include "zstd.h"
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    char *src = malloc(n); fread(src, 1, n, f); fclose(f);
    unsigned long long raw = ZSTD_getFrameContentSize(src, n);
    char *dst = malloc(raw);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    struct timespec a, b; double best = 1e9;
    for (int i = 0; i < 15; i++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        size_t r = ZSTD_decompressDCtx(d, dst, raw, src, n);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (ZSTD_isError(r)) { printf("err\n"); return 1; }
        double t = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
        if (t < best) best = t;
    }
    printf("%s: %llu bytes in %.3f ms = %.0f MB/s\n", argv[2], raw, best, raw / best / 1e3);
}
