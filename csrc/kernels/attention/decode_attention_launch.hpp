#pragma once
// The decode attention kernel's entry points for the op (csrc/ops/attention_op.cpp): one generated
// TU per (element type, head-dim class) (kernels/attention/generated/), listed by
// generated/decode_attention_instances.inc as rows
//
//   CG_DECODE_ATTENTION(name, bf16, head_dim_class)
//
// each defining `name`, the launcher, and `name`_clusters, whether that kernel has cluster code
// (sm_90+) for the current device. The op includes this header, not the kernel.

#include <cuda_runtime.h>

#include "kernels/attention/decode_attention_config.hpp"

namespace cute_gemm {
namespace attention {

// Launch for p (p.splits CTAs per cluster; 1 unless the instance's clusters() said true), a
// programmatic dependent of the kernel before it when pdl.
using DecodeAttentionLaunch = cudaError_t (*)(DecodeAttentionParams const& p, bool pdl,
                                              cudaStream_t stream);

#define CG_DECODE_ATTENTION(name, bf16, dim)                                          \
  cudaError_t name(DecodeAttentionParams const& p, bool pdl, cudaStream_t stream); \
  bool name##_clusters();
#include "kernels/attention/generated/decode_attention_instances.inc"
#undef CG_DECODE_ATTENTION

struct DecodeAttentionInstance {
  bool bf16;
  int head_dim_class;
  DecodeAttentionLaunch launch;
  bool (*clusters)();
};

// The instance for an element type and head dim (DecodeAttentionConfig::head_dim_class), or
// nullptr where none was generated.
inline DecodeAttentionInstance const* find_decode_attention(bool bf16, int head_dim) {
  static constexpr DecodeAttentionInstance kInstances[] = {
#define CG_DECODE_ATTENTION(name, bf16, dim) {bf16, dim, &name, &name##_clusters},
#include "kernels/attention/generated/decode_attention_instances.inc"
#undef CG_DECODE_ATTENTION
  };
  int const dim_class = DecodeAttentionConfig::head_dim_class(head_dim);
  for (DecodeAttentionInstance const& instance : kInstances) {
    if (instance.bf16 == bf16 && instance.head_dim_class == dim_class) return &instance;
  }
  return nullptr;
}

}  // namespace attention
}  // namespace cute_gemm
