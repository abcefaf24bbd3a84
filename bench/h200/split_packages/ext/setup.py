# A small PyTorch CUDA extension, built by `pip wheel` (setuptools' build_ext, torch's
# CUDAExtension) through `fatpack run` with packing forced: the fat wheel fatpack splits.
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="cutext",
    version="1.0",
    packages=["cutext"],
    ext_modules=[CUDAExtension("cutext._C", ["cutext/ops.cu"], extra_compile_args={"nvcc": ["-O2"]})],
    cmdclass={"build_ext": BuildExtension},
)
