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
// cute_gemm::decode_attention_append -- the same for one query position whose key and value are
// new: with cos and sin, the rotary embedding of q and the new key first (transformers'
// rotate_half form); the new key and value are written into the cache at row `position`, and the
// attention reads them there. What a decode step's rotary embedding, cache update and attention
// do, in one kernel.
//
// As for the other ops: check_attention_args() (and check_append_args()) validate everything the
// kernel relies on and are shared by the CPU and CUDA kernels; the fake kernels are in
// cute_gemm/ops.py. The CPU kernels are the reference: fp32 matmuls and softmax, the keys and
// values repeated to the query heads, rounded once.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

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
constexpr char const* kAppendOp = "cute_gemm.decode_attention_append: ";
using attention::DecodeAttentionConfig;
using attention::MaskKind;

struct AttentionProblem {
  int64_t batch = 0, heads = 0, q_len = 0, head_dim = 0, kv_heads = 0, kv_len = 0;
  double scale = 0.0;
  MaskKind mask_kind = MaskKind::kNone;
};

MaskKind mask_kind_of(at::ScalarType t, char const* op) {
  switch (t) {
    case at::kBool: return MaskKind::kBool;
    case at::kHalf: return MaskKind::kFloat16;
    case at::kBFloat16: return MaskKind::kBFloat16;
    case at::kFloat: return MaskKind::kFloat32;
    default:
      TORCH_CHECK(false, op, "mask must have dtype torch.bool (True takes part) or an additive ",
                  "torch.float16, torch.bfloat16 or torch.float32; got ", ops::dtype_name(t));
  }
}

// Every check of the op, shared by all backends.
AttentionProblem check_attention_args(at::Tensor const& q, at::Tensor const& k,
                                      at::Tensor const& v, std::optional<at::Tensor> const& mask,
                                      std::optional<double> scale, char const* op = kOp) {
  TORCH_CHECK(q.dim() == 4, op, "q must be a 4-D tensor [B, H, Lq, D]; got ", q.dim(),
              "-D with shape ", q.sizes());
  TORCH_CHECK(k.dim() == 4, op, "k must be a 4-D tensor [B, Hkv, L, D]; got ", k.dim(),
              "-D with shape ", k.sizes());
  TORCH_CHECK(v.sizes() == k.sizes(), op, "v must have k's shape ", k.sizes(), " [B, Hkv, L, D]; ",
              "got ", v.sizes());
  ops::check_half_dtype(op, q, "q");
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), op,
              "k and v must have q's dtype (", ops::dtype_name(q.scalar_type()), "); got k ",
              ops::dtype_name(k.scalar_type()), " and v ", ops::dtype_name(v.scalar_type()));
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), op,
              "q, k and v must be on one device; got q on ", q.device(), ", k on ", k.device(),
              " and v on ", v.device());

  AttentionProblem p;
  p.batch = q.size(0);
  p.heads = q.size(1);
  p.q_len = q.size(2);
  p.head_dim = q.size(3);
  p.kv_heads = k.size(1);
  p.kv_len = k.size(2);
  TORCH_CHECK(k.size(0) == p.batch && k.size(3) == p.head_dim, op,
              "k must be [B, Hkv, L, D] with q's B=", p.batch, " and D=", p.head_dim, "; got q ",
              q.sizes(), " and k ", k.sizes());
  TORCH_CHECK(p.kv_heads > 0 && p.heads % p.kv_heads == 0, op,
              "q's heads must be a multiple of k's (grouped-query attention); got q with ",
              p.heads, " heads and k with ", p.kv_heads);
  TORCH_CHECK_VALUE(p.head_dim % DecodeAttentionConfig::kVec == 0 && p.head_dim > 0 &&
                        p.head_dim <= DecodeAttentionConfig::kMaxHeadDim,
                    op, "the head dim D (q.size(3)) must be a multiple of 8 in [8, 256]; got ",
                    p.head_dim);
  p.scale = scale.has_value() ? *scale : 1.0 / std::sqrt(double(p.head_dim));
  TORCH_CHECK_VALUE(std::isfinite(p.scale), op, "scale must be finite; got ", p.scale);

  if (mask.has_value()) {
    at::Tensor const& m = *mask;
    p.mask_kind = mask_kind_of(m.scalar_type(), op);
    TORCH_CHECK(m.device() == q.device(), op, "mask must be on q's device (", q.device(),
                "); got ", m.device());
    int64_t const full[4] = {p.batch, p.heads, p.q_len, p.kv_len};
    bool fits = m.dim() == 4;
    for (int d = 0; fits && d < 4; ++d) fits = m.size(d) == full[d] || m.size(d) == 1;
    TORCH_CHECK(fits, op, "mask must be 4-D and broadcast to [B, H, Lq, L] = [", p.batch, ", ",
                p.heads, ", ", p.q_len, ", ", p.kv_len, "] (each dim that size or 1); got shape ",
                m.sizes());
  }
  return p;
}

bool has_work(AttentionProblem const& p) {
  return p.batch > 0 && p.heads > 0 && p.q_len > 0;
}

// decode_attention_append: t has q's dtype and device.
void check_like_q(at::Tensor const& t, char const* name, at::Tensor const& q) {
  TORCH_CHECK(t.scalar_type() == q.scalar_type(), kAppendOp, name, " must have q's dtype (",
              ops::dtype_name(q.scalar_type()), "); got ", ops::dtype_name(t.scalar_type()));
  TORCH_CHECK(t.device() == q.device(), kAppendOp, name, " must be on q's device (", q.device(),
              "); got ", t.device());
}

// decode_attention_append's checks: q [B, H, 1, D]; k_new, v_new [B, Hkv, 1, D]; cos and sin
// both or neither, [B, 1, D] or [1, 1, D]; position one int64 element; the caches as
// decode_attention's k and v. Returns the attention's problem.
AttentionProblem check_append_args(at::Tensor const& q, at::Tensor const& k_new,
                                   at::Tensor const& v_new, std::optional<at::Tensor> const& cos,
                                   std::optional<at::Tensor> const& sin,
                                   at::Tensor const& k_cache, at::Tensor const& v_cache,
                                   at::Tensor const& position,
                                   std::optional<at::Tensor> const& mask,
                                   std::optional<double> scale) {
  // The caches under their own names first (check_attention_args calls them k and v).
  TORCH_CHECK(k_cache.dim() == 4, kAppendOp, "k_cache must be a 4-D tensor [B, Hkv, L, D]; got ",
              k_cache.dim(), "-D with shape ", k_cache.sizes());
  TORCH_CHECK(v_cache.sizes() == k_cache.sizes(), kAppendOp, "v_cache must have k_cache's shape ",
              k_cache.sizes(), "; got ", v_cache.sizes());
  TORCH_CHECK(q.dim() == 4 && k_cache.size(0) == q.size(0) && k_cache.size(3) == q.size(3) &&
                  k_cache.size(1) > 0 && q.size(1) % k_cache.size(1) == 0,
              kAppendOp, "k_cache must be [B, Hkv, L, D] with q's B and D and Hkv dividing q's ",
              "heads (q [B, H, 1, D]); got q ", q.sizes(), " and k_cache ", k_cache.sizes());
  check_like_q(k_cache, "k_cache", q);
  check_like_q(v_cache, "v_cache", q);
  AttentionProblem const p = check_attention_args(q, k_cache, v_cache, mask, scale, kAppendOp);
  TORCH_CHECK_VALUE(p.q_len == 1, kAppendOp, "q must hold one query position ([B, H, 1, D]); got ",
                    "shape ", q.sizes());
  std::vector<int64_t> const new_shape = {p.batch, p.kv_heads, 1, p.head_dim};
  for (auto const& [t, name] : {std::pair<at::Tensor const&, char const*>{k_new, "k_new"},
                                std::pair<at::Tensor const&, char const*>{v_new, "v_new"}}) {
    TORCH_CHECK(t.sizes() == at::IntArrayRef(new_shape), kAppendOp, name,
                " must be [B, Hkv, 1, D] = ", at::IntArrayRef(new_shape), " (q's B and D, the ",
                "cache's Hkv); got ", t.sizes());
    check_like_q(t, name, q);
  }
  TORCH_CHECK(cos.has_value() == sin.has_value(), kAppendOp,
              "cos and sin must be given together (the rotary embedding) or both be None; got ",
              cos.has_value() ? "cos without sin" : "sin without cos");
  if (cos.has_value()) {
    for (auto const& [t, name] : {std::pair<at::Tensor const&, char const*>{*cos, "cos"},
                                  std::pair<at::Tensor const&, char const*>{*sin, "sin"}}) {
      TORCH_CHECK(t.dim() == 3 && (t.size(0) == p.batch || t.size(0) == 1) && t.size(1) == 1 &&
                      t.size(2) == p.head_dim,
                  kAppendOp, name, " must be [B, 1, D] or [1, 1, D] with B=", p.batch, " and D=",
                  p.head_dim, "; got shape ", t.sizes());
      check_like_q(t, name, q);
    }
  }
  TORCH_CHECK(position.scalar_type() == at::kLong && position.numel() == 1, kAppendOp,
              "position must be one torch.int64 element (the cache row of the new key and value); ",
              "got ", ops::dtype_name(position.scalar_type()), " with shape ", position.sizes());
  TORCH_CHECK(position.device() == q.device(), kAppendOp, "position must be on q's device (",
              q.device(), "); got ", position.device());
  return p;
}

// The rotary embedding of x [B, h, 1, D] by cos, sin [B or 1, 1, D] in fp32, rounded once (the
// kernel's rotate_pair).
at::Tensor rotate(at::Tensor const& x, at::Tensor const& cos, at::Tensor const& sin) {
  int64_t const half = x.size(3) / 2;
  at::Tensor const xf = x.to(at::kFloat);
  at::Tensor const turned = at::cat({-xf.narrow(3, half, half), xf.narrow(3, 0, half)}, 3);
  return (xf * cos.to(at::kFloat).unsqueeze(1) + turned * sin.to(at::kFloat).unsqueeze(1))
      .to(x.scalar_type());
}

// CPU: the reference. fp32 scores and softmax over the keys and values repeated to the query heads;
// rows with no position taking part give 0.
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
    scores = mask->scalar_type() == at::kBool
                 ? scores.masked_fill(mask->logical_not(), -INFINITY)
                 : scores + mask->to(at::kFloat);
  }
  at::Tensor const top = std::get<0>(scores.max(-1, /*keepdim=*/true));
  // A row whose max is -inf has no position taking part: its probabilities are 0, not NaN.
  at::Tensor const shift = at::where(at::isinf(top) & (top < 0), at::zeros_like(top), top);
  at::Tensor const probs = at::exp(scores - shift);
  at::Tensor const sums = probs.sum(-1, /*keepdim=*/true);
  at::Tensor out = at::matmul(probs, vf) / at::where(sums > 0, sums, at::ones_like(sums));
  return out.transpose(1, 2).contiguous().to(q.scalar_type());
}

at::Tensor decode_attention_append_cpu(at::Tensor const& q, at::Tensor const& k_new,
                                      at::Tensor const& v_new, std::optional<at::Tensor> const& cos,
                                      std::optional<at::Tensor> const& sin, at::Tensor& k_cache,
                                      at::Tensor& v_cache, at::Tensor const& position,
                                      std::optional<at::Tensor> const& mask,
                                      std::optional<double> scale) {
  AttentionProblem const p =
      check_append_args(q, k_new, v_new, cos, sin, k_cache, v_cache, position, mask, scale);
  int64_t const row = position.item<int64_t>();
  TORCH_CHECK_INDEX(row >= 0 && row < p.kv_len, kAppendOp, "position ", row,
                    " is outside the cache's ", p.kv_len, " rows (k_cache.size(2))");
  at::Tensor const q_rot = cos.has_value() ? rotate(q, *cos, *sin) : q;
  at::Tensor const k_rot = cos.has_value() ? rotate(k_new, *cos, *sin) : k_new;
  k_cache.narrow(2, row, 1).copy_(k_rot);
  v_cache.narrow(2, row, 1).copy_(v_new);
  return decode_attention_cpu(q_rot, k_cache, v_cache, mask, scale);
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
void check_rows_layout(at::Tensor const& t, char const* name, char const* op) {
  TORCH_CHECK(rows_are_chunks(t), op, name, " must have contiguous rows (", name,
              ".stride(3) == 1), its other strides multiples of 8 elements (16 bytes) and a ",
              "16-byte aligned start; got strides ", t.strides(), " for shape ", t.sizes(),
              " at data_ptr % 16 == ", reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16,
              "; call ", name, ".contiguous()");
}

// Sets up and launches the kernel for a checked problem p (q any layout, copied where its rows are
// not 16-byte chunks; k and v read in place); `extra` fills in what the caller adds to the
// parameters (an append). Errors name `op` and the caches as k_name and v_name.
template <class Extra>
at::Tensor launch_attention(at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                            std::optional<at::Tensor> const& mask, AttentionProblem const& p,
                            Extra&& extra, char const* op, char const* k_name, char const* v_name) {
  using Cfg = DecodeAttentionConfig;
  check_rows_layout(k, k_name, op);
  check_rows_layout(v, v_name, op);
  at::Tensor const q_rows = rows_are_chunks(q) ? q : q.clone(at::MemoryFormat::Contiguous);
  int64_t const group = p.heads / p.kv_heads;
  int64_t const head_ctas = p.kv_heads * Cfg::head_chunks(int(group));
  TORCH_CHECK(p.batch * p.q_len <= 65535 && head_ctas <= 65535, op,
              "B * Lq and the key/value heads' CTAs must each be at most 65535 (grid limits); got ",
              "B * Lq = ", p.batch * p.q_len, " and ", head_ctas);
  ops::check_int32(op, p.kv_len, "L (k.size(2))");

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
  extra(params);

  attention::DecodeAttentionInstance const* const kernel =
      attention::find_decode_attention(q.scalar_type() == at::kBFloat16, int(p.head_dim),
                                       params.append.k_new != nullptr);
  TORCH_CHECK(kernel != nullptr, op, "no kernel instance for ", q.scalar_type(), " and head dim ",
              p.head_dim);
  params.splits = attention::decode_attention_splits(p.batch * p.q_len * head_ctas, params.kv_len,
                                                      current_sm_count(), kernel->clusters());
  bool const pdl = current_cc_major() >= 9;
  cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();
  cudaError_t const err = kernel->launch(params, pdl, stream);
  TORCH_CHECK(err == cudaSuccess, op, "kernel launch failed (", params.splits,
              " CTAs per cluster): ", cudaGetErrorString(err));
  return out;
}

at::Tensor decode_attention_cuda(at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                                 std::optional<at::Tensor> const& mask,
                                 std::optional<double> scale) {
  AttentionProblem const p = check_attention_args(q, k, v, mask, scale);
  c10::cuda::CUDAGuard const device_guard(q.device());
  if (!has_work(p) || p.kv_len == 0) {
    return at::zeros({p.batch, p.q_len, p.heads, p.head_dim}, q.options());
  }
  return launch_attention(q, k, v, mask, p, [](auto&) {}, kOp, "k", "v");
}

// A [.., D] tensor whose last dim is contiguous 16-byte chunks (the kernel's loads), copied where
// it is not (these are small: one position's rows).
at::Tensor as_chunk_rows(at::Tensor const& t) {
  bool ok = t.stride(-1) == 1 || t.size(-1) == 1;
  for (int d = 0; ok && d + 1 < t.dim(); ++d) {
    ok = t.size(d) == 1 || t.stride(d) % DecodeAttentionConfig::kVec == 0;
  }
  ok = ok && reinterpret_cast<std::uintptr_t>(t.data_ptr()) % ops::kAlignBytes == 0;
  return ok ? t : t.clone(at::MemoryFormat::Contiguous);
}

at::Tensor decode_attention_append_cuda(at::Tensor const& q, at::Tensor const& k_new,
                                       at::Tensor const& v_new,
                                       std::optional<at::Tensor> const& cos,
                                       std::optional<at::Tensor> const& sin, at::Tensor& k_cache,
                                       at::Tensor& v_cache, at::Tensor const& position,
                                       std::optional<at::Tensor> const& mask,
                                       std::optional<double> scale) {
  AttentionProblem const p =
      check_append_args(q, k_new, v_new, cos, sin, k_cache, v_cache, position, mask, scale);
  c10::cuda::CUDAGuard const device_guard(q.device());
  if (!has_work(p)) return at::empty({p.batch, 1, p.heads, p.head_dim}, q.options());
  TORCH_CHECK_INDEX(p.kv_len > 0, kAppendOp, "the cache has no rows (k_cache.size(2) == 0)");
  at::Tensor const k_rows = as_chunk_rows(k_new), v_rows = as_chunk_rows(v_new);
  at::Tensor const cos_rows = cos.has_value() ? as_chunk_rows(*cos) : at::Tensor();
  at::Tensor const sin_rows = sin.has_value() ? as_chunk_rows(*sin) : at::Tensor();
  at::Tensor out = launch_attention(q, k_cache, v_cache, mask, p, [&](auto& params) {
    attention::DecodeAttentionAppend& a = params.append;
    a.k_new = k_rows.data_ptr();
    a.v_new = v_rows.data_ptr();
    for (int d = 0; d < 2; ++d) {
      a.k_new_stride[d] = k_rows.stride(d);
      a.v_new_stride[d] = v_rows.stride(d);
    }
    if (cos_rows.defined()) {
      a.cos = cos_rows.data_ptr();
      a.sin = sin_rows.data_ptr();
      a.cos_stride = cos_rows.size(0) == 1 ? 0 : cos_rows.stride(0);
      a.sin_stride = sin_rows.size(0) == 1 ? 0 : sin_rows.stride(0);
    }
    a.position = position.data_ptr<int64_t>();
  }, kAppendOp, "k_cache", "v_cache");
  return out;
}
#endif  // CUTE_GEMM_NO_CUDA

}  // namespace
}  // namespace cute_gemm

TORCH_LIBRARY_IMPL(cute_gemm, CPU, m) {
  m.impl("decode_attention", &cute_gemm::decode_attention_cpu);
  m.impl("decode_attention_append", &cute_gemm::decode_attention_append_cpu);
}

#ifndef CUTE_GEMM_NO_CUDA
TORCH_LIBRARY_IMPL(cute_gemm, CUDA, m) {
  m.impl("decode_attention", &cute_gemm::decode_attention_cuda);
  m.impl("decode_attention_append", &cute_gemm::decode_attention_append_cuda);
}
#endif
