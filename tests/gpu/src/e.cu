// libdyn.so: opened with dlopen by the suite after CUDA is initialised and kernels of the
// main program have run. Its module is first needed by its own kernel launch.
#include "common.h"

__device__ unsigned dyn_seed;

__global__ void dyn_hash(unsigned* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = (unsigned)i ^ dyn_seed;
        v = (v ^ 61u) ^ (v >> 16);
        v *= 9u;
        v ^= v >> 4;
        v *= 0x27d4eb2du;
        out[i] = v ^ (v >> 15);
    }
}

static unsigned hash_ref(int i, unsigned seed) {
    unsigned v = (unsigned)i ^ seed;
    v = (v ^ 61u) ^ (v >> 16);
    v *= 9u;
    v ^= v >> 4;
    v *= 0x27d4eb2du;
    return v ^ (v >> 15);
}

static bool run() {
    const int n = 1 << 17;
    DBuf<unsigned> dout;
    CK(dout.alloc(n));
    CK(dout.poison());
    const unsigned seed = 0x5eed1234u;
    // Launch first, set the variable after: the launch loads the module.
    dyn_hash<<<grid_for(n, 256), 256>>>(dout.p, n);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> out, ref(n);
    CK(dout.download(out));
    for (int i = 0; i < n; ++i) ref[i] = hash_ref(i, 0u);
    if (!equal_all("dyn_hash (seed 0)", out.data(), ref.data(), n)) return false;
    CK(cudaMemcpyToSymbol(dyn_seed, &seed, sizeof seed));
    CK(dout.poison());
    dyn_hash<<<grid_for(n, 256), 256>>>(dout.p, n);
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    CK(dout.download(out));
    for (int i = 0; i < n; ++i) ref[i] = hash_ref(i, seed);
    return equal_all("dyn_hash", out.data(), ref.data(), n);
}

extern "C" int dyn_run(void) { return run() ? 1 : 0; }
