# Sourced by bench/h200/link_routes.sh and exit_probe.sh: `parent_timer DIR FATPACK` builds
# DIR/ld, a small C program that runs FATPACK as the linker and appends its wall time as its
# parent sees it (fork to reaped, the process's exit included) to the file $FPWALL names, and
# DIR/g++, g++ with DIR as its -B folder.
parent_timer() {
    local dir=$1 fp=$2
    mkdir -p "$dir"
    cat >"$dir/timer.c" <<C
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(int c, char **v) {
    struct timespec a, b; int st = 0; (void)c;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t p = fork();
    if (p == 0) { execv("$fp", v); _exit(127); }
    waitpid(p, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    FILE *f = fopen(getenv("FPWALL"), "a");
    if (f) { fprintf(f, "%.4f\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9); fclose(f); }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
C
    gcc -O2 -o "$dir/ld" "$dir/timer.c"
    printf '#!/bin/sh\nexec g++ -B"%s" "$@"\n' "$dir" >"$dir/g++" && chmod +x "$dir/g++"
}
