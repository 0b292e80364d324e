#pragma once

// The TMA boxes that fill a wgmma k block's stage (Cfg::kTmaLoads): the launch's tensor maps
// (encoded by encode_wgmma_maps, mixed_wgmma_launch.cuh) and the copies of one stage's packed
// weights, scale (zero) rows and activation rows into their places in the stage
// (MixedWgmmaConfig's SmemW, SmemScales, SmemA). Shared by the cp.async kernel, where one lane of
// a different warp issues each kind, and the warp-specialized kernel, whose producer thread
// issues them all. Every box completes on the stage's "full" mbarrier, whose expected bytes the
// issuer announces (MixedWgmmaConfig::tma_stage_bytes).

#include <cuda.h>

#include "cute_gemm/arch/tma_sm90.hpp"
#include "cute_gemm/config.hpp"
#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// The tensor maps of one launch of a TMA-filled configuration (Cfg::kTmaLoads; kernel parameters,
// __grid_constant__; not encoded for the others).
struct MixedWgmmaMaps {
  CUtensorMap a;       // activations [M, K], (kABoxRows, kABoxK) boxes, 128-byte swizzle
  CUtensorMap w;       // packed weights [N / 8, k_blocks * 128] 32-bit words, (kWBoxBlocks,
                       // kWBoxWords) boxes; gated tiles: [2][N / 16][k_blocks * 128], (2,
                       // kWBoxBlocks / 2, kWBoxWords) boxes (encode_wgmma_maps)
  CUtensorMap scales;  // [groups, N], (1, kScaleBoxCols) boxes; gated tiles: [groups][2][N / 2],
                       // (1, 2, kScaleBoxCols / 2) boxes
  CUtensorMap zeros;   // as scales; unused (not encoded) for symmetric weights
  CUtensorMap out;     // out [M, N], (kTileM rows, 64 columns) boxes, 128-byte swizzle (SmemOut);
                       // the warp-specialized kernel's, unless the sums go to the workspace
};

// The boxes of the CTA tile at (m0, n0): its k block kb's stage comes as weights(), scale_rows()
// (and for asymmetric weights scale_rows() of the zeros) and activations(). Gated: a gated tile,
// whose gate blocks and up blocks come from the two halves of the weights in one 3-D box (the gate
// blocks first: GatedWeightSlotTV).
template <class Cfg, bool Gated = false>
struct WgmmaStageBoxes {
  using T = typename Cfg::Element;
  MixedWgmmaMaps const& maps;
  int m0, n0;

  // The packed weights of k block kb into `stage` (SmemW): blocks n0 / 8.. (a gated tile: n0 / 16..
  // of each half, weight_block), read once (`policy`: evict first).
  CG_DEVICE void weights(char* stage, uint64_t* full, int kb, uint64_t policy) const {
    if constexpr (Gated) {
      tma_load_3d(stage, &maps.w, full, kb * Cfg::kWBoxWords, n0 / (2 * kBlockN), 0, policy);
    } else {
      tma_load_2d(stage, &maps.w, full, kb * Cfg::kWBoxWords, n0 / kBlockN, policy);
    }
  }

  // Rows 0 .. rows - 1 of k block kb's scales (`map`: maps.scales) or zeros (maps.zeros) to
  // `rows_dst`, their place in the stage (SmemScales' row 0 of either): row r holds the group of
  // k = 32 r in the block; columns n0.. (a gated tile: n0 / 2.. of each half).
  CG_DEVICE void scale_rows(T* rows_dst, CUtensorMap const* map, uint64_t* full, int kb, int rows,
                            GroupShape const& groups) const {
    constexpr auto sS = typename Cfg::SmemScales{};
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kScaleRows; ++r) {
      if (r >= rows) break;
      const int grp = groups.row_of(kb * Cfg::kBlockK + 32 * r);
      if constexpr (Gated) {
        tma_load_3d(rows_dst + sS(r, 0, 0), map, full, n0 / 2, 0, grp);
      } else {
        tma_load_2d(rows_dst + sS(r, 0, 0), map, full, n0, grp);
      }
    }
  }
  // Where SmemScales' scales (zeros: true) of `stage` begin.
  CG_DEVICE static T* scales_of(char* stage, bool zeros) {
    constexpr auto sS = typename Cfg::SmemScales{};
    return reinterpret_cast<T*>(stage + Cfg::kWeightBytes) + (zeros ? sS(0, 0, 1) : 0);
  }

  // Row boxes 0 .. row_boxes - 1 of k block kb's activation tile into `stage` (SmemA), each as
  // kABoxes boxes of 128-byte lines; rows past M and columns past K land as zeros.
  CG_DEVICE void activations(T* stage, uint64_t* full, int kb, int row_boxes) const {
    constexpr auto sA = typename Cfg::SmemA{};
    CG_PRAGMA_UNROLL
    for (int h = 0; h < Cfg::kABoxes; ++h) {
      CG_PRAGMA_UNROLL
      for (int r = 0; r < Cfg::kARowBoxes; ++r) {
        if (r >= row_boxes) break;
        tma_load_2d(stage + sA(Cfg::kABoxRows * r, Cfg::kABoxK * h), &maps.a, full,
                    kb * Cfg::kBlockK + Cfg::kABoxK * h, m0 + Cfg::kABoxRows * r);
      }
    }
  }
};

}  // namespace mixed
}  // namespace cute_gemm
