#pragma once
// Host side of the wgmma kernels: one launcher for either kind of configuration, the cp.async
// kernel (mixed_wgmma_kernel.cuh) or, with a producer warpgroup, the warp-specialized kernel
// (mixed_wgmma_ws_kernel.cuh); the tensor maps of the TMA-filled ones are encoded here per
// launch.

#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/mixed_wgmma_kernel.cuh"
#include "kernels/mixed/mixed_wgmma_ws_kernel.cuh"
#include "kernels/tma_map.hpp"

namespace cute_gemm {
namespace mixed {

// Calls f(kernel) with the kernel that runs `plan` on this configuration: the warp-specialized
// one with a producer warpgroup (its StreamK form for a stream-K plan); otherwise the cp.async
// one, in its Gated form for a gated plan without the workspace (only configurations with
// kGatesInRegisters have it) and its StreamK form for a stream-K plan (kStreamK); the planner
// makes no other: cudaErrorInvalidValue elsewhere.
template <class Cfg, class F>
cudaError_t with_wgmma_kernel(MixedPlan const& plan, F&& f) {
  if constexpr (Cfg::kProducer) {
    return plan.stream_k_ctas > 0 ? f(mixed_wgmma_ws_kernel<Cfg, true>)
                                  : f(mixed_wgmma_ws_kernel<Cfg, false>);
  } else {
    const bool gated = plan.gates_in_kernel();
    if (plan.stream_k_ctas > 0) {
      if constexpr (Cfg::kStreamK) {
        return gated ? f(mixed_wgmma_kernel<Cfg, true, true>)
                     : f(mixed_wgmma_kernel<Cfg, false, true>);
      } else {
        return cudaErrorInvalidValue;
      }
    }
    if (gated) {
      if constexpr (Cfg::kGatesInRegisters) {
        return f(mixed_wgmma_kernel<Cfg, true>);
      } else {
        return cudaErrorInvalidValue;
      }
    }
    return f(mixed_wgmma_kernel<Cfg, false>);
  }
}

// Raises the kernel's dynamic shared memory limit once (it needs more than 48 KB); for each of the
// cp.async kernel's forms (plain, Gated, StreamK) the configuration has.
template <class Cfg>
cudaError_t prepare_mixed_wgmma() {
  static const cudaError_t e = [] {
    if (Cfg::kSmemBytes <= 48 * 1024) return cudaSuccess;
    auto raise = [](auto kernel) {
      return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  Cfg::kSmemBytes);
    };
    if constexpr (Cfg::kProducer) {
      const cudaError_t e = raise(mixed_wgmma_ws_kernel<Cfg, false>);
      return e == cudaSuccess ? raise(mixed_wgmma_ws_kernel<Cfg, true>) : e;
    } else {
      cudaError_t e = raise(mixed_wgmma_kernel<Cfg, false>);
      if constexpr (Cfg::kGatesInRegisters) {
        if (e == cudaSuccess) e = raise(mixed_wgmma_kernel<Cfg, true>);
      }
      if constexpr (Cfg::kStreamK) {
        if (e == cudaSuccess) e = raise(mixed_wgmma_kernel<Cfg, false, true>);
        if (e == cudaSuccess) e = raise(mixed_wgmma_kernel<Cfg, true, true>);
      }
      return e;
    }
  }();
  return e;
}

// The tensor maps for `p` of a TMA-filled configuration (see MixedWgmmaMaps), their boxes the
// config's shared-memory layouts: each box fills one SmemA line, the whole SmemW, one SmemScales
// row, one SmemOut tile (the warp-specialized kernel's output map, only when the sums go to
// `out`, not the workspace). Gated (the Gated kernel form): the weights, scales and zeros as 3-D
// tensors whose outer index is the half (gate, up; N / 2 columns each, N % 16 == 0 by the op's
// check), so one box fills SmemW and one a SmemScales row with the gate part first
// (GatedWeightSlotTV), and the gate part of a tile past N / 2 reads zeros.
template <class Cfg>
cudaError_t encode_wgmma_maps(MixedGemmParams const& p, bool via_workspace, bool gated,
                              MixedWgmmaMaps* maps) {
  static_assert(Cfg::kTmaLoads, "a TMA-filled configuration");
  static_assert(Cfg::kABoxK * 2 == 128, "an activation box is one 128-byte swizzle line of K");
  const int k_blocks = mixed::k_blocks(p.k, Cfg::kBits);
  const uint64_t groups = uint64_t(GroupShape(p).last) + 1;
  const auto half = p.dtype == HalfType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                   : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  // Each n8 block's k block is kWBoxWords contiguous words (weight_format.hpp).
  const uint64_t words = uint64_t(k_blocks) * Cfg::kWBoxWords, n = uint64_t(p.n);
  // A scale (zero) map: 2-D [groups, N], or gated 3-D [groups][2][N / 2].
  auto encode_scales = [&](CUtensorMap* map, void const* base) {
    if (gated) {
      return encode_3d_map(map, base, half, {n / 2, 2, groups}, {n, n * 2},
                           {uint32_t(Cfg::kScaleBoxCols / 2), 2, 1});
    }
    return encode_2d_map(map, base, half, groups, n, n * 2, 1, Cfg::kScaleBoxCols, false);
  };
  cudaError_t e = encode_k_major_sw128_map(&maps->a, p.a, p.dtype == HalfType::kBFloat16,
                                           uint64_t(p.m), uint64_t(p.k), uint64_t(p.lda),
                                           uint32_t(Cfg::a_box_rows(p.m)));
  if (e == cudaSuccess) {
    const uint64_t blocks = n / kBlockN;
    e = gated ? encode_3d_map(&maps->w, p.qweight, CU_TENSOR_MAP_DATA_TYPE_UINT32,
                              {words, blocks / 2, 2}, {words * 4, words * 4 * (blocks / 2)},
                              {uint32_t(Cfg::kWBoxWords), uint32_t(Cfg::kWBoxBlocks / 2), 2})
              : encode_2d_map(&maps->w, p.qweight, CU_TENSOR_MAP_DATA_TYPE_UINT32, blocks, words,
                              words * 4, Cfg::kWBoxBlocks, Cfg::kWBoxWords, false);
  }
  if (e == cudaSuccess) e = encode_scales(&maps->scales, p.scales);
  if (e == cudaSuccess && p.zeros != nullptr) e = encode_scales(&maps->zeros, p.zeros);
  if (e == cudaSuccess && Cfg::kProducer && !via_workspace) {
    // The output: ldo % 8 == 0 and 16-byte alignment are the op's contract (N % 8 == 0).
    e = encode_k_major_sw128_map(&maps->out, p.out, p.dtype == HalfType::kBFloat16,
                                 uint64_t(p.m), uint64_t(output_columns(p)), uint64_t(p.ldo),
                                 Cfg::kTileM);
  }
  return e;
}

// plan: the planner's, for this instance (its split-K factor, none of the splits empty, and
// whether the sums go through p.workspace to split_k_reduce_kernel).
template <class Cfg>
cudaError_t launch_mixed_wgmma(MixedGemmParams const& p, MixedPlan const& plan,
                               cudaStream_t stream) {
  const cudaError_t prepared = prepare_mixed_wgmma<Cfg>();
  if (prepared != cudaSuccess) return prepared;
  MixedWgmmaMaps maps{};
  if constexpr (Cfg::kTmaLoads) {
    // The Gated kernel form (with_wgmma_kernel) reads the gate and up halves as 3-D boxes.
    const bool gated = Cfg::kGatesInRegisters && plan.gates_in_kernel();
    const cudaError_t encoded = encode_wgmma_maps<Cfg>(p, plan.via_workspace, gated, &maps);
    if (encoded != cudaSuccess) return encoded;
  }
  if constexpr (Cfg::kProducer) {
    return with_wgmma_kernel<Cfg>(plan, [&](auto kernel) {
      return launch_split_k<typename Cfg::Element>(kernel, p, plan, Cfg::kTileM, Cfg::kTileN,
                                                   Cfg::kThreads, Cfg::kSmemBytes, true, stream,
                                                   plan.raster_m, maps);
    });
  } else {
    return with_wgmma_kernel<Cfg>(plan, [&](auto kernel) {
      return launch_split_k<typename Cfg::Element>(kernel, p, plan, Cfg::kTileM, Cfg::kTileN,
                                                   Cfg::kThreads, Cfg::kSmemBytes, true, stream,
                                                   plan.early_dependents, maps);
    });
  }
}

// The CTAs per SM of launch_mixed_wgmma<Cfg>'s kernel on the current device (the occupancy
// calculator), for the test that holds the planner's model against the GPU; cudaErrorInvalidValue
// for a plan of another CTA shape.
template <class Cfg>
cudaError_t mixed_wgmma_occupancy(MixedPlan const& plan, int* ctas_per_sm) {
  if (plan.threads != Cfg::kThreads || plan.smem_bytes != Cfg::kSmemBytes)
    return cudaErrorInvalidValue;
  const cudaError_t prepared = prepare_mixed_wgmma<Cfg>();
  if (prepared != cudaSuccess) return prepared;
  return with_wgmma_kernel<Cfg>(plan, [&](auto kernel) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, kernel, Cfg::kThreads,
                                                         Cfg::kSmemBytes);
  });
}

}  // namespace mixed
}  // namespace cute_gemm
