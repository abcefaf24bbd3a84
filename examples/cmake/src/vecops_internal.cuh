#pragma once
#include <cuda_runtime.h>
// Device address of vecops_scale (scale.cu), for kernels compiled in other files.
float* vecops_scale_address();
