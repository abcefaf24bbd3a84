/* A program with no device code, for bench/small_links.sh: what a test suite or a tool
   built beside a CUDA library mostly is. */
#include <stdio.h>

int main(void) {
  puts("hello");
  return 0;
}
