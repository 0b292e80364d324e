// The cute_gemm torch library: the one TORCH_LIBRARY block, which declares every op's schema.
// Kernels are registered per backend next to each op (TORCH_LIBRARY_IMPL in csrc/ops/<op>_op.cpp);
// fake (meta) kernels and autograd live in Python, in the module named by set_python_module.
#include <torch/library.h>

TORCH_LIBRARY(cute_gemm, m) {
  // Where the fake kernels are registered: torch imports this module when it needs one.
  m.set_python_module("cute_gemm.ops");

  // C[M, N] = a[M, K] @ b[N, K]^T (+ bias[N]); fp16/bf16, fp32 accumulation. See cute_gemm/ops.py.
  m.def("gemm(Tensor a, Tensor b, Tensor? bias=None) -> Tensor");
}
