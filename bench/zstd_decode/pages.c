/* Decoding one zstd frame into fresh memory, as the runtime does for a module's first load
 * (a solid group's prefix, a module's container): best of 9, fresh anonymous pages each time
 * (4 KiB pages, or with argument HUGE=1 on a 2 MiB boundary with MADV_HUGEPAGE, as the
 * runtime's allocator gives blocks of 2 MiB and more); then into memory already touched, and
 * the page faults plus a memset alone. Built by pages.sh.
 *   pages FRAME.zst LABEL HUGE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#define ZSTD_STATIC_LINKING_ONLY
#include "zstd.h"
static double now(){struct timespec a; clock_gettime(CLOCK_MONOTONIC,&a); return a.tv_sec*1e3+a.tv_nsec/1e6;}
static int huge;
static char *base; static size_t len;
static char *get(size_t raw){ size_t al = huge ? 2<<20 : 4096; len = raw + al; base = mmap(0, len, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0); char *q = (char*)(((size_t)base + al - 1) & ~(al-1)); if (huge) madvise(q, raw, MADV_HUGEPAGE); return q; }
static void put(void){ munmap(base, len); }
int main(int argc, char **argv) {
    huge = atoi(argv[3]);
    FILE *f = fopen(argv[1], "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    char *src = malloc(n); fread(src, 1, n, f); fclose(f);
    unsigned long long raw = ZSTD_getFrameContentSize(src, n);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    double bf = 1e9, bw = 1e9, bm = 1e9;
    for (int i = 0; i < 9; i++) {
        double a = now(); char *dst = get(raw);
        size_t r = ZSTD_decompressDCtx(d, dst, raw, src, n);
        double b = now(); if (ZSTD_isError(r)) { printf("err\n"); return 1; }
        r = ZSTD_decompressDCtx(d, dst, raw, src, n);
        double c = now(); put();
        double e = now(); dst = get(raw); memset(dst, 1, raw); double g = now(); put();
        if (b - a < bf) bf = b - a; if (c - b < bw) bw = c - b; if (g - e < bm) bm = g - e;
    }
    printf("%s huge=%d: %llu bytes fresh buffer %.2f ms, warm %.2f ms, fault+memset alone %.2f ms\n", argv[2], huge, raw, bf, bw, bm);
}
