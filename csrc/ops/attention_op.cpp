// cute_gemm::decode_attention -- attention of a few query positions against a key/value cache,
// grouped-query heads read in place:
//
//   out[b, i, h, :] = softmax_j(scale * q[b, h, i] . k[b, h / G, j] + mask[b, h, i, j])
//                     @ v[b, h / G]
//
// q [B, H, Lq, D], k and v [B, Hkv, L, D] (G = H / Hkv), out [B, Lq, H, D] (the layout a
// transformers attention function returns). mask: None, bool (True takes part) or additive (fp16,
// bf16 or fp32; -inf excludes), 4-D, each dim of size 1 or the full one. A query row that no
// position takes part in (every position excluded, or L = 0) gives 0. Inference only: no
// autograd. The kernel and its contract: kernels/attention/decode_attention_kernel.cuh.
//
// As for the other ops: check_attention_args() validates everything the kernel relies on and is
// shared by the CPU and CUDA kernels; the fake kernel is in cute_gemm/ops.py. The CPU kernel is
// the reference: fp32 matmuls and softmax, the keys and values repeated to the query heads,
// rounded once.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <optional>

#include "kernels/attention/decode_attention_config.hpp"
#include "ops/op_common.hpp"

#ifndef CUTE_GEMM_NO_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/attention/decode_attention_launch.hpp"
#include "kernels/device_info.hpp"
#endif

namespace cute_gemm {
namespace {

constexpr char const* kOp = "cute_gemm.decode_attention: ";
using attention::DecodeAttentionConfig;
using attention::MaskKind;

struct AttentionProblem {
  int64_t batch = 0, heads = 0, q_len = 0, head_dim = 0, kv_heads = 0, kv_len = 0;
  double scale = 0.0;
  MaskKind mask_kind = MaskKind::kNone;
};

MaskKind mask_kind_of(at::ScalarType t) {
  switch (t) {
    case at::kBool: return MaskKind::kBool;
    case at::kHalf: return MaskKind::kFloat16;
    case at::kBFloat16: return MaskKind::kBFloat16;
    case at::kFloat: return MaskKind::kFloat32;
    default:
      TORCH_CHECK(false, kOp, "mask must have dtype torch.bool (True takes part) or an additive ",
                  "torch.float16, torch.bfloat16 or torch.float32; got ", ops::dtype_name(t));
  }
}

// Every check of the op, shared by all backends.
AttentionProblem check_attention_args(at::Tensor const& q, at::Tensor const& k,
                                      at::Tensor const& v, std::optional<at::Tensor> const& mask,
                                      std::optional<double> scale) {
  TORCH_CHECK(q.dim() == 4, kOp, "q must be a 4-D tensor [B, H, Lq, D]; got ", q.dim(),
              "-D with shape ", q.sizes());
  TORCH_CHECK(k.dim() == 4, kOp, "k must be a 4-D tensor [B, Hkv, L, D]; got ", k.dim(),
              "-D with shape ", k.sizes());
  TORCH_CHECK(v.sizes() == k.sizes(), kOp, "v must have k's shape ", k.sizes(), " [B, Hkv, L, D]; ",
              "got ", v.sizes());
  ops::check_half_dtype(kOp, q, "q");
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), kOp,
              "k and v must have q's dtype (", ops::dtype_name(q.scalar_type()), "); got k ",
              ops::dtype_name(k.scalar_type()), " and v ", ops::dtype_name(v.scalar_type()));
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), kOp,
              "q, k and v must be on one device; got q on ", q.device(), ", k on ", k.device(),
              " and v on ", v.device());

  AttentionProblem p;
  p.batch = q.size(0);
  p.heads = q.size(1);
  p.q_len = q.size(2);
  p.head_dim = q.size(3);
  p.kv_heads = k.size(1);
  p.kv_len = k.size(2);
  TORCH_CHECK(k.size(0) == p.batch && k.size(3) == p.head_dim, kOp,
              "k must be [B, Hkv, L, D] with q's B=", p.batch, " and D=", p.head_dim, "; got q ",
              q.sizes(), " and k ", k.sizes());
  TORCH_CHECK(p.kv_heads > 0 && p.heads % p.kv_heads == 0, kOp,
              "q's heads must be a multiple of k's (grouped-query attention); got q with ",
              p.heads, " heads and k with ", p.kv_heads);
  TORCH_CHECK_VALUE(p.head_dim % DecodeAttentionConfig::kVec == 0 && p.head_dim > 0 &&
                        p.head_dim <= DecodeAttentionConfig::kMaxHeadDim,
                    kOp, "the head dim D (q.size(3)) must be a multiple of 8 in [8, 256]; got ",
                    p.head_dim);
  p.scale = scale.has_value() ? *scale : 1.0 / std::sqrt(double(p.head_dim));
  TORCH_CHECK_VALUE(std::isfinite(p.scale), kOp, "scale must be finite; got ", p.scale);

  if (mask.has_value()) {
    at::Tensor const& m = *mask;
    p.mask_kind = mask_kind_of(m.scalar_type());
    TORCH_CHECK(m.device() == q.device(), kOp, "mask must be on q's device (", q.device(),
                "); got ", m.device());
    int64_t const full[4] = {p.batch, p.heads, p.q_len, p.kv_len};
    bool fits = m.dim() == 4;
    for (int d = 0; fits && d < 4; ++d) fits = m.size(d) == full[d] || m.size(d) == 1;
    TORCH_CHECK(fits, kOp, "mask must be 4-D and broadcast to [B, H, Lq, L] = [", p.batch, ", ",
                p.heads, ", ", p.q_len, ", ", p.kv_len, "] (each dim that size or 1); got shape ",
                m.sizes());
  }
  return p;
}

bool has_work(AttentionProblem const& p) {
  return p.batch > 0 && p.heads > 0 && p.q_len > 0;
}

// CPU: the reference. fp32 scores and softmax over the keys and values repeated to the query heads;
// rows with no position taking part give 0. As on the GPU, what an excluded position holds (NaN
// or Inf in a static cache's unused rows) takes no part: its score is -inf and its values are
// weighted by nothing, not by 0 (0 * NaN is NaN).
at::Tensor decode_attention_cpu(at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                                std::optional<at::Tensor> const& mask,
                                std::optional<double> scale) {
  AttentionProblem const p = check_attention_args(q, k, v, mask, scale);
  if (!has_work(p) || p.kv_len == 0) {
    return at::zeros({p.batch, p.q_len, p.heads, p.head_dim}, q.options());
  }
  int64_t const group = p.heads / p.kv_heads;
  at::Tensor const kf = k.to(at::kFloat).repeat_interleave(group, 1);
  at::Tensor const vf = v.to(at::kFloat).repeat_interleave(group, 1);
  at::Tensor scores = at::matmul(q.to(at::kFloat), kf.transpose(-1, -2)) * p.scale;
  if (mask.has_value()) {
    bool const is_bool = mask->scalar_type() == at::kBool;
    at::Tensor const additive = is_bool ? at::Tensor() : mask->to(at::kFloat);
    at::Tensor const excluded = is_bool ? mask->logical_not() : additive == -INFINITY;
    scores = (is_bool ? scores : scores + additive).masked_fill(excluded, -INFINITY);
  }
  at::Tensor const top = std::get<0>(scores.max(-1, /*keepdim=*/true));
  // A row whose max is -inf has no position taking part: its probabilities are 0, not NaN.
  at::Tensor const shift = at::where(at::isinf(top) & (top < 0), at::zeros_like(top), top);
  at::Tensor const probs = at::exp(scores - shift);
  at::Tensor const sums = probs.sum(-1, /*keepdim=*/true);
  at::Tensor weighted = at::matmul(probs, vf);
  at::Tensor const finite = at::isfinite(vf);
  if (!finite.all().item<bool>()) {
    // Values that are not finite count only through positions that take part (probability > 0).
    at::Tensor const reached = at::matmul((probs > 0).to(at::kFloat),
                                          finite.logical_not().to(at::kFloat)) > 0;
    weighted = at::where(reached, weighted, at::matmul(probs, vf.masked_fill(~finite, 0)));
  }
  at::Tensor out = weighted / at::where(sums > 0, sums, at::ones_like(sums));
  return out.transpose(1, 2).contiguous().to(q.scalar_type());
}

#ifndef CUTE_GEMM_NO_CUDA
// The row layout the kernel's 16-byte loads need: d contiguous, the other strides multiples of 8
// elements, a 16-byte aligned start.
bool rows_are_chunks(at::Tensor const& t) {
  bool ok = t.stride(3) == 1 || t.size(3) == 1;
  for (int d = 0; ok && d < 3; ++d) {
    ok = t.size(d) == 1 || t.stride(d) % DecodeAttentionConfig::kVec == 0;
  }
  return ok && reinterpret_cast<std::uintptr_t>(t.data_ptr()) % ops::kAlignBytes == 0;
}

// k and v are read where they lie (a copy of the cache would cost more than the attention).
void check_rows_layout(at::Tensor const& t, char const* name) {
  TORCH_CHECK(rows_are_chunks(t), kOp, name, " must have contiguous rows (", name,
              ".stride(3) == 1), its other strides multiples of 8 elements (16 bytes) and a ",
              "16-byte aligned start; got strides ", t.strides(), " for shape ", t.sizes(),
              " at data_ptr % 16 == ", reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16,
              "; call ", name, ".contiguous()");
}

at::Tensor decode_attention_cuda(at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                                 std::optional<at::Tensor> const& mask,
                                 std::optional<double> scale) {
  using Cfg = DecodeAttentionConfig;
  AttentionProblem const p = check_attention_args(q, k, v, mask, scale);
  c10::cuda::CUDAGuard const device_guard(q.device());
  if (!has_work(p) || p.kv_len == 0) {
    return at::zeros({p.batch, p.q_len, p.heads, p.head_dim}, q.options());
  }
  check_rows_layout(k, "k");
  check_rows_layout(v, "v");
  // q (any strides, any start) is small: copied where its rows are not 16-byte chunks.
  at::Tensor const q_rows = rows_are_chunks(q) ? q : q.clone(at::MemoryFormat::Contiguous);
  int64_t const group = p.heads / p.kv_heads;
  int64_t const head_ctas = p.kv_heads * Cfg::head_chunks(int(group));
  TORCH_CHECK(p.batch * p.q_len <= 65535 && head_ctas <= 65535, kOp,
              "B * Lq and the key/value heads' CTAs must each be at most 65535 (grid limits); got ",
              "B * Lq = ", p.batch * p.q_len, " and ", head_ctas);
  ops::check_int32(kOp, p.kv_len, "L (k.size(2))");

  at::Tensor out = at::empty({p.batch, p.q_len, p.heads, p.head_dim}, q.options());
  attention::DecodeAttentionParams params;
  params.q = q_rows.data_ptr();
  params.k = k.data_ptr();
  params.v = v.data_ptr();
  params.out = out.data_ptr();
  params.batch = int(p.batch);
  params.q_len = int(p.q_len);
  params.kv_len = int(p.kv_len);
  params.heads = int(p.heads);
  params.kv_heads = int(p.kv_heads);
  params.head_dim = int(p.head_dim);
  for (int d = 0; d < 3; ++d) {
    params.q_stride[d] = q_rows.stride(d);
    params.k_stride[d] = k.stride(d);
    params.v_stride[d] = v.stride(d);
  }
  if (mask.has_value()) {
    params.mask = mask->data_ptr();
    params.mask_kind = p.mask_kind;
    for (int d = 0; d < 4; ++d) params.mask_stride[d] = mask->size(d) == 1 ? 0 : mask->stride(d);
  }
  params.scale_log2 = float(p.scale * 1.4426950408889634);

  attention::DecodeAttentionInstance const* const kernel =
      attention::find_decode_attention(q.scalar_type() == at::kBFloat16, int(p.head_dim));
  TORCH_CHECK(kernel != nullptr, kOp, "no kernel instance for ", q.scalar_type(),
              " and head dim ", p.head_dim);
  int64_t const ctas = p.batch * p.q_len * head_ctas;
  int const sm_count = current_sm_count();
  params.splits = attention::decode_attention_splits(ctas, params.kv_len, sm_count,
                                                      kernel->clusters());
  params.early_dependents =
      attention::decode_attention_early_dependents(ctas * params.splits, sm_count);
  bool const pdl = current_cc_major() >= 9;
  cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();
  cudaError_t const err = kernel->launch(params, pdl, stream);
  TORCH_CHECK(err == cudaSuccess, kOp, "kernel launch failed (", params.splits,
              " CTAs per cluster): ", cudaGetErrorString(err));
  return out;
}
#endif  // CUTE_GEMM_NO_CUDA

}  // namespace
}  // namespace cute_gemm

TORCH_LIBRARY_IMPL(cute_gemm, CPU, m) {
  m.impl("decode_attention", &cute_gemm::decode_attention_cpu);
}

#ifndef CUTE_GEMM_NO_CUDA
TORCH_LIBRARY_IMPL(cute_gemm, CUDA, m) {
  m.impl("decode_attention", &cute_gemm::decode_attention_cuda);
}
#endif
