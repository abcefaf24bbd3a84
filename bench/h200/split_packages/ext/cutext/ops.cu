// Deterministic kernels over float, double and half: every result depends only on the
// inputs (fixed reduction order, no atomics), so two installs can be compared bit for bit.
#include <torch/extension.h>
#include <cuda_fp16.h>

template <typename T> __device__ float to_f(T v) { return static_cast<float>(v); }
template <> __device__ float to_f<__half>(__half v) { return __half2float(v); }
template <typename T> __device__ T from_f(float v) { return static_cast<T>(v); }
template <> __device__ __half from_f<__half>(float v) { return __float2half(v); }

template <typename T>
__global__ void saxpy_k(int n, float a, const T* x, const T* y, T* out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = from_f<T>(a * to_f(x[i]) + to_f(y[i]));
}

// One sum per block of 256, tree order fixed.
template <typename T>
__global__ void blocksum_k(int n, const T* x, float* out) {
  __shared__ float s[256];
  int i = blockIdx.x * 256 + threadIdx.x;
  s[threadIdx.x] = i < n ? to_f(x[i]) : 0.f;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

template <typename T>
__global__ void softexp_k(int rows, int cols, const T* x, T* out) {
  int r = blockIdx.x;
  if (r >= rows) return;
  float m = -1e30f;
  for (int c = 0; c < cols; ++c) m = fmaxf(m, to_f(x[r * cols + c]));
  float z = 0.f;
  for (int c = 0; c < cols; ++c) z += expf(to_f(x[r * cols + c]) - m);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    out[r * cols + c] = from_f<T>(expf(to_f(x[r * cols + c]) - m) / z);
}

template <typename T>
__global__ void matvec_k(int rows, int cols, const T* a, const T* v, float* out) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.f;
  for (int c = 0; c < cols; ++c) acc = fmaf(to_f(a[r * cols + c]), to_f(v[c]), acc);
  out[r] = acc;
}

#define DISPATCH(t, NAME, ...)                                                  \
  if (t.scalar_type() == at::kFloat) { using T = float; __VA_ARGS__; }          \
  else if (t.scalar_type() == at::kDouble) { using T = double; __VA_ARGS__; }   \
  else if (t.scalar_type() == at::kHalf) { using T = __half; __VA_ARGS__; }     \
  else TORCH_CHECK(false, NAME ": float, double or half")

torch::Tensor saxpy(double a, torch::Tensor x, torch::Tensor y) {
  auto out = torch::empty_like(x);
  int n = x.numel();
  DISPATCH(x, "saxpy", saxpy_k<T><<<120, 256>>>(n, (float)a, (const T*)x.data_ptr(),
                                               (const T*)y.data_ptr(), (T*)out.data_ptr()));
  return out;
}

torch::Tensor blocksum(torch::Tensor x) {
  int n = x.numel();
  auto out = torch::empty({(n + 255) / 256}, x.options().dtype(torch::kFloat));
  DISPATCH(x, "blocksum", blocksum_k<T><<<(n + 255) / 256, 256>>>(n, (const T*)x.data_ptr(),
                                                                 out.data_ptr<float>()));
  return out;
}

torch::Tensor softexp(torch::Tensor x) {
  auto out = torch::empty_like(x);
  int rows = x.size(0), cols = x.size(1);
  DISPATCH(x, "softexp", softexp_k<T><<<rows, 128>>>(rows, cols, (const T*)x.data_ptr(),
                                                    (T*)out.data_ptr()));
  return out;
}

torch::Tensor matvec(torch::Tensor a, torch::Tensor v) {
  int rows = a.size(0), cols = a.size(1);
  auto out = torch::empty({rows}, a.options().dtype(torch::kFloat));
  DISPATCH(a, "matvec", matvec_k<T><<<(rows + 127) / 128, 128>>>(rows, cols,
      (const T*)a.data_ptr(), (const T*)v.data_ptr(), out.data_ptr<float>()));
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("saxpy", &saxpy);
  m.def("blocksum", &blocksum);
  m.def("softexp", &softexp);
  m.def("matvec", &matvec);
}
