// TU b: explicit launch APIs and CUDA graphs. The first use of this TU's module is
// cudaLaunchKernel (the C API with an argument array).
#include "common.h"
#include "suite.h"

__global__ void b_scale_add(const float* __restrict__ x, float* __restrict__ y, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}

__global__ void b_mix(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = y[i] * y[i] - x[i];
}

// Uses its dynamic shared memory so that a wrong dynamicSmemBytes shows.
__global__ void b_iota(int* __restrict__ out, int n, int base, int mul) {
    extern __shared__ int s[];
    s[threadIdx.x] = (int)threadIdx.x * 2;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = base + i * mul + s[blockDim.x - 1 - threadIdx.x];
}

static std::vector<int> iota_ref(int n, int base, int mul, int block) {
    std::vector<int> r(n);
    for (int i = 0; i < n; ++i) r[i] = base + i * mul + (block - 1 - (i % block)) * 2;
    return r;
}

bool test_b_launch_kernel() {
    const int n = 300000;
    std::vector<float> x(n), ref(n), out;
    fill_uniform(x, 0xB001);
    float a = -0.5f, b = 3.0f;
    for (int i = 0; i < n; ++i) ref[i] = a * x[i] + b;
    DBuf<float> dx, dy;
    CK(dx.alloc(n));
    CK(dy.alloc(n));
    CK(dx.upload(x));
    CK(dy.poison());
    int nn = n;
    void* args[] = {&dx.p, &dy.p, &a, &b, &nn};
    CK(cudaLaunchKernel((const void*)b_scale_add, dim3(grid_for(n, 256)), dim3(256), args, 0, 0));
    CK_LAUNCH();
    CK(cudaDeviceSynchronize());
    CK(dy.download(out));
    if (!close_all("b_scale_add (cudaLaunchKernel, default stream)", out.data(), ref.data(), n, 1e-5, 1e-5)) return false;

    // Again on a stream, through the templated overload.
    Stream s;
    CK(s.create());
    CK(dy.poison());
    a = 2.5f;
    b = -1.0f;
    for (int i = 0; i < n; ++i) ref[i] = a * x[i] + b;
    CK(cudaLaunchKernel(b_scale_add, dim3(grid_for(n, 128)), dim3(128), args, 0, s.s));
    CK_LAUNCH();
    CK(cudaStreamSynchronize(s.s));
    CK(dy.download(out));
    return close_all("b_scale_add (cudaLaunchKernel, stream)", out.data(), ref.data(), n, 1e-5, 1e-5);
}

bool test_b_launch_kernel_ex() {
    int dev = 0, major = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    cudaFuncAttributes fa;
    std::memset(&fa, 0, sizeof fa);
    CK(cudaFuncGetAttributes(&fa, b_iota));
    int lo = 0, hi = 0;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));

    const int n = 200000, block = 256;
    DBuf<int> dout;
    CK(dout.alloc(n));
    Stream s;
    CK(s.create());

    cudaLaunchAttribute attrs[2];
    std::memset(attrs, 0, sizeof attrs);
    unsigned na = 0;
    attrs[na].id = cudaLaunchAttributePriority;
    attrs[na].val.priority = hi;
    ++na;
    // Cluster launch only where both device and code are sm_90+ (a 1x1x1 cluster).
    const bool cluster = major >= 9 && fa.ptxVersion >= 90;
    if (cluster) {
        attrs[na].id = cudaLaunchAttributeClusterDimension;
        attrs[na].val.clusterDim.x = 1;
        attrs[na].val.clusterDim.y = 1;
        attrs[na].val.clusterDim.z = 1;
        ++na;
    }
    cudaLaunchConfig_t cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(grid_for(n, block));
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = block * sizeof(int);
    cfg.stream = s.s;
    cfg.attrs = attrs;
    cfg.numAttrs = na;

    CK(dout.poison());
    CK(cudaLaunchKernelEx(&cfg, b_iota, dout.p, n, 7, 3));
    CK_LAUNCH();
    CK(cudaStreamSynchronize(s.s));
    std::vector<int> out, ref = iota_ref(n, 7, 3, block);
    CK(dout.download(out));
    if (!equal_all("b_iota (cudaLaunchKernelEx)", out.data(), ref.data(), n)) return false;

    // The C form with an argument array.
    CK(dout.poison());
    int nn = n, base = -50, mul = 5;
    void* args[] = {&dout.p, &nn, &base, &mul};
    CK(cudaLaunchKernelExC(&cfg, (const void*)b_iota, args));
    CK_LAUNCH();
    CK(cudaStreamSynchronize(s.s));
    ref = iota_ref(n, base, mul, block);
    CK(dout.download(out));
    INFO("cudaLaunchKernelEx attributes: priority %d%s", hi, cluster ? " + cluster 1x1x1" : "");
    return equal_all("b_iota (cudaLaunchKernelExC)", out.data(), ref.data(), n);
}

// Two dependent launches captured from a stream, then replayed twice with new input.
bool test_b_graph_capture() {
    const int n = 150000, block = 256;
    std::vector<float> x(n), out;
    DBuf<float> dx, dy, dz;
    CK(dx.alloc(n));
    CK(dy.alloc(n));
    CK(dz.alloc(n));
    Stream s;
    CK(s.create_nonblocking());
    CK(cudaDeviceSynchronize());
    GraphGuard gg;
    CK(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeGlobal));
    b_scale_add<<<grid_for(n, block), block, 0, s.s>>>(dx.p, dy.p, 2.0f, 1.0f, n);
    cudaError_t e1 = cudaGetLastError();
    b_mix<<<grid_for(n, block), block, 0, s.s>>>(dx.p, dy.p, dz.p, n);
    cudaError_t e2 = cudaGetLastError();
    // Always end the capture, or the stream stays capturing and breaks later tests.
    CK(cudaStreamEndCapture(s.s, &gg.g));
    CK(e1);
    CK(e2);
    size_t nodes = 0;
    CK(cudaGraphGetNodes(gg.g, nullptr, &nodes));
    EXPECT(nodes == 2, "captured graph has %zu nodes", nodes);
    CK(cudaGraphInstantiate(&gg.e, gg.g, 0));
    for (int rep = 0; rep < 2; ++rep) {
        fill_uniform(x, 0xB010 + rep);
        CK(dx.upload(x));
        CK(dy.poison());
        CK(dz.poison());
        CK(cudaDeviceSynchronize());  // the legacy-stream copies before the non-blocking stream
        CK(cudaGraphLaunch(gg.e, s.s));
        CK(cudaStreamSynchronize(s.s));
        CK(dz.download(out));
        std::vector<float> ref(n);
        for (int i = 0; i < n; ++i) {
            float y = 2.0f * x[i] + 1.0f;
            ref[i] = y * y - x[i];
        }
        if (!close_all(rep ? "graph replay 2" : "graph replay 1", out.data(), ref.data(), n, 1e-5, 1e-5)) return false;
    }
    return true;
}

// A graph built node by node, then a kernel node's parameters changed in the executable graph.
bool test_b_graph_manual() {
    const int n = 100000, block = 128;
    std::vector<float> x(n), out, ref(n);
    fill_uniform(x, 0xB020);
    DBuf<float> dx, dy;
    CK(dx.alloc(n));
    CK(dy.alloc(n));
    CK(dx.upload(x));
    GraphGuard gg;
    CK(cudaGraphCreate(&gg.g, 0));
    float a = 4.0f, b = 0.5f;
    int nn = n;
    void* args[] = {&dx.p, &dy.p, &a, &b, &nn};
    cudaKernelNodeParams p;
    std::memset(&p, 0, sizeof p);
    p.func = (void*)b_scale_add;
    p.gridDim = dim3(grid_for(n, block));
    p.blockDim = dim3(block);
    p.sharedMemBytes = 0;
    p.kernelParams = args;
    p.extra = nullptr;
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, gg.g, nullptr, 0, &p));
    CK(cudaGraphInstantiate(&gg.e, gg.g, 0));
    Stream s;
    CK(s.create());
    CK(dy.poison());
    CK(cudaGraphLaunch(gg.e, s.s));
    CK(cudaStreamSynchronize(s.s));
    CK(dy.download(out));
    for (int i = 0; i < n; ++i) ref[i] = a * x[i] + b;
    if (!close_all("manual graph", out.data(), ref.data(), n, 1e-5, 1e-5)) return false;

    float a2 = -3.0f, b2 = 2.0f;
    void* args2[] = {&dx.p, &dy.p, &a2, &b2, &nn};
    p.kernelParams = args2;
    CK(cudaGraphExecKernelNodeSetParams(gg.e, node, &p));
    CK(dy.poison());
    CK(cudaGraphLaunch(gg.e, s.s));
    CK(cudaStreamSynchronize(s.s));
    CK(dy.download(out));
    for (int i = 0; i < n; ++i) ref[i] = a2 * x[i] + b2;
    return close_all("manual graph, updated params", out.data(), ref.data(), n, 1e-5, 1e-5);
}
