// The fatpack GPU suite: runs every test group, prints PASS/FAIL per test and a summary,
// exits non-zero if anything failed.
//   suite [--continue]   --continue: run every test even when no device is usable
//                        (each then fails with the CUDA error; checks graceful failure).
#include "common.h"
#include "suite.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

static int g_passed = 0, g_failed = 0;

static void record(const char* name, bool ok) {
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", name);
    std::fflush(stdout);
    (ok ? g_passed : g_failed)++;
}

static void run(const char* name, bool (*fn)()) {
    bool ok = fn();
    // A test must not leave an error behind for the next one.
    cudaError_t e = cudaGetLastError();
    if (ok && e != cudaSuccess) {
        std::printf("    error left behind: %s\n", cudaGetErrorName(e));
        ok = false;
    }
    record(name, ok);
}

static std::string exe_dir() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    buf[n] = 0;
    std::string p(buf);
    size_t slash = p.rfind('/');
    return slash == std::string::npos ? "." : p.substr(0, slash);
}

static bool device_info() {
    int runtime = 0, driver = 0, count = 0;
    CK(cudaRuntimeGetVersion(&runtime));
    cudaError_t de = cudaDriverGetVersion(&driver);
    std::printf("cuda runtime %d, driver %d%s\n", runtime, driver, de == cudaSuccess ? "" : " (query failed)");
    CK(cudaGetDeviceCount(&count));
    EXPECT(count >= 1, "no CUDA device");
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    std::printf("device 0: %s, compute capability %d.%d, %d SMs, %.1f GiB (%d device%s visible)\n", p.name, p.major,
                p.minor, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, count, count == 1 ? "" : "s");
    std::fflush(stdout);
    CK(cudaSetDevice(0));
    return true;
}

static void* g_dyn = nullptr;

static bool test_dlopen_dyn() {
    // Next to the executable; else by name, i.e. through the executable's RUNPATH.
    std::string path = exe_dir() + "/libdyn.so";
    if (access(path.c_str(), R_OK) != 0) path = "libdyn.so";
    g_dyn = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT(g_dyn != nullptr, "dlopen(%s): %s", path.c_str(), dlerror());
    using Fn = int (*)(void);
    Fn fn = (Fn)dlsym(g_dyn, "dyn_run");
    EXPECT(fn != nullptr, "dlsym(dyn_run): %s", dlerror());
    return fn() == 1;
}

static bool test_dlclose_dyn() {
    EXPECT(g_dyn != nullptr, "libdyn.so was not opened");
    int rc = dlclose(g_dyn);
    g_dyn = nullptr;
    EXPECT(rc == 0, "dlclose: %s", dlerror());
    // The main program's modules still work after the library's module is gone.
    return test_a_saxpy_float() && test_b_launch_kernel();
}

static bool test_lib_symbols_and_kernel() { return suite_lib_symbols_and_kernel() == 1; }
static bool test_lib_template() { return suite_lib_template() == 1; }

static bool test_final_sync() {
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    INFO("device memory used at the end: %.1f MiB", (total_b - free_b) / 1048576.0);
    return true;
}

int main(int argc, char** argv) {
    auto t0 = std::chrono::steady_clock::now();
    bool keep_going = false;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--continue") keep_going = true;
    }
    bool have_device = device_info();
    record("device", have_device);
    if (have_device || keep_going) {
        run("a_symbols (first use: cudaMemcpyToSymbol)", test_a_symbols);
        run("a_saxpy<float>", test_a_saxpy_float);
        run("a_saxpy<double>", test_a_saxpy_double);
        run("a_func_attributes", test_a_func_attributes);
        run("a_dynamic_smem (opt-in > 48 KiB)", test_a_dynamic_smem);
        run("a_occupancy", test_a_occupancy);
        run("b_launch_kernel (first use: cudaLaunchKernel)", test_b_launch_kernel);
        run("b_launch_kernel_ex", test_b_launch_kernel_ex);
        run("b_graph_capture (capture + replay)", test_b_graph_capture);
        run("b_graph_manual (cudaGraphAddKernelNode + exec update)", test_b_graph_manual);
        run("g_capture_first_use (first use inside stream capture)", test_g_capture_first_use);
        run("h_graph_node_first_use (first use: cudaGraphAddKernelNode)", test_h_graph_node_first_use);
        run("k_launch_ex_first_use (first use: cudaLaunchKernelEx)", test_k_launch_ex_first_use);
        run("m_func_set_attribute_first_use (first use: cudaFuncSetAttribute)", test_m_func_set_attribute_first_use);
        run("o_occupancy_first_use (first use: cudaOccupancyMaxPotentialBlockSize)", test_o_occupancy_first_use);
        run("c_threads_first_launch (32 threads, simultaneous first launch)", test_c_threads_first_launch);
        run("lib_symbols_and_kernel (libsuite_lib.so)", test_lib_symbols_and_kernel);
        run("lib_template (libsuite_lib.so)", test_lib_template);
        run("rdc (f1 kernel calls f2 __device__ function, -rdc + dlink)", test_rdc);
        run("dlopen_dyn (libdyn.so opened after CUDA init)", test_dlopen_dyn);
        run("dlclose_dyn (then main program kernels again)", test_dlclose_dyn);
        run("final_sync", test_final_sync);
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("suite: %d passed, %d failed (%.0f ms)\n", g_passed, g_failed, ms);
    std::fflush(stdout);
    return g_failed == 0 ? 0 : 1;
}
