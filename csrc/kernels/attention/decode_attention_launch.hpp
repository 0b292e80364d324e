#pragma once
// The decode attention kernel's entry points for the op (csrc/ops/attention_op.cpp), one generated
// TU per element type (kernels/attention/generated/): the op includes this header, not the kernel.

#include <cuda_runtime.h>

#include "kernels/attention/decode_attention_config.hpp"

namespace cute_gemm {
namespace attention {

// Launch for p (p.splits CTAs per cluster; 1 unless the *_clusters() of the type said true), a
// programmatic dependent of the kernel before it when pdl.
cudaError_t decode_attention_f16(DecodeAttentionParams const& p, bool pdl, cudaStream_t stream);
cudaError_t decode_attention_bf16(DecodeAttentionParams const& p, bool pdl, cudaStream_t stream);
// Whether the type's kernel has cluster code (sm_90+) for the current device.
bool decode_attention_f16_clusters();
bool decode_attention_bf16_clusters();

}  // namespace attention
}  // namespace cute_gemm
