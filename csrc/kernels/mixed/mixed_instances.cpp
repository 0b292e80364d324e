// The planner's table of the mixed GEMM's instances (mixed_instances.hpp), in the order of
// generated/mixed_instances.inc, which mixed_dispatch.cu's launcher table shares.

#include "kernels/mixed/mixed_instances.hpp"

namespace cute_gemm {

namespace {

using mixed::PlannerElement;

MixedInstanceInfo const kInstances[] = {
#define CG_MIXED_DECODE(name, bf16, ...)                                                 \
  mixed::decode_instance_info<mixed::DecodeInstance<PlannerElement, bf16, __VA_ARGS__>>(#name, \
                                                                                       bf16),
#define CG_MIXED_MMA(name, bf16, ...) \
  mixed::mma_instance_info<mixed::MmaInstance<PlannerElement, bf16, __VA_ARGS__>>(#name, bf16),
#define CG_MIXED_WGMMA(name, bf16, ...) \
  mixed::wgmma_instance_info<mixed::WgmmaInstance<PlannerElement, bf16, __VA_ARGS__>>(#name, bf16),
#include "kernels/mixed/generated/mixed_instances.inc"
#undef CG_MIXED_DECODE
#undef CG_MIXED_MMA
#undef CG_MIXED_WGMMA
};

}  // namespace

int mixed_instance_count() { return int(sizeof(kInstances) / sizeof(kInstances[0])); }

MixedInstanceInfo const& mixed_instance(int index) { return kInstances[index]; }

}  // namespace cute_gemm
