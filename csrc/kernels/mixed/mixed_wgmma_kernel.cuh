#pragma once
// Mixed-input GEMM on Hopper (sm_90a) with wgmma: out[M, N] = A[M, K] @ dequant(W)^T (+ bias).
//
// wgmma takes only its A operand from registers, and the weights are what must be converted in
// registers, so the kernel computes the transposed product
//     out^T[N, M] = dequant(W)[N, K] @ A^T[K, M]
// with the weights as wgmma's A (64 columns of N per wgmma, dequantized in registers) and the
// activations as its B (the CTA's kTileM rows of A are wgmma's N: 32 .. 256), read from shared
// memory through a matrix descriptor. Against the mma.sync kernel (mixed_gemm_kernel.cuh) it has
//   - no ldmatrix of the activations and half the tensor-core instructions per weight;
//   - asynchronous MMAs: with rounded weights a warp dequantizes k block i while the wgmmas of
//     block i - 1 run;
//   - Hopper's full tensor rate per instruction, which mma.sync does not reach.
// This file holds the kernel whose warps all dequantize and multiply and meet at a CTA barrier
// once per k block, and the parts both wgmma kernels share (WgmmaWarpSlice, for_blocks_in_pairs);
// the warp-specialized kernel (mixed_wgmma_ws_kernel.cuh) adds a producer warpgroup instead.
// Every tile size, shared-memory layout and thread-value map named below is in MixedWgmmaConfig
// (mixed_wgmma_config.hpp).
//
// The weight format needs no change: a lane's mma.sync B fragments of n8 blocks 2p and 2p + 1
// (column g of each, weight_format.hpp) are exactly the wgmma A fragment of wgmma's rows g and
// g + 8 of the 16 rows those blocks form:
//     A regs {a0a1, a2a3, a4a5, a6a7} =
//         {r0(block 2p), r0(block 2p+1), r1(block 2p), r1(block 2p+1)}
// (Wgmma64xNx16Layouts::ALayout, (T128, V8) -> (M64, K16): warp w, lane 4g + t holds wgmma's rows
// 16w + g and 16w + g + 8, columns 2t, 2t + 1, 2t + 8, 2t + 9, as in the m16n8k16 A fragment).
//
// CTA: one or two consumer warpgroups (4 warps each), kNTiles n64 tiles each; warp w of
// warpgroup wg dequantizes n8 blocks 2w and 2w + 1 of each of its n64 tiles (WeightBlockTV). Two
// warpgroups share each activation tile (half the activation traffic per column of N of one) and
// keep two warpgroups' wgmmas in flight on the SM. Per k block the weights, scales (and zeros)
// and the activation tile travel through a kStages-deep pipeline (weights L2 evict-first): in
// INT4's tiles (16 to 64 rows) a few threads issue each stage as TMA boxes and every warp waits
// on the stage's mbarrier (Cfg::kTmaLoads: no copy instructions in the loop of tiles whose time
// is their warps' instruction chains), in the others every thread copies its part with
// cp.async. The activation tile is stored K-major with the 128-byte swizzle (SmemA), and the
// wgmma descriptor is derived from that layout (WgmmaDesc).
//
// Scales, two ways (kExactScales):
//   - rounded (the default, but in INT4's 16- and 32-row tiles at groups of whole k blocks): the
//     registers hold (q - z) * s rounded to the activation dtype, the weight the dense path uses,
//     and the wgmmas accumulate the whole K without stopping at group ends, so a warp dequantizes
//     k block i while the wgmmas of block i - 1 run.
//   - exact (INT4's 16- and 32-row tiles by default where the groups are whole k blocks; the
//     others of those tiles by schedule, scales=exact): registers hold q - z, the wgmmas
//     accumulate exact fp32 sums per group and the scale multiplies them once per group and
//     output (as the mma.sync kernel does: the product uses the exact weight (q - z) * s). Where
//     the groups are whole k blocks these tiles (the per_block loop) dequantize block i into
//     one of two register sets while block i - 1's wgmmas run, and the tensor cores wait
//     only for block i - 1's scaling: a bf16 INT4 word costs 11 instructions to dequantize
//     instead of the rounded weights' 15 (on an H200 3-9% faster at M = 9-16, NOTES.md session
//     63, and 3-8% at M = 17-32, session 64). Finer groups wait for a group's wgmmas at its end,
//     so dequantization and the tensor cores take turns (the 32-row tile that way 4-32% slower
//     than rounded at M = 24-32 on an H100; NOTES.md, session 19).
//   - exact in INT8's warp-specialized tiles (mixed_wgmma_ws_kernel.cuh) where K is one group
//     (per-channel scales): the accumulators sum a (q - z) over the whole K and each column's
//     scale multiplies them once after the loop (WgmmaWarpSlice::scale_columns).
// Split-K partial sums meet in a thread block cluster of the splits (mixed_wgmma_cluster_sums.cuh)
// or go through the fp32 workspace and split_k_reduce_kernel (mixed_epilogue.cuh).

#include <type_traits>

#include "cute_gemm/arch/copy_sm80.hpp"
#include "cute_gemm/arch/grid_dependency_sm90.hpp"
#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "cute_gemm/arch/mma_sm90.hpp"
#include "cute_gemm/arch/tma_sm90.hpp"
#include "cute_gemm/wgmma_desc.hpp"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/mixed_epilogue.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/mixed_wgmma_boxes.cuh"
#include "kernels/mixed/mixed_wgmma_cluster_sums.cuh"
#include "kernels/mixed/mixed_wgmma_config.hpp"
#include "kernels/mixed/mixed_wgmma_stream_k.cuh"
#include "kernels/mixed/stream_k.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// One warp's part of a CTA tile, shared by the cp.async kernel and the warp-specialized one
// (mixed_wgmma_ws_kernel.cuh): the n8 blocks (WeightBlockTV) and columns of N (WeightColTV) that
// consumer thread `tid` dequantizes, its wgmma A fragments and its accumulators (AccTV). Gated:
// a gated tile's stages, whose gate and up blocks lie apart where TMA fills them
// (GatedWeightSlotTV).
template <class Cfg, bool Gated = false>
struct WgmmaWarpSlice {
  using T = typename Cfg::Element;
  using D = Dequant<T>;
  using T2 = typename D::T2;
  static constexpr int NB = Cfg::kBlocksPerWarp;
  // The weight registers of one k block: [wi][b][s][2] = registers (r0, r1) of block b at k16
  // step s of packed word wi, holding q - z (exact scales) or (q - z) * s rounded. Block
  // b = h + 2 r is value (h, r) of WeightBlockTV.
  using BlockRegs = uint32_t[4][NB][Cfg::kStepsPerWord][2];

  int lane, g, t, w, wg;  // consumer thread 128 wg + 32 w + lane, lane = 4 g + t
  int w_dst[NB];     // n8 block within the CTA tile: WeightBlockTV(thread_coord(), b)
  int lane_col[NB];  // column of N within the CTA tile: WeightColTV(thread_coord(), b)
  int w_slot[NB];    // where block w_dst[b] lies in a stage's SmemW
  int s_col[NB];     // where column lane_col[b]'s scale lies in a stage's SmemScales
  bool symmetric;
  // Dequantization constants of the columns lane_col: the symmetric zero point throughout, or the
  // current group's zero points.
  ZeroConstants<T2> zc[NB];

  CG_DEVICE WgmmaWarpSlice(int tid, bool symmetric_)
      : lane(tid % 32), g(lane / 4), t(lane % 4), w((tid >> 5) & 3), wg(tid >> 7),
        symmetric(symmetric_) {
    const auto thr = thread_coord();
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      w_dst[b] = typename Cfg::WeightBlockTV{}(thr, b);
      lane_col[b] = typename Cfg::BlockColumns{}(g, w_dst[b]);  // = WeightColTV(thr, b)
      w_slot[b] = Gated && Cfg::kTmaLoads ? int(typename Cfg::GatedWeightSlotTV{}(thr, b))
                                          : w_dst[b];
      s_col[b] = typename Cfg::BlockColumns{}(g, w_slot[b]);
      zc[b] = D::zero_constants(float(1 << (Cfg::kBits - 1)));
    }
  }

  // The thread's coordinate ((t, g), w, wg) in Cfg::ConsumerThreads.
  CG_DEVICE auto thread_coord() const { return make_coord(make_coord(t, g), w, wg); }

  // Where symmetric weights branch: once per k block, so the symmetric block is one straight
  // run that ptxas interleaves across words, or once per word in INT4's 256-row M tiles, whose
  // straight run needs more registers than the consumers have (C7512). (The per_group loop of
  // exact scales dequantizes with a branch per word itself: there a straight run made ptxas
  // serialize the wgmmas, C7513.)
  static constexpr bool kBranchPerBlock = Cfg::kTileM < 256 || Cfg::kBits == 8;

  // What dequantize_block does once the block's words (and a one-group block's scales, rounded
  // weights) are read, before the arithmetic on them: nothing, or the caller's early check of the
  // next stage (the TMA-filled 16- and 32-row tiles), whose latency the arithmetic then covers.
  struct NoCheck {
    CG_DEVICE void operator()() const {}
  };

  // The k block in stage `st` (weights SmemW, then scales and zeros SmemScales) into registers.
  // RowZero: the block is one group, whose scales (zeros) are row 0 of SmemScales only.
  template <bool RowZero = false, class AfterLoads = NoCheck>
  CG_DEVICE void dequantize_block(char const* st, BlockRegs& a, AfterLoads after_loads = {}) {
    if constexpr (kBranchPerBlock) {
      if (symmetric) {
        dequantize_block_as<true, RowZero>(st, a, after_loads);
      } else {
        // Zero points: no early check, so the next block waits as before (the check's predicate
        // stays clear); with one, whose zero reads must precede it, M = 16 measured 4% slower.
        dequantize_block_as<false, RowZero>(st, a);
      }
    } else {
      dequantize_block_as<false, RowZero>(st, a, after_loads);
    }
  }

  // As dequantize_block<RowZero>, with whether the block is one group (groups of whole k blocks,
  // or one over all of K: whole_block_groups) known at run time: then each column's scale (zero
  // point) is read and converted once per block instead of once per word (an INT4 block's 4 rows
  // of 32 k, INT8's 2). A branch per block, as for symmetric weights, so that each case is one
  // straight run.
  template <class AfterLoads = NoCheck>
  CG_DEVICE void dequantize_block(char const* st, BlockRegs& a, bool one_group,
                                  AfterLoads after_loads = {}) {
    if (one_group) {
      dequantize_block<true>(st, a, after_loads);
    } else {
      dequantize_block<false>(st, a, after_loads);
    }
  }

  // Symmetric: symmetric weights known at compile time (the constants set before the loop);
  // otherwise the run-time `symmetric` decides per word. after_loads: as dequantize_block's.
  template <bool Symmetric, bool RowZero = false, class AfterLoads = NoCheck>
  CG_DEVICE void dequantize_block_as(char const* st, BlockRegs& a, AfterLoads after_loads = {}) {
    constexpr auto sW = typename Cfg::SmemW{};
    constexpr auto sS = typename Cfg::SmemScales{};
    uint4 const* s_w = reinterpret_cast<uint4 const*>(st);
    T const* s_scale = reinterpret_cast<T const*>(st + Cfg::kWeightBytes);
    uint4 w[NB];
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) w[b] = s_w[sW(lane, w_slot[b])];
    // Block b's zero constants from scale row srow's zero points.
    auto load_zeros = [&](int srow, int b) {
      zc[b] = D::zero_constants(HalfTraits<T>::to_float(s_scale[sS(srow, s_col[b], 1)]));
    };
    // A real after_loads (an early stage check) follows the block's words and, where the block is
    // one group, its scales; the per-word scale reads of smaller groups follow it.
    constexpr bool kChecks = !std::is_same_v<AfterLoads, NoCheck>;
    // One group, symmetry decided per word (kBranchPerBlock false): the zero constants once,
    // before the words; ptxas does not merge the same loads across the per-word branches.
    constexpr bool kZerosFirst = RowZero && !Symmetric && !kBranchPerBlock;
    static_assert(!kChecks || (Symmetric && kBranchPerBlock),
                  "an early stage check follows symmetric blocks only");
    if constexpr (kZerosFirst) {
      if (!symmetric) {
        CG_PRAGMA_UNROLL
        for (int b = 0; b < NB; ++b) load_zeros(0, b);
      }
    }
    // A one-group block's scales (rounded weights) before a check: read once, ahead of it.
    constexpr bool kScalesFirst = RowZero && !Cfg::kExactScales && kChecks;
    T2 row_scale[NB];
    if constexpr (kScalesFirst) {
      CG_PRAGMA_UNROLL
      for (int b = 0; b < NB; ++b) row_scale[b] = D::splat_of(s_scale[sS(0, s_col[b], 0)]);
    }
    after_loads();
    CG_PRAGMA_UNROLL
    for (int wi = 0; wi < 4; ++wi) {
      // This word's scale row (groups never split a word: G >= 32).
      const int srow = RowZero ? 0 : wi * Cfg::kKPerWord / 32;
      CG_PRAGMA_UNROLL
      for (int b = 0; b < NB; ++b) {
        // warp-uniform; symmetric weights keep the constants
        if (!kZerosFirst && !Symmetric && !symmetric) load_zeros(srow, b);
        uint32_t r[2 * Cfg::kStepsPerWord];  // (r0, r1) of each k16 step of the word
        dequant_word<T, Cfg::kBits, false, Symmetric>(word_of(w[b], wi), zc[b], r);
        CG_PRAGMA_UNROLL
        for (int s = 0; s < Cfg::kStepsPerWord; ++s) {
          a[wi][b][s][0] = r[2 * s];
          a[wi][b][s][1] = r[2 * s + 1];
        }
        if constexpr (!Cfg::kExactScales) {
          const T2 s2 =
              kScalesFirst ? row_scale[b] : D::splat_of(s_scale[sS(srow, s_col[b], 0)]);
          CG_PRAGMA_UNROLL
          for (int s = 0; s < Cfg::kStepsPerWord; ++s) {
            CG_PRAGMA_UNROLL
            for (int h = 0; h < 2; ++h) {
              a[wi][b][s][h] = D::as_u32(__hmul2(D::as_t2(a[wi][b][s][h]), s2));
            }
          }
        }
      }
    }
  }

  // The wgmma A fragment of n64 tile r at step s of word wi: register j holds values 2j, 2j + 1
  // of Wgmma64xNx16Layouts::ALayout, wgmma's row g + 8 (j % 2) and k 2t + 8 (j / 2): block
  // 2r + j % 2 (WeightBlockTV's h), register r0 or r1 (j / 2) of the packed format.
  CG_DEVICE static void fragment(BlockRegs const& a, int wi, int s, int r, uint32_t (&frag)[4]) {
    frag[0] = a[wi][2 * r][s][0];
    frag[1] = a[wi][2 * r + 1][s][0];
    frag[2] = a[wi][2 * r][s][1];
    frag[3] = a[wi][2 * r + 1][s][1];
  }

  // Where k16 step j starts in the activation tile, in bytes: SmemA at (0, 16 j), a constant (its
  // 128-byte line j / 4 and 32 bytes per step within the line; row 0 is never swizzled, and the
  // hardware swizzles the absolute address).
  CG_DEVICE static constexpr int step_offset(int j) {
    return int(typename Cfg::SmemA{}(0, 16 * j)) * int(sizeof(T));
  }

  // acc[r] += the k block's weights (a) x its activation tile (stage `desc_stage`); Fresh: acc[r] =
  // instead (the first wgmma ignores the old sums).
  template <class Wgmma, bool Fresh = false>
  CG_DEVICE static void mma_block(BlockRegs const& a, uint64_t desc_stage,
                                  float (&acc)[Cfg::kNTiles][Cfg::kAccRegs]) {
    mma_block_from<Wgmma>(a, desc_stage, Fresh ? 0 : 1, acc);
  }
  // As mma_block, the first wgmma's scale_d chosen at run time: 1 adds to acc, 0 starts acc over
  // (no instruction but the wgmmas writes the accumulators, which ptxas needs to keep them in
  // flight).
  template <class Wgmma>
  CG_DEVICE static void mma_block_from(BlockRegs const& a, uint64_t desc_stage, int scale_first,
                                       float (&acc)[Cfg::kNTiles][Cfg::kAccRegs]) {
    CG_PRAGMA_UNROLL
    for (int j = 0; j < Cfg::kKSteps; ++j) {
      const uint64_t desc = desc_stage + uint64_t(step_offset(j) >> 4);
      CG_PRAGMA_UNROLL
      for (int r = 0; r < Cfg::kNTiles; ++r) {
        uint32_t frag[4];
        fragment(a, j / Cfg::kStepsPerWord, j % Cfg::kStepsPerWord, r, frag);
        Wgmma::fma(acc[r], frag, desc, j == 0 ? scale_first : 1);
      }
    }
  }

  // acc += the group scales of row `srow` of a stage's scales (s_scale) x part: value v of n64
  // tile r lies in column lane_col[2 r + (v / 2) % 2] (WeightColTV), its scale at s_col's.
  CG_DEVICE void add_scaled(T const* s_scale, int srow,
                            float const (&part)[Cfg::kNTiles][Cfg::kAccRegs],
                            float (&acc)[Cfg::kNTiles][Cfg::kAccRegs]) const {
    constexpr auto sS = typename Cfg::SmemScales{};
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kNTiles; ++r) {
      const float s_lo = HalfTraits<T>::to_float(s_scale[sS(srow, s_col[2 * r], 0)]);
      const float s_hi = HalfTraits<T>::to_float(s_scale[sS(srow, s_col[2 * r + 1], 0)]);
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccRegs; ++v) {
        acc[r][v] = fmaf((v & 2) ? s_hi : s_lo, part[r][v], acc[r][v]);
      }
    }
  }

  // values[n0 + lane_col[2 r + h]] (fp16 / bf16) as out[r][h] for the thread's columns of the
  // tile at column n0: the warp-specialized INT8 tiles' exact column scales (one group over K)
  // and the bias. 0 past N (InsideN: the caller knows the tile's columns lie inside N) and, if
  // Optional (the bias), where values is null.
  template <bool Optional, bool InsideN = false>
  CG_DEVICE void load_columns(void const* values, MixedGemmParams const& p, int n0,
                              float (&out)[Cfg::kNTiles][2]) const {
    T const* v = static_cast<T const*>(values);
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kNTiles; ++r) {
      CG_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int col = n0 + lane_col[2 * r + h];
        const bool in = (!Optional || v != nullptr) && (InsideN || col < p.n);
        out[r][h] = in ? HalfTraits<T>::to_float(v[col]) : 0.f;
      }
    }
  }
  // Each sum of a (q - z) over the whole K times its column's scale (load_columns): value v of
  // n64 tile r lies in column lane_col[2 r + (v / 2) % 2].
  CG_DEVICE static void scale_columns(float const (&s)[Cfg::kNTiles][2],
                                      float (&acc)[Cfg::kNTiles][Cfg::kAccRegs]) {
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kNTiles; ++r) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccRegs; ++v) acc[r][v] *= s[r][(v >> 1) & 1];
    }
  }

  // Calls place(r, v, at) for each accumulator acc[r][v] with `at`, its element in the thread's
  // staged n64 tile kNTiles wg + r, (kTileM, 64) in SmemOut (128-byte rows, swizzled by the row's
  // low 3 bits): value v = (e, h, i) (AccTV) is row 2 t + e + 8 i, column 16 w + g + 8 h of its
  // tile, whatever r. The swizzle repeats every 8 rows, so `at` is one of the thread's four
  // SmemOut(2 t + e, column(h)) plus i whole 8-row atoms: computed once, then constants (the
  // swizzle per value cost ~6 instructions a store).
  template <class Place>
  CG_DEVICE void for_staged_values(Place&& place) const {
    constexpr auto sO = typename Cfg::SmemOut{};
    constexpr int kAtomRows = 8, kAtomElems = int(sO(kAtomRows, 0));
    // (The host test checks sO(row + 8 i, col) == sO(row, col) + i kAtomElems for every value.)
    static_assert(Cfg::kTileM % kAtomRows == 0, "whole 8-row swizzle atoms");
    int at[2][2];  // [e][h]: value (e, h, 0)'s element
    CG_PRAGMA_UNROLL
    for (int e = 0; e < 2; ++e) {
      CG_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int row = typename Cfg::AccRowTV{}(thread_coord(), make_coord(e + 2 * h, 0));
        at[e][h] = int(sO(row, lane_col[h] - 64 * Cfg::kNTiles * wg));
      }
    }
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kNTiles; ++r) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccRegs; ++v) {
        place(r, v, at[v & 1][(v >> 1) & 1] + (v >> 2) * kAtomElems);
      }
    }
  }

  // The accumulators (+ bias), rounded, into the CTA's output tiles in shared memory (SmemOut;
  // n64 tile kNTiles wg + r at out_tiles + its kOutTileBytes) for the TMA store. Rows past M are
  // written too (the store clips them); columns past N are never read for the bias.
  CG_DEVICE void stage_out(MixedGemmParams const& p,
                           float const (&acc)[Cfg::kNTiles][Cfg::kAccRegs], char* out_tiles,
                           int n0) const {
    float b[Cfg::kNTiles][2];
    load_columns</*Optional=*/true>(p.bias, p, n0, b);
    T* out = reinterpret_cast<T*>(out_tiles + Cfg::kNTiles * wg * Cfg::kOutTileBytes);
    for_staged_values([&](int r, int v, int at) {
      out[r * (Cfg::kOutTileBytes / int(sizeof(T))) + at] =
          HalfTraits<T>::from_float(acc[r][v] + b[r][(v >> 1) & 1]);
    });
  }

  // SiLU(gate) * up of the CTA tile at (m0, n0) of a gated GEMM into out (Cfg::kGatesInRegisters:
  // value (e, 0, i) of n64 tile r is the gate sum of the output whose up sum is value (e, 1, i),
  // in logical column lane_col[2 r], gated output column gated_output_column of it).
  CG_DEVICE void store_gated(MixedGemmParams const& p,
                             float const (&acc)[Cfg::kNTiles][Cfg::kAccRegs], int m0,
                             int n0) const {
    static_assert(Cfg::kGatesInRegisters, "the tile gates in registers");
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kNTiles; ++r) {
      const int col = n0 + lane_col[2 * r];
      if (col >= p.n) continue;
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccRegs; ++v) {
        if ((v >> 1) & 1) continue;  // the up sums, read with their gate sums
        const int row = m0 + typename Cfg::AccRowTV{}(thread_coord(), make_coord(v, r));
        if (row >= p.m) continue;
        store_out_gated<T>(p, row, gated_output_column(col), acc[r][v], acc[r][v + 2]);
      }
    }
  }

  // The accumulators of the CTA tile at (m0, n0) to out, + bias and rounded (or, with split-K, as
  // fp32 sums to this split's workspace slice). In tiles of 64 rows and more, where the tile's
  // columns lie inside N: value (e, h, i) of n64 tile r is row m0 + 2 t + e + 8 i, column
  // n0 + lane_col[0] + 8 h + 64 r (AccTV, WeightColTV; the host test checks the pattern), so two
  // row pointers (e) step 8 rows per i, the columns are immediate offsets and only rows past M are
  // skipped (store_rows): ~3 instructions a value where a bounds check and a 64-bit address per
  // value took ~16 (on an H200 INT4's 64-row tile at M = 64 2-6% faster, INT8's warp-specialized
  // split-K plans 2-7%; NOTES.md session 80). The tile at N's edge, and the 16- and 32-row tiles
  // (8-16 values a thread, whose kernels the added code made 0-2% slower), go value by value
  // (store_values).
  CG_DEVICE void store(MixedGemmParams const& p, float const (&acc)[Cfg::kNTiles][Cfg::kAccRegs],
                       int m0, int n0, bool to_workspace) const {
    if (Cfg::kTileM < 64 || n0 + Cfg::kTileN > p.n) {
      store_values(p, acc, m0, n0, to_workspace);
    } else if (to_workspace) {
      float* const tile =
          static_cast<float*>(p.workspace) + (int64_t(blockIdx.z) * p.m + m0) * p.n + n0;
      store_rows(p, tile, p.n, m0, [&](int r, int v) { return acc[r][v]; });
    } else {
      float b[Cfg::kNTiles][2];
      load_columns</*Optional=*/true, /*InsideN=*/true>(p.bias, p, n0, b);
      T* const tile = static_cast<T*>(p.out) + int64_t(m0) * p.ldo + n0;
      store_rows(p, tile, p.ldo, m0, [&](int r, int v) {
        return HalfTraits<T>::from_float(acc[r][v] + b[r][(v >> 1) & 1]);
      });
    }
  }

  // value(r, v) to element (row, column) of acc[r][v] in the (kTileM, kTileN) tile at `tile`
  // (leading dimension ld, first row m0 of the problem), for the rows inside M: see store.
  template <class E, class Value>
  CG_DEVICE void store_rows(MixedGemmParams const& p, E* tile, int64_t ld, int m0,
                            Value&& value) const {
    int row[2];  // of value (e, 0, 0), within the tile
    E* at[2];    // its element, stepped 8 rows per i
    CG_PRAGMA_UNROLL
    for (int e = 0; e < 2; ++e) {
      row[e] = typename Cfg::AccRowTV{}(thread_coord(), make_coord(e, 0));
      at[e] = tile + row[e] * ld + lane_col[0];
    }
    CG_PRAGMA_UNROLL
    for (int i = 0; i < Cfg::kAccRegs / 4; ++i) {
      CG_PRAGMA_UNROLL
      for (int e = 0; e < 2; ++e) {
        if (m0 + row[e] + 8 * i < p.m) {
          CG_PRAGMA_UNROLL
          for (int h = 0; h < 2; ++h) {
            CG_PRAGMA_UNROLL
            for (int r = 0; r < Cfg::kNTiles; ++r) {
              at[e][8 * h + 64 * r] = value(r, e + 2 * h + 4 * i);
            }
          }
        }
        at[e] += 8 * ld;
      }
    }
  }

  // store, value by value with its bounds checked: acc[r][v] is element (AccRowTV,
  // AccColTV)(thread, (v, r)) of the tile. Its column is that of the weights of value (h, r) =
  // (v / 2 % 2, r), lane_col[2r + h] (wgmma's C and A fragments share their rows).
  CG_DEVICE void store_values(MixedGemmParams const& p,
                              float const (&acc)[Cfg::kNTiles][Cfg::kAccRegs], int m0, int n0,
                              bool to_workspace) const {
    float* ws = static_cast<float*>(p.workspace) + int64_t(blockIdx.z) * p.m * p.n;
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kNTiles; ++r) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccRegs; ++v) {
        const int col = n0 + lane_col[2 * r + ((v >> 1) & 1)];
        const int row = m0 + typename Cfg::AccRowTV{}(thread_coord(), make_coord(v, r));
        if (col >= p.n || row >= p.m) continue;
        if (to_workspace) {
          ws[int64_t(row) * p.n + col] = acc[r][v];
        } else {
          store_out_one<T>(p, row, col, acc[r][v]);
        }
      }
    }
  }
};

// Runs step(i, Int<set>) for k blocks i = first .. end - 1, alternating two register sets (set 0
// for even i - first). PeelOddLast: the loop runs whole pairs and an odd last block follows it;
// otherwise the second step of each pair is conditional inside the loop. With 128 accumulators
// (256-row M tiles), and in the warp-specialized kernel, ptxas serializes every wgmma (C7515,
// C7513) when the second step is conditional; the peeled block takes a third register set, which
// the cp.async kernel's 64-row M tile cannot spare (C7511).
template <bool PeelOddLast, class Step>
CG_DEVICE void for_blocks_in_pairs(int first, int end, Step&& step) {
  if constexpr (PeelOddLast) {
    int i = first;
    CG_PRAGMA_NO_UNROLL
    for (; i + 1 < end; i += 2) {
      step(i, Int<0>{});
      step(i + 1, Int<1>{});
    }
    if (i < end) step(i, Int<0>{});
  } else {
    CG_PRAGMA_NO_UNROLL
    for (int i = first; i < end; i += 2) {
      step(i, Int<0>{});
      if (i + 1 < end) step(i + 1, Int<1>{});
    }
  }
}
// As above for blocks 0 .. n_kb - 1.
template <bool PeelOddLast, class Step>
CG_DEVICE void for_blocks_in_pairs(int n_kb, Step&& step) {
  for_blocks_in_pairs<PeelOddLast>(0, n_kb, step);
}

// grid: (ceil(N / kTileN), ceil(M / kTileM), splits); split s handles k blocks
// [s * blocks_per_split, min((s + 1) * blocks_per_split, k_blocks)). With splits > 1 the partial
// sums go to the workspace (to_workspace) or, in the tiles that can (Cfg::kClusterSums) launched
// in clusters of (1, 1, splits) and not to_workspace, meet in the cluster (WgmmaClusterSums);
// unsplit, to out. Gated: the kernel of gated GEMMs that gate in registers
// (Cfg::kGatesInRegisters; to_workspace false): its logical n8 blocks are the weight's gate and
// up blocks in turn (weight_block). maps: the TMA boxes of a TMA-filled configuration
// (Cfg::kTmaLoads), unused by the others. StreamK (Cfg::kStreamK, MixedPlan::stream_k_ctas):
// grid.x CTAs share the tiles' k blocks evenly (stream_k.hpp, WgmmaStreamK); unsplit.
// early_dependents (MixedPlan::early_dependents): the next kernel in the stream may launch right
// after this one's dependency wait instead of after its main loop.
template <class Cfg, bool Gated = false, bool StreamK = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinCtasPerSm)
    mixed_wgmma_kernel(MixedGemmParams p, int blocks_per_split, bool to_workspace,
                       bool early_dependents, const __grid_constant__ MixedWgmmaMaps maps) {
  static_assert(!Gated || Cfg::kGatesInRegisters, "only tiles that gate in registers");
  static_assert(!StreamK || Cfg::kStreamK, "stream-K runs the 16-row exact TMA-filled tile");
  static_assert(!StreamK || Cfg::kTmaLoads, "stream-K's blocks come by TMA");
#if defined(CG_ARCH_WGMMA_ENABLED)
  using T = typename Cfg::Element;
  using Wgmma = SM90_64xNx16_F32_RS<T, Cfg::kTileM>;
  constexpr int BM = Cfg::kTileM, BK = Cfg::kBlockK, S = Cfg::kStages;
  constexpr int NT = Cfg::kNTiles, NB = Cfg::kBlocksPerWarp, NACC = Cfg::kAccRegs;
  constexpr auto sA = typename Cfg::SmemA{};
  constexpr int kAStageElems = Cfg::kAStageBytes / int(sizeof(T));
  constexpr auto sW = typename Cfg::SmemW{};
  constexpr auto sS = typename Cfg::SmemScales{};
  extern __shared__ uint128_t smem_raw[];
  // The swizzle atoms must start on 1024-byte boundaries of the shared address space.
  const uint32_t raw_addr = detail::smem_addr(smem_raw);
  char* smem = reinterpret_cast<char*>(smem_raw) + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  T* smem_a = reinterpret_cast<T*>(smem);
  char* smem_w = smem + Cfg::kWeightsOffset;

  // Warpgroup wg owns n64 tiles wg * NT .. wg * NT + NT - 1; warp w of it dequantizes their n8
  // blocks 2w and 2w + 1 (WgmmaWarpSlice).
  const int tid = threadIdx.x, lane = tid % 32;
  WgmmaWarpSlice<Cfg, Gated> slice(tid, p.zeros == nullptr);
  const int m0 = blockIdx.y * BM;
  const int k_blocks = mixed::k_blocks(p.k, Cfg::kBits);
  // Stream-K: this CTA's segments, run one after the other through the same pipeline (block i of
  // the CTA is k block work.kb_of(i) of tile work.tile_of(i)); n0 is the first segment's tile.
  StreamKWork work{};
  if constexpr (StreamK) {
    work = stream_k_work(int(blockIdx.x), int(gridDim.x), (p.n + Cfg::kTileN - 1) / Cfg::kTileN,
                         k_blocks);
  }
  const int n0 = (StreamK ? work.seg[0].tile : int(blockIdx.x)) * Cfg::kTileN;
  const int kb_begin = blockIdx.z * blocks_per_split;
  const int n_kb = StreamK ? work.blocks : min(kb_begin + blocks_per_split, k_blocks) - kb_begin;
  const GroupShape groups(p);
  using ClusterSums = WgmmaClusterSums<Cfg, Gated>;
  const bool in_cluster = Cfg::kClusterSums && gridDim.z > 1 && !to_workspace;
  uint64_t* const cluster_bar = reinterpret_cast<uint64_t*>(smem + Cfg::kClusterBarrierOffset);
  if (in_cluster && tid == 0) ClusterSums::init(cluster_bar);

  // ---- global -> shared, one of two ways (Cfg::kTmaLoads).
  constexpr bool kTma = Cfg::kTmaLoads;
  const uint64_t policy = make_l2_evict_first_policy();  // the weights are read once

  // TMA: each stage comes as boxes of `maps` (encode_wgmma_maps), each kind issued by lane 0 of
  // one warp, so that no warp's chain grows by more than a few issues: the weights' box (a gated
  // tile's gate blocks, then its up blocks: GatedWeightSlotTV) by warp 0, which also announces
  // the stage's bytes to its "full" mbarrier (on which every thread waits); one box per scale row
  // by warp 1 and per zero row by warp 2 (only row 0 where the block is one group: the per-block
  // loop reads no other); the activation tile's 128-byte lines by the last warp. Rows past M and
  // columns past K land as zeros; blocks past N as zeros or as a gated tile's up blocks (never
  // stored).
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  // Whether each k block lies in one group (whole_block_groups): the exact tiles' per-block loop
  // and the rounded tiles' one-row scale reads (dequantize_block) rest on it.
  const bool one_group = whole_block_groups(Cfg::kBits, groups.size, p.k);
  const bool block_groups = Cfg::kExactScales && one_group;
  // The launch's contract (the planner's rules; every CTA has a block: stream_k_ctas <= pairs).
  if (StreamK && !block_groups) __trap();
  const int scale_rows = block_groups ? 1 : Cfg::kScaleRows;
  const uint32_t stage_bytes = Cfg::tma_stage_bytes(Cfg::kARowBoxes, scale_rows,
                                                     p.zeros != nullptr, Cfg::a_box_rows(p.m));
  if constexpr (kTma) {
    if (tid == 0) {
      CG_PRAGMA_UNROLL
      for (int s = 0; s < S; ++s) mbarrier_init(full + s, 1);
      fence_proxy_async_shared();  // the initialized barriers are seen by the TMA unit
      tma_prefetch_map(&maps.a);
      tma_prefetch_map(&maps.w);
      tma_prefetch_map(&maps.scales);
    }
    __syncthreads();
  }
  const WgmmaStageBoxes<Cfg, Gated> boxes{maps, m0, n0};
  auto tma_weights = [&](int i, int stage) {  // weights, scales and zeros
    const int kb = StreamK ? work.kb_of(i) : kb_begin + i;
    const WgmmaStageBoxes<Cfg, Gated> block_boxes{
        maps, m0, StreamK ? work.tile_of(i) * Cfg::kTileN : n0};
    char* st = smem_w + stage * Cfg::kStageBytes;
    if (tid == 0) {
      mbarrier_arrive_expect_tx(full + stage, stage_bytes);
      block_boxes.weights(st, full + stage, kb, policy);
    } else if (tid == 32 || (tid == 64 && p.zeros != nullptr)) {
      block_boxes.scale_rows(block_boxes.scales_of(st, tid != 32),
                             tid == 32 ? &maps.scales : &maps.zeros, full + stage, kb, scale_rows,
                             groups);
    }
  };
  auto tma_activations = [&](int i, int stage) {
    if (tid != Cfg::kThreads - 32) return;
    boxes.activations(smem_a + stage * kAStageElems, full + stage,
                      StreamK ? work.kb_of(i) : kb_begin + i, Cfg::kARowBoxes);
  };

  // cp.async. Weights: warp w copies the n8 blocks it dequantizes, each lane its own 16 bytes
  // (and later reads back only those). Blocks past N read block 0 (never stored).
  uint128_t const* w_src[NB];
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) {
    const int nb = n0 / kBlockN + slice.w_dst[b];
    w_src[b] = reinterpret_cast<uint128_t const*>(p.qweight) +
               (int64_t(nb * kBlockN < p.n ? weight_block<Gated>(p, nb) : 0) * k_blocks +
                kb_begin) * kLanes + lane;
  }
  // Scales (and zeros): kScaleRows rows of kTileN columns per stage (SmemScales), one 16-byte
  // chunk per thread (ScaleCopyTV); row r holds the group of k = 32 r in the block.
  static_assert(Cfg::kScaleRows * Cfg::kScaleChunks <= Cfg::kThreads, "one scale chunk per thread");
  const bool scale_copier = tid < Cfg::kScaleRows * Cfg::kScaleChunks;
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
  using ScaleCopy = typename Cfg::ScaleCopyTV;
  const int scale_row = tile_row_layout<Cfg::kScaleRows>(ScaleCopy{})(tid, 0);
  const int scale_n = tile_col_layout<Cfg::kScaleRows>(ScaleCopy{})(tid, 0);
  const int scale_col = n0 + scale_n < p.n ? weight_column<Gated>(p, n0 + scale_n) : 0;
  const int scale_dst = typename Cfg::ScaleCopyDst{}(tid, 0);
  // Activations: 16-byte chunks (row, 8 elements of K), ACopyTV.
  constexpr int kAPerThread = Cfg::kAPerThread;
  T const* a_ptr = static_cast<T const*>(p.a);
  // Thread tid's chunks j are rows a_row0 + kARowStep * j of one column: a row step of a multiple
  // of 8 rows keeps the swizzle phase (row % 8), so one smem offset per thread plus a constant
  // SmemA(kARowStep * j, 0) per chunk.
  constexpr int kRowStep = Cfg::kARowStep;
  using ACopy = typename Cfg::ACopyTV;
  const int a_row0 = tile_row_layout<BM>(ACopy{})(tid, 0);
  const int a_kcol = tile_col_layout<BM>(ACopy{})(tid, 0);
  const int a_soff = sA(a_row0 % BM, a_kcol);
  T const* a_src = a_ptr + int64_t(m0 + (m0 + a_row0 < p.m ? a_row0 : 0)) * p.lda +
                   int64_t(kb_begin) * BK + a_kcol;
  const int64_t a_row_step = int64_t(kRowStep) * p.lda;
  bool a_row_ok[kAPerThread], a_mine[kAPerThread];
  CG_PRAGMA_UNROLL
  for (int j = 0; j < kAPerThread; ++j) {
    const int r = a_row0 + kRowStep * j;
    a_mine[j] = r < BM;
    a_row_ok[j] = a_mine[j] && m0 + r < p.m;
  }
  static_assert(kAPerThread == 1 || kRowStep % 8 == 0, "row steps must keep the swizzle phase");
  // Rows past M are zero-filled once and never loaded again.
  CG_PRAGMA_UNROLL
  for (int s = 0; s < (kTma ? 0 : S); ++s) {
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kAPerThread; ++j) {
      if (a_mine[j] && !a_row_ok[j]) {
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(
            *reinterpret_cast<uint128_t const*>(a_ptr),
            *reinterpret_cast<uint128_t*>(smem_a + s * kAStageElems + a_soff +
                                          sA(kRowStep * j, 0)),
            false);
      }
    }
  }

  auto load_weights = [&](int i, int stage) {
    if (i >= n_kb) return;
    if constexpr (kTma) {
      tma_weights(i, stage);
      return;
    }
    const int kb = kb_begin + i;
    char* st = smem_w + stage * Cfg::kStageBytes;
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL_POLICY::copy(
          w_src[b][int64_t(i) * kLanes],
          reinterpret_cast<uint128_t*>(st)[sW(lane, slice.w_dst[b])], true, policy);
    }
    if (scale_copier) {
      const int grp = groups.row_of(kb * BK + 32 * scale_row);
      const int64_t at = int64_t(grp) * p.n + scale_col;
      T* s_scale = reinterpret_cast<T*>(st + Cfg::kWeightBytes);
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(
          *reinterpret_cast<uint128_t const*>(scales + at),
          *reinterpret_cast<uint128_t*>(s_scale + scale_dst), true);
      if (zeros != nullptr) {
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(
            *reinterpret_cast<uint128_t const*>(zeros + at),
            *reinterpret_cast<uint128_t*>(s_scale + scale_dst + sS(0, 0, 1)), true);
      }
    }
  };
  // Written by an earlier kernel: only after grid_dependency_wait. Columns past K read as zeros.
  auto load_activations = [&](int i, int stage) {
    if (i >= n_kb) return;
    if constexpr (kTma) {
      tma_activations(i, stage);
      return;
    }
    const bool col_ok = (kb_begin + i) * BK + a_kcol < p.k;
    // One pointer walked down the rows (a 64-bit add per chunk, no per-chunk multiply).
    T const* src = a_src + int64_t(i) * BK;
    T* dst = smem_a + stage * kAStageElems + a_soff;
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kAPerThread; ++j) {
      if (a_row_ok[j]) {
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(
            *reinterpret_cast<uint128_t const*>(src),
            *reinterpret_cast<uint128_t*>(dst + sA(kRowStep * j, 0)), col_ok);
      }
      src += a_row_step;
    }
  };

  // Descriptor of stage 0's activation tile, derived from its layout; stage s adds
  // s * kAStageBytes, k16 step j its WgmmaWarpSlice::step_offset.
  const uint64_t desc0 = make_wgmma_desc(sA, detail::smem_addr(smem_a));
  auto desc_at = [&](int stage, int j = 0) {
    return desc0 +
           uint64_t((stage * Cfg::kAStageBytes + WgmmaWarpSlice<Cfg>::step_offset(j)) >> 4);
  };

  // Accumulators: acc[r][v] is value (v, r) of AccTV, (T, V) -> (M kTileM, N kTileN).
  float acc[NT][NACC];
  auto clear_acc = [&] {
    CG_PRAGMA_UNROLL
    for (int r = 0; r < NT; ++r) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < NACC; ++v) acc[r][v] = 0.f;
    }
  };
  clear_acc();
  // acc, the sums of the tile at columns tile_n0.., to out (gated in registers) or to this
  // split's workspace slice (to_ws).
  auto store_tile = [&](int tile_n0, bool to_ws) {
    if constexpr (Gated) {
      slice.store_gated(p, acc, m0, tile_n0);
    } else {
      slice.store(p, acc, m0, tile_n0, to_ws);
    }
  };

  // ---- prologue (programmatic dependent launch: weights before the wait, see the mma.sync kernel)
  constexpr int kAhead = Cfg::kLoadAhead;
  CG_PRAGMA_UNROLL
  for (int s = 0; s < kAhead; ++s) load_weights(s, s);
  grid_dependency_wait();
  // Where the plan says so, the next kernel's CTAs launch now and take the SM slots this grid
  // leaves free (a gated 16-row grid of fewer tiles than slots: down's first stages stream while
  // gate/up runs); still after this kernel's wait, as every trigger in a decode step is.
  if (early_dependents) grid_launch_dependents();
  CG_PRAGMA_UNROLL
  for (int s = 0; s < kAhead; ++s) {
    load_activations(s, s);
    if constexpr (!kTma) cp_async_fence();
  }

  using BlockRegs = typename WgmmaWarpSlice<Cfg>::BlockRegs;
  // The 16- and 32-row TMA-filled tiles: block i - 1's dequantization of symmetric weights checks
  // block i's stage once its own words are in registers (check_next), and block i waits on the
  // stage's mbarrier only where that check found it still in flight. A wait costs ~75-130 cycles
  // a block even where the stage landed long before (NOTES.md session 73); the early check's
  // latency is covered by block i - 1's dequantization arithmetic. The 64-row tile's longer
  // blocks measured no gain from it (NOTES.md session 86).
  constexpr bool kEarlyCheck = kTma && Cfg::kTileM <= 32;
  if constexpr (kEarlyCheck) mbarrier_early_check_declare();
  auto check_next = [&](int i, int end) {
    if constexpr (kEarlyCheck) {
      return [&, i, end] {
        const int next = i + 1;
        mbarrier_early_check(full + next % S, (unsigned(next) / S) & 1u, next < end);
      };
    } else {
      return typename WgmmaWarpSlice<Cfg, Gated>::NoCheck{};
    }
  };
  // Block i's stage has landed in every thread's view; the stage of block i + kAhead, whose last
  // block's wgmmas every warp waited for before this barrier, is refilled.
  auto land_and_refill = [&](int i) {
    if constexpr (kEarlyCheck) {
      mbarrier_wait_parity_after_check(full + i % S, (unsigned(i) / S) & 1u);
    } else if constexpr (kTma) {
      mbarrier_wait_parity_suspend(full + i % S, (unsigned(i) / S) & 1u);
    } else {
      cp_async_wait<kAhead - 1>();
      fence_proxy_async_shared();  // the landed activations are read by the async proxy (wgmma)
    }
    __syncthreads();
    load_weights(i + kAhead, (i + kAhead) % S);
    load_activations(i + kAhead, (i + kAhead) % S);
    if constexpr (!kTma) cp_async_fence();
  };
  // The scales (zeros kScaleElems further) of the k block in stage `stage`.
  auto stage_scales = [&](int stage) {
    return reinterpret_cast<T const*>(smem_w + stage * Cfg::kStageBytes + Cfg::kWeightBytes);
  };

  if constexpr (!Cfg::kExactScales) {
    // Rounded weights, one accumulation over the whole K. The wgmmas of block i - 1 keep the
    // tensor cores busy while block i is dequantized, and those of block i queue behind them, so
    // the warps never wait for their own wgmmas: only block i - 2's must be done (wait_group 1)
    // before its register set (the loop is unrolled by 2 over two sets) is rewritten and, after
    // the barrier (every warp's), its stage refilled.
    // A block of one group has its scales (zeros) in every row of the stage (cp.async and TMA
    // both fill every row here): row 0 is read.
    BlockRegs regs[2];
    auto step = [&](int i, auto set) {
      BlockRegs& a = regs[decltype(set)::value];
      wgmma_wait_group<1>();  // block i - 2's wgmmas are done (this warp's view)
      land_and_refill(i);     // the stage of block i - 2
      const int stage = i % S;
      slice.dequantize_block(smem_w + stage * Cfg::kStageBytes, a, one_group,
                             check_next(i, n_kb));
      wgmma_fence();  // the registers just written feed the wgmmas
      WgmmaWarpSlice<Cfg>::template mma_block<Wgmma>(a, desc_at(stage), acc);
      wgmma_commit_group();
    };
    for_blocks_in_pairs<(Cfg::kTileM >= 256)>(n_kb, step);
  } else {
    // Exact scales: the scale multiplies each group's fp32 sums once its wgmmas are done. Taking
    // turns: a group's sums are waited for at its end, so dequantization and the tensor cores
    // alternate (any group size).
    auto per_group = [&]() {
      float part[NT][NACC];
      bool fresh = true;  // the part sums start over (scale-d = 0) at the next wgmma
      CG_PRAGMA_NO_UNROLL
      for (int i = 0; i < n_kb; ++i) {
        // The previous k block's wgmmas read the stage that is refilled below and registers that
        // are rewritten: they must be done.
        wgmma_wait_group<0>();
        land_and_refill(i);  // the stage of block i + kAhead - S
        const int stage = i % S;
        // The whole k block first, a branch per word: ptxas serializes wgmmas whose input
        // registers are written between them and the wait (C7513).
        BlockRegs a;
        const int kb = kb_begin + i;
        slice.template dequantize_block_as<false>(smem_w + stage * Cfg::kStageBytes, a);
        wgmma_fence();  // the registers just written feed the wgmmas
        CG_PRAGMA_UNROLL
        for (int wi = 0; wi < 4; ++wi) {
          CG_PRAGMA_UNROLL
          for (int s = 0; s < Cfg::kStepsPerWord; ++s) {
            const uint64_t desc = desc_at(stage, wi * Cfg::kStepsPerWord + s);
            CG_PRAGMA_UNROLL
            for (int r = 0; r < NT; ++r) {
              uint32_t frag[4];
              WgmmaWarpSlice<Cfg>::fragment(a, wi, s, r, frag);
              Wgmma::fma(part[r], frag, desc, (fresh && s == 0) ? 0 : 1);
            }
          }
          fresh = false;
          // The group ends with this word, or the split does: acc += s * part. (Groups here are
          // shorter than K and a power of two: per-channel ones are whole k blocks.)
          const int k_end = kb * BK + (wi + 1) * Cfg::kKPerWord;
          const bool last = i == n_kb - 1 && wi == 3;
          const bool group_end = last || (k_end & (groups.size - 1)) == 0;
          if (group_end) {
            wgmma_commit_group();
            wgmma_wait_group<0>();
            slice.add_scaled(stage_scales(stage), wi * Cfg::kKPerWord / 32, part, acc);
            fresh = true;
            wgmma_fence();  // part was read: order that before the next wgmma writes it
          }
        }
        wgmma_commit_group();
      }
    };
    // Scales per block (groups of whole k blocks): block i is dequantized into regs[i % 2]
    // while the wgmmas of block i - 1 run on the other set; then those are waited for, their sums
    // scaled into acc, and block i's wgmmas issued. The tensor cores wait only for that scaling,
    // not for a dequantization. (Reading block i - 1's sums while block i's wgmmas run would
    // need them waited for with block i's in flight, which ptxas serializes, C7514.) Block i
    // refills the stage of block i - 2, whose wgmmas every warp waited for at block i - 1.
    // Blocks first .. end - 1 into acc (a stream-K segment, or the whole split with first 0).
    auto per_block = [&](int first, int end) {
      BlockRegs regs[2];
      float part[NT][NACC];
      CG_PRAGMA_UNROLL
      for (int r = 0; r < NT; ++r) {
        CG_PRAGMA_UNROLL
        for (int v = 0; v < NACC; ++v) part[r][v] = 0.f;  // "block -1": adds nothing
      }
      auto step = [&](int i, auto set) {
        BlockRegs& a = regs[decltype(set)::value];
        land_and_refill(i);  // the stage of block i - 2, waited for at block i - 1
        const int stage = i % S;
        // TMA loads only row 0 of the scales (zeros) here; cp.async repeats it in every row.
        slice.template dequantize_block<kTma>(smem_w + stage * Cfg::kStageBytes, a,
                                              check_next(i, end));
        wgmma_wait_group<0>();  // block i - 1's wgmmas are done
        // The first block scales "block -1"'s zeros by its own (finite) scales.
        slice.add_scaled(stage_scales((i > first ? i - 1 : i) % S), 0, part, acc);
        wgmma_fence();  // the registers just written and part, just read, feed the wgmmas
        WgmmaWarpSlice<Cfg>::template mma_block<Wgmma, true>(a, desc_at(stage), part);
        wgmma_commit_group();
      };
      if constexpr (StreamK) {
        for_blocks_in_pairs<false>(first, end, step);
      } else {
        for_blocks_in_pairs<false>(end, step);
      }
      wgmma_wait_group<0>();
      slice.add_scaled(stage_scales((end - 1) % S), 0, part, acc);
    };
    if constexpr (StreamK) {
      // Each segment through the same stages (the next segment's first blocks are already in
      // flight), then its sums: added to the contributors' and stored (owned), or handed to the
      // owner; acc starts over. Two calls, not a loop over the segments: the hand-over's waits
      // (one lane per warp) inside such a loop would move the pipeline's stage and descriptor
      // arithmetic out of the uniform registers (R2UR before every wgmma).
      auto hand_over = [&](StreamKSegment const& seg) {
        using StreamKSums = WgmmaStreamK<Cfg>;
        if (seg.owned) {
          StreamKSums::add_contributions(p, acc, seg.first_cta, int(blockIdx.x), int(gridDim.x),
                                         tid);
          store_tile(seg.tile * Cfg::kTileN, false);
        } else {
          StreamKSums::contribute(p, acc, int(blockIdx.x), int(gridDim.x), tid);
        }
      };
      per_block(0, work.seg[0].blocks);
      hand_over(work.seg[0]);
      if (work.segments > 1) {
        clear_acc();
        per_block(work.seg[0].blocks, work.blocks);
        hand_over(work.seg[1]);
      }
    } else if (block_groups) {
      per_block(0, n_kb);
    } else {
      per_group();
    }
  }
  wgmma_wait_group<0>();
  if constexpr (!kTma) cp_async_wait<0>();
  grid_launch_dependents();

  if constexpr (StreamK) {
    return;  // every segment stored or handed over above
  }
  if (in_cluster) {
    if constexpr (Cfg::kClusterSums) {
      ClusterSums::add_and_store(slice, p, acc, smem, cluster_bar, m0, n0, tid);
    }
  } else {
    store_tile(n0, to_workspace);
  }
#else
  (void)p, (void)blocks_per_split, (void)to_workspace, (void)early_dependents, (void)maps;
#endif
}

}  // namespace mixed
}  // namespace cute_gemm
