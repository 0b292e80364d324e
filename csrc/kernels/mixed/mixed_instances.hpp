#pragma once
// The kinds of mixed GEMM kernel instance and what the planner knows of each, read from the
// instance's config (CUDA-free headers, so this compiles into every build). The generator
// (scripts/generate_kernels.py) only lists the instances: generated/mixed_instances.inc has one
// row per instance, expanded here into the planner's table (mixed_instances.cpp) and in
// mixed_dispatch.cu into the table of launchers, in the same order:
//
//   CG_MIXED_DECODE(name, bf16, bits, fine_groups)
//   CG_MIXED_MMA(name, bf16, bits, m_tiles, fine_groups)
//   CG_MIXED_WGMMA(name, bf16, bits, tile_m, n_tiles, exact_scales, warp_groups, producer,
//                  cp_async)
//
// (n_tiles: the n64 tiles per warpgroup, MixedWgmmaConfig's NTiles; cp_async: the cp.async form
// of a tile that TMA fills otherwise, MixedWgmmaConfig's CpAsync.) The *Instance aliases below
// turn a row into its config type; each generated TU instantiates it with the real element type
// (__half or __nv_bfloat16) and defines `name`, the launcher of a plan on that instance, and
// `name`_occupancy, the CTAs per SM of that launch on the current device; the planner
// instantiates it with a 2-byte stand-in.

#include <cstdint>
#include <type_traits>

#include "cute_gemm/arch/mma_sm80.hpp"

#include "kernels/mixed/mixed_decode_config.hpp"
#include "kernels/mixed/mixed_mma_config.hpp"
#include "kernels/mixed/mixed_plan.hpp"
#include "kernels/mixed/mixed_wgmma_config.hpp"

namespace cute_gemm {
namespace mixed {

// The mma.sync instruction for the activation dtype.
template <bool BF16>
using HalfMmaOp =
    std::conditional_t<BF16, SM80_16x8x16_F32BF16BF16F32_TN, SM80_16x8x16_F32F16F16F32_TN>;

template <class Element, bool BF16, int Bits, bool FineGroups>
using DecodeInstance = MixedDecodeConfig<Element, HalfMmaOp<BF16>, Bits, FineGroups>;
template <class Element, bool BF16, int Bits, int MTiles, bool FineGroups>
using MmaInstance = MixedConfig<Element, HalfMmaOp<BF16>, Bits, MTiles, FineGroups>;
template <class Element, bool BF16, int Bits, int TileM, int NTiles, bool ExactScales,
          int WarpGroups, bool Producer, bool CpAsync>
using WgmmaInstance =
    MixedWgmmaConfig<Element, Bits, TileM, NTiles, ExactScales, WarpGroups, Producer, CpAsync>;

// The planner's view of a config: resources do not depend on the element type beyond its size
// (2 bytes), except the registers ptxas allocates.
using PlannerElement = uint16_t;

// The occupancy model needs the registers per thread ptxas allocates on sm_90a, which only the
// compiler knows: every config declares them (kRegisters / registers(col_warps), read from a build
// with scripts/kernel_resources.py); a kernel change that moves them must update its config.
// tests/test_mixed_gemm_gpu.py (test_planned_occupancy_matches_gpu) holds the plans' ctas_per_sm
// against cudaOccupancyMaxActiveBlocksPerMultiprocessor of the built kernels (mixed_dispatch.cu's
// mixed_instance_occupancy), so a stale count fails there.

// The fields every kind of config has.
template <class Cfg>
MixedInstanceInfo common_instance_info(MixedKernel kernel, char const* name, bool bf16) {
  MixedInstanceInfo i{};
  i.kernel = kernel;
  i.name = name;
  i.bits = Cfg::kBits;
  i.bf16 = bf16;
  i.tile_m = Cfg::kTileM;
  i.stages = Cfg::kStages;
  i.exact_scales = true;
  i.tma_loads = false;
  i.gates_in_registers = false;
  i.max_cluster_splits = 0;
  i.stream_k_partial_floats = 0;
  i.max_k_slices = 1;
  i.sliced_smem_bytes = 0;
  return i;
}

// The fields of the kernels with a fixed CTA tile (mma.sync, wgmma).
template <class Cfg>
MixedInstanceInfo cta_tile_instance_info(MixedKernel kernel, char const* name, bool bf16) {
  MixedInstanceInfo i = common_instance_info<Cfg>(kernel, name, bf16);
  i.tile_n = Cfg::kTileN;
  i.threads = Cfg::kThreads;
  i.smem_bytes = Cfg::kSmemBytes;
  i.registers = Cfg::kRegisters;
  i.min_ctas_per_sm = Cfg::kMinCtasPerSm;
  i.gates_in_registers = Cfg::kGatesInRegisters;
  return i;
}

template <class Cfg>
MixedInstanceInfo mma_instance_info(char const* name, bool bf16) {
  MixedInstanceInfo i = cta_tile_instance_info<Cfg>(MixedKernel::kMma, name, bf16);
  i.fine_groups = Cfg::kFineGroups;
  i.max_k_slices = Cfg::kMaxKSlices;
  i.sliced_smem_bytes = Cfg::smem_bytes(Cfg::kMaxKSlices);
  return i;
}

template <class Cfg>
MixedInstanceInfo wgmma_instance_info(char const* name, bool bf16) {
  MixedInstanceInfo i = cta_tile_instance_info<Cfg>(MixedKernel::kWgmma, name, bf16);
  i.exact_scales = Cfg::kExactScales;
  i.warp_groups = Cfg::kWarpGroups;
  i.producer = Cfg::kProducer;
  i.tma_loads = Cfg::kTmaLoads;
  i.max_cluster_splits = Cfg::kClusterSums ? Cfg::kMaxClusterSplits : 0;
  i.stream_k_partial_floats = Cfg::kStreamK ? Cfg::kStreamKPartialFloats : 0;
  return i;
}

// The decode CTA shape is chosen per call: the planner asks the config through these.
template <class Cfg>
struct DecodeQueries {
  static int rows(int m) { return Cfg::rows_for(m); }
  static int smem_bytes(int rows, int warps, int col_warps) {
    return Cfg::smem_bytes(rows, warps, col_warps);
  }
  static int max_warps(int rows, int col_warps, int smem_limit) {
    return Cfg::max_warps(rows, col_warps, smem_limit);
  }
  static int registers(int col_warps, bool gated, bool single_row) {
    return Cfg::registers(col_warps, gated, single_row);
  }
  static bool single_row(int group, int groups) { return Cfg::single_row_fits(group, groups); }
};

template <class Cfg>
MixedInstanceInfo decode_instance_info(char const* name, bool bf16) {
  using Q = DecodeQueries<Cfg>;
  MixedInstanceInfo i = common_instance_info<Cfg>(MixedKernel::kDecode, name, bf16);
  i.tile_n = Cfg::kWarpN;
  i.fine_groups = Cfg::kFineGroups;
  i.threads = 32 * Cfg::kMaxWarps;
  i.smem_bytes = Cfg::smem_bytes(Cfg::kTileM, Cfg::kMaxWarps, 1);
  i.registers = Q::registers(1, false, false);
  i.min_ctas_per_sm = 1;
  i.gates_in_registers = true;
  i.decode_rows = &Q::rows;
  i.decode_smem_bytes = &Q::smem_bytes;
  i.decode_max_warps = &Q::max_warps;
  i.decode_registers = &Q::registers;
  i.decode_single_row = &Q::single_row;
  return i;
}

}  // namespace mixed
}  // namespace cute_gemm
