#pragma once
// The quantization groups of a mixed GEMM launch, as every mixed kernel (decode, mma.sync, both
// wgmma kernels, the dequantize kernel) indexes its scales: group sizes are 32, 64 or 128 (powers
// of two, so shifts instead of run-time divisions in the loops) or per-channel, one group of the
// whole K.

#include "cute_gemm/config.hpp"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

CG_HOST_DEVICE int log2_of_power_of_two(int x) {
#if defined(__CUDA_ARCH__)
  return __ffs(x) - 1;
#else
  int s = 0;  // __ffs is declared for device passes only
  while ((1 << s) < x) ++s;
  return s;
#endif
}

struct GroupShape {
  int size;          // G; K for per-channel scales
  int last;          // index of the last group
  bool per_channel;  // one group of a K that is not a power of two: no shift applies
  int shift;         // log2(size) unless per_channel (then 0)

  // Example: K = 4224, G = 128 -> size 128, last 32, shift 7; G = -1 (per-channel) -> size 4224,
  // last 0, per_channel, shift 0; G = -1 with K = 4096 -> size 4096, shift 12 (k >> 12 == 0).
  CG_HOST_DEVICE explicit GroupShape(MixedGemmParams const& p)
      : size(effective_group_size(p.group_size, p.k)),
        last((p.k + size - 1) / size - 1),
        per_channel(size == p.k && (size & (size - 1)) != 0),
        shift(per_channel ? 0 : log2_of_power_of_two(size)) {}

  // The scale row `row` rows past the group of k (k >= 0), clamped to the last group (rows past
  // K, the packed padding, read its scales): min(k / size + row, last), with a shift, which is
  // 0 for per-channel scales (as `last`), so the clamp gives their one row. Every mixed kernel
  // indexes its scales with it.
  CG_HOST_DEVICE int row_of(int k, int row = 0) const {
    const int g = (k >> shift) + row;
    return g < last ? g : last;
  }
};

}  // namespace mixed
}  // namespace cute_gemm
