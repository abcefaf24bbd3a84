// TU h: the module is first needed by cudaGraphAddKernelNode (a host function pointer in
// cudaKernelNodeParams), then the graph runs.
#include "common.h"
#include "suite.h"

__global__ void h_fill(unsigned* __restrict__ out, int n, unsigned seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = (unsigned)i * 2654435761u + seed;
        v ^= v >> 16;
        out[i] = v * 0x45d9f3bu;
    }
}

bool test_h_graph_node_first_use() {
    const int n = 77777, block = 128;
    DBuf<unsigned> dout;
    CK(dout.alloc(n));
    CK(dout.poison());
    GraphGuard gg;
    CK(cudaGraphCreate(&gg.g, 0));
    unsigned seed = 0xdeadbeefu;
    int nn = n;
    void* args[] = {&dout.p, &nn, &seed};
    cudaKernelNodeParams p;
    std::memset(&p, 0, sizeof p);
    p.func = (void*)h_fill;
    p.gridDim = dim3(grid_for(n, block));
    p.blockDim = dim3(block);
    p.kernelParams = args;
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, gg.g, nullptr, 0, &p));
    CK(cudaGraphInstantiate(&gg.e, gg.g, 0));
    CK(cudaGraphLaunch(gg.e, 0));
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> out, ref(n);
    CK(dout.download(out));
    for (int i = 0; i < n; ++i) {
        unsigned v = (unsigned)i * 2654435761u + seed;
        v ^= v >> 16;
        ref[i] = v * 0x45d9f3bu;
    }
    return equal_all("h_fill (graph kernel node)", out.data(), ref.data(), n);
}
