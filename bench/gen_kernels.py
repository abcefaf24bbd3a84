import sys
# gen_kernels.py N SEED [UNROLL=1024]: N heavily unrolled kernels (UNROLL sets their size).
n=int(sys.argv[1]); seed=int(sys.argv[2]); unroll=int(sys.argv[3]) if len(sys.argv) > 3 else 1024
print('#include <cstdint>')
for k in range(n):
    c=seed*1000+k
    print(f'''__global__ void big_{seed}_{k}(float* __restrict__ a, const float* __restrict__ b, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float x = b[i % n], y = {c}.0f;
  #pragma unroll
  for (int j = 0; j < {unroll}; ++j) {{ x = fmaf(x, {1.0+c*1e-4+0.5}f, y); y = y * {0.999-(k%7)*1e-3}f + __sinf(x + j * {k+1}); if ((j & 127) == {k%128}) a[(i + j) % n] = x; }}
  a[i % n] = x + y;
}}''')
