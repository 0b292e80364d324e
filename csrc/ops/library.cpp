// The cute_gemm torch library: the one TORCH_LIBRARY block, which declares every op's schema.
// Kernels are registered per backend next to each op (TORCH_LIBRARY_IMPL in csrc/ops/<op>_op.cpp);
// fake (meta) kernels and autograd live in Python, in the module named by set_python_module.
#include <torch/library.h>

TORCH_LIBRARY(cute_gemm, m) {
  // Where the fake kernels are registered: torch imports this module when it needs one.
  m.set_python_module("cute_gemm.ops");

  // C[M, N] = a[M, K] @ b[N, K]^T (+ bias[N]); fp16/bf16, fp32 accumulation. See cute_gemm/ops.py.
  // config: the name of one compiled tile configuration for the CUDA kernel to run
  // (kernels/gemm/gemm_configs.hpp, e.g. "128x128x64_s3_w2x2"); None for the heuristic's choice.
  m.def("gemm(Tensor a, Tensor b, Tensor? bias=None, str? config=None) -> Tensor");

  // out[M, N] = a[M, K] @ dequant(qweight)[N, K]^T (+ bias[N]): INT4/INT8 weights packed as in
  // kernels/mixed/weight_format.hpp, fp16/bf16 activations, fp32 accumulation. k is the true K
  // (the packed K is padded); group_size is 32, 64, 128 or -1 (per-channel). See
  // csrc/ops/mixed_gemm_op.cpp and cute_gemm/ops.py. schedule: explicit choices that override
  // the planner's (kernels/mixed/mixed_plan.hpp), e.g. "kernel=wgmma,tile_m=128"; None for none.
  // activation: None, or "silu_mul": out[M, N/2] = SiLU(gate) * up of the halves of N.
  m.def("mixed_gemm(Tensor a, Tensor qweight, Tensor scales, Tensor? zeros, int bits, "
        "int group_size, int k, Tensor? bias=None, str? schedule=None, str? activation=None) "
        "-> Tensor");

  // partials[S, M, N] (fp32): the plan's split-K partial sums of a[M, K] @ dequant(qweight)^T,
  // split s over its share of K, left to the caller to add in split order (no reduce kernel, no
  // bias, no activation). S is the plan's split count for this M on this device (1 unsplit and
  // on CPU; the plan may split where mixed_gemm's would not, since no reduce kernel follows:
  // mixed_plan.cpp's kPartialsCtaWarps); mixed_gemm's out on the same plan is
  // round(sum_s partials[s] + bias). For compilers that fuse the sum into the consumer
  // (cute_gemm.inductor.decode_compilation). Inference only.
  m.def("mixed_gemm_partials(Tensor a, Tensor qweight, Tensor scales, Tensor? zeros, int bits, "
        "int group_size, int k, str? schedule=None) -> Tensor");

  // out[B, Lq, H, D]: attention of q[B, H, Lq, D] against k, v [B, Hkv, L, D] read in place
  // (H a multiple of Hkv: grouped-query heads), scale * q.k + mask, softmax over L. mask: None,
  // bool (True takes part) or additive, 4-D and broadcast to [B, H, Lq, L]; scale None is
  // 1/sqrt(D). Built for decode (small Lq, long L); see csrc/ops/attention_op.cpp.
  m.def("decode_attention(Tensor q, Tensor k, Tensor v, Tensor? mask=None, float? scale=None) "
        "-> Tensor");
}
