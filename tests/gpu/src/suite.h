// Tests of the suite executable, one group per translation unit. Each TU's first CUDA use
// goes through a different entry point, because that is when fatpack loads its module:
//   a.cu  cudaMemcpyToSymbol           b.cu  cudaLaunchKernel
//   c.cu  <<<>>> from 32 threads       g.cu  <<<>>> inside stream capture
//   h.cu  cudaGraphAddKernelNode       k.cu  cudaLaunchKernelEx
//   m.cu  cudaFuncSetAttribute         o.cu  cudaOccupancyMaxPotentialBlockSize
//   f1.cu/f2.cu  -rdc=true + device link (cross-TU __device__ function and variable)
// plus libsuite_lib.so (d.cu, linked) and libdyn.so (e.cu, dlopen'ed late).
#pragma once

bool test_a_symbols();
bool test_a_saxpy_float();
bool test_a_saxpy_double();
bool test_a_func_attributes();
bool test_a_dynamic_smem();
bool test_a_occupancy();

bool test_b_launch_kernel();
bool test_b_launch_kernel_ex();
bool test_b_graph_capture();
bool test_b_graph_manual();

bool test_c_threads_first_launch();

bool test_g_capture_first_use();
bool test_h_graph_node_first_use();
bool test_k_launch_ex_first_use();
bool test_m_func_set_attribute_first_use();
bool test_o_occupancy_first_use();

bool test_rdc();                     // f1.cu
bool f2_read_calls(int* calls);      // f2.cu: host code of the TU that defines the variable
bool f2_reset_calls();

// libsuite_lib.so (d.cu)
extern "C" int suite_lib_symbols_and_kernel(void);
extern "C" int suite_lib_template(void);
