// Host checks of the layouts of the Hopper wgmma kernels of the mixed-input GEMM
// (kernels/mixed/mixed_wgmma_config.hpp), for every instance the build has
// (generated/mixed_instances.inc):
//   - shared memory: SmemA, SmemW and SmemScales are bijections onto their buffers; the stages,
//     the weights, scales and mbarriers do not overlap and fit kSmemBytes, which fits sm_90's
//     227 KB; every activation stage starts on a 1024-byte boundary;
//   - the wgmma descriptor derived from SmemA (WgmmaDesc) has the layout's strides, and the k16
//     steps start where SmemA puts k = 16 j;
//   - thread-value maps: the weight blocks and columns each lane dequantizes (every 16-byte unit
//     of a stage read by one lane, every column by the 4 lanes of one warp that hold its k), and
//     their agreement with the wgmma A fragment and the packed format; the accumulator map covers
//     the (kTileM, kTileN) tile once and is the wgmma C fragment transposed; the cp.async
//     kernel's activation and scale copies cover their tiles once, 16 contiguous bytes each;
//   - the TMA boxes of the warp-specialized kernel land exactly where the layouts put the data,
//     and its output tiles (SmemOut) are the output map's boxes, written once each by the
//     accumulators without bank conflicts, every value at its 8-row atom's offset
//     (for_staged_values); every tile's accumulators follow the pattern its stores use;
//   - resources: registers within the launch bound, stages as the pipeline needs.
#include <cstdint>
#include <cstdio>
#include <set>
#include <type_traits>
#include <vector>

#include "host_check.hpp"
#include "cute_gemm/wgmma_desc.hpp"
#include "kernels/mixed/mixed_wgmma_config.hpp"

using namespace cute_gemm;
using namespace cute_gemm::mixed;

// The 128-byte swizzle as the PTX ISA and the TMA describe it, for a (rows, 64) box of 16-bit
// elements at a 1024-byte aligned address: byte r * 128 + ((2 c / 16) ^ (r % 8)) * 16 + 2 c % 16.
static long sw128_box_byte(int r, int c) {
  return long(r) * 128 + long(((2 * c / 16) ^ (r % 8)) * 16) + (2 * c) % 16;
}

// The thread coordinate ((t, g), w, wg) of consumer thread T, as the kernels build it.
static auto consumer_coord(int T) {
  return make_coord(make_coord(T % 4, (T % 32) / 4), (T >> 5) & 3, T >> 7);
}

template <class Cfg>
static void check_config(char const* name) {
  constexpr int BM = Cfg::kTileM, BK = Cfg::kBlockK, BN = Cfg::kTileN, S = Cfg::kStages;
  constexpr int NT = Cfg::kNTiles, CT = Cfg::kConsumerThreads;
  std::printf("%s: %d stages, %d bytes of shared memory, %d registers\n", name, S, Cfg::kSmemBytes,
              Cfg::kRegisters);
  const auto sA = typename Cfg::SmemA{};
  const auto sW = typename Cfg::SmemW{};
  const auto sS = typename Cfg::SmemScales{};

  // ---- shared memory: each layout a bijection onto its buffer
  {
    std::vector<long> a, w, s;
    for (int k = 0; k < BK; ++k)
      for (int m = 0; m < BM; ++m) a.push_back(long(sA(m, k)));
    CHECK(bijective(a, long(BM) * BK), "%s: SmemA is not a bijection onto its stage", name);
    for (int b = 0; b < Cfg::kBlocksPerCta; ++b)
      for (int l = 0; l < 32; ++l) w.push_back(long(sW(l, b)));
    CHECK(bijective(w, 32L * Cfg::kBlocksPerCta), "%s: SmemW is not a bijection", name);
    for (int z = 0; z < 2; ++z)
      for (int n = 0; n < BN; ++n)
        for (int r = 0; r < Cfg::kScaleRows; ++r) s.push_back(long(sS(r, n, z)));
    CHECK(bijective(s, 2L * Cfg::kScaleElems), "%s: SmemScales is not a bijection", name);
    // The buffer sizes the kernels use are the layouts' extents.
    CHECK(Cfg::kAStageBytes == BM * BK * 2 && Cfg::kWeightBytes == 32 * 16 * Cfg::kBlocksPerCta &&
              Cfg::kStageBytes == Cfg::kWeightBytes + 4 * Cfg::kScaleElems,
          "%s: stage sizes", name);
  }

  // ---- the whole buffer: regions disjoint, aligned, within kSmemBytes <= 227 KB
  {
    struct Region {
      long begin, end;
      char const* what;
    };
    std::vector<Region> regions;
    for (int s = 0; s < S; ++s) {
      regions.push_back({long(s) * Cfg::kAStageBytes, long(s + 1) * Cfg::kAStageBytes, "A"});
      const long w0 = Cfg::kWeightsOffset + long(s) * Cfg::kStageBytes;
      regions.push_back({w0, w0 + Cfg::kWeightBytes, "weights"});
      regions.push_back({w0 + Cfg::kWeightBytes, w0 + Cfg::kStageBytes, "scales"});
      CHECK(long(s) * Cfg::kAStageBytes % 1024 == 0, "%s: A stage %d not 1024-aligned", name, s);
      CHECK(w0 % 128 == 0 && (w0 + Cfg::kWeightBytes) % 128 == 0,
            "%s: weight / scale stage %d not 128-byte aligned", name, s);
    }
    // The stages' "full" (TMA loads) and "empty" (producer) mbarriers; the cluster sums
    // barrier after them where the tile has it.
    regions.push_back({Cfg::kBarrierOffset, Cfg::kBarrierOffset + Cfg::kBarrierBytes, "bars"});
    CHECK(Cfg::kBarrierOffset % 8 == 0 &&
              Cfg::kBarrierBytes == (Cfg::kProducer ? 16 * S : (Cfg::kTmaLoads ? 8 * S : 0) +
                                                                   (Cfg::kClusterSums ? 8 : 0)),
          "%s: barriers", name);
    if constexpr (Cfg::kClusterSums) {
      CHECK(Cfg::kClusterBarrierOffset == Cfg::kBarrierOffset + Cfg::kBarrierBytes - 8,
            "%s: the cluster sums barrier is the last", name);
    }
    for (size_t i = 0; i < regions.size(); ++i) {
      CHECK(regions[i].begin >= 0 && regions[i].end <= Cfg::kSmemBytes - 1024,
            "%s: %s outside kSmemBytes less the alignment slack", name, regions[i].what);
      for (size_t j = 0; j < i; ++j) {
        CHECK(regions[i].end <= regions[j].begin || regions[j].end <= regions[i].begin,
              "%s: %s overlaps %s", name, regions[i].what, regions[j].what);
      }
    }
    CHECK(Cfg::kSmemBytes == 1024 + Cfg::kBarrierOffset + Cfg::kBarrierBytes, "%s: total", name);
    CHECK(Cfg::kSmemBytes <= 227 * 1024, "%s: %d bytes exceed 227 KB", name, Cfg::kSmemBytes);
  }

  // ---- split-K sums meeting in a cluster (Cfg::kClusterSums): for every split count and both
  // forms, each CTA's units land once each, at a distinct place of their owner's buffer, within
  // the stages; the owner's slots are exactly its units; a unit's values are one output's (gated:
  // its gate and up sums, the up column kBlockN further in the same row).
  if constexpr (Cfg::kClusterSums) {
    auto check_sums = [&](auto gated_tag, auto const& sums, int splits) {
      constexpr bool kGated = decltype(gated_tag)::value;
      const int units = Cfg::cluster_units(kGated), values = Cfg::cluster_unit_values(kGated);
      // What lands, over the stages; a gated unit's two values side by side at an even float
      // (one 8-byte st.async).
      CHECK(long(cosize(sums)) * 4 <= Cfg::kBarrierOffset,
            "%s: cluster sums (%d splits) exceed the stages", name, splits);
      for (int u = 0; u < units; ++u)
        for (int s = 0; s < splits; ++s)
          for (int T = 0; T < CT; ++T)
            CHECK(!kGated || (long(sums(0, T, u / splits, s)) % 2 == 0 &&
                              long(sums(1 % values, T, u / splits, s)) ==
                                  long(sums(0, T, u / splits, s)) + 1),
                  "%s: gated unit %d of thread %d lands as one 8-byte pair", name, u, T);
      std::vector<int> hits(Cfg::kNTiles * Cfg::kAccRegs, 0);  // each accumulator in one unit
      for (int u = 0; u < units; ++u)
        for (int k = 0; k < values; ++k) {
          const int r = Cfg::cluster_tile(u, kGated), v = Cfg::cluster_value(u, k, kGated);
          CHECK(r >= 0 && r < Cfg::kNTiles && v >= 0 && v < Cfg::kAccRegs, "%s: unit %d", name, u);
          hits[r * Cfg::kAccRegs + v] += 1;
          // Gated: value 0 a gate sum (h = 0), value 1 the up sum beside it (gate_up_pairs_in_lane).
          CHECK(!kGated || (k == 0 ? (v >> 1) % 2 == 0 : v == Cfg::cluster_value(u, 0, true) + 2),
                "%s: gated unit %d", name, u);
        }
      for (int h : hits) CHECK(h == 1, "%s: an accumulator in %d units", name, h);
      std::vector<std::vector<long>> landed(splits);  // per owner rank
      for (int rank = 0; rank < splits; ++rank)
        for (int T = 0; T < CT; ++T)
          for (int u = 0; u < units; ++u)
            for (int k = 0; k < values; ++k)
              landed[u % splits].push_back(long(sums(k, T, u / splits, rank)));
      for (int owner = 0; owner < splits; ++owner) {
        const int owned = owner < units ? (units - owner + splits - 1) / splits : 0;
        CHECK(long(landed[owner].size()) == long(owned) * splits * CT * values,
              "%s: owner %d of %d splits", name, owner, splits);
        std::set<long> unique(landed[owner].begin(), landed[owner].end());
        CHECK(unique.size() == landed[owner].size() &&
                  (unique.empty() || *unique.rbegin() < long(cosize(sums))),
              "%s: owner %d of %d splits: units overlap", name, owner, splits);
      }
    };
    for (int splits = 2; splits <= Cfg::kMaxClusterSplits; ++splits) {
      check_sums(std::false_type{}, Cfg::template cluster_sums<false>(splits), splits);
      check_sums(std::true_type{}, Cfg::template cluster_sums<true>(splits), splits);
    }
  }

  // ---- the descriptor derived from SmemA: the layout's strides, the k16 steps' starts
  {
    using Desc = WgmmaDesc<typename Cfg::SmemA>;
    const auto inner = sA.layout_b();
    CHECK(Desc::kStrideBytes == long(inner(8, 0) - inner(0, 0)) * 2 && Desc::kStrideBytes == 1024,
          "%s: stride byte offset %u", name, Desc::kStrideBytes);
    CHECK(Desc::kLeadingBytes == long(inner(0, 8) - inner(0, 0)) * 2 && Desc::kLeadingBytes == 16,
          "%s: leading byte offset %u", name, Desc::kLeadingBytes);
    for (int j = 0; j < BK / 16; ++j) {
      // Row 0 of every line is unswizzled: the step starts at the plain byte offset.
      CHECK(long(sA(0, 16 * j)) * 2 == (j / 4) * BM * 128 + (j % 4) * 32, "%s: k16 step %d", name,
            j);
    }
    CHECK(Desc::make(0) == make_wgmma_desc(0, 16, 1024, WgmmaSwizzle::k128B), "%s: fields", name);
  }

  // ---- which blocks and columns a lane dequantizes
  {
    using BlockTV = typename Cfg::WeightBlockTV;
    using ColTV = typename Cfg::WeightColTV;
    using Cols = typename Cfg::BlockColumns;
    std::vector<long> units;
    std::vector<int> col_hits(BN, 0);
    std::set<long> col_and_t;
    for (int T = 0; T < CT; ++T) {
      const int lane = T % 32, g = lane / 4, t = lane % 4, w = (T / 32) % 4, wg = T / 128;
      const auto thr = consumer_coord(T);
      for (int v = 0; v < 2 * NT; ++v) {
        const int h = v % 2, r = v / 2;
        const int block = int(BlockTV{}(thr, v));
        CHECK(block == int(BlockTV{}(T, v)), "%s: WeightBlockTV at a coordinate", name);
        CHECK(block == 8 * (NT * wg + r) + 2 * w + h, "%s: block of (%d, %d)", name, T, v);
        units.push_back(long(sW(lane, block)));
        const int col = int(ColTV{}(T, v));
        CHECK(col == int(Cols{}(g, block)) && col == 8 * block + g,
              "%s: WeightColTV != BlockColumns o WeightBlockTV at (%d, %d)", name, T, v);
        if (col >= 0 && col < BN) ++col_hits[col];
        col_and_t.insert(long(col) * 4 + t);
      }
    }
    CHECK(bijective(units, 32L * Cfg::kBlocksPerCta),
          "%s: the lanes' 16-byte units do not cover a weight stage once", name);
    for (int c = 0; c < BN; ++c) {
      CHECK(col_hits[c] == 4, "%s: column %d held by %d lanes", name, c, col_hits[c]);
    }
    CHECK(long(col_and_t.size()) == 4L * BN, "%s: a column's 4 lanes are not t = 0..3", name);

    // The wgmma A fragment of n64 tile r: register j = values 2j, 2j + 1 of ALayout, wgmma's row
    // g + 8 (j % 2) of warp w's 16, k 2t (+ 8 for j >= 2) -- the column of block 2r + j % 2
    // (WeightColTV) and the packed format's register r0 (k 2t, 2t + 1) or r1 (k 2t + 8, 2t + 9).
    using A = typename Wgmma64xNx16Layouts<BM>::ALayout;
    for (int T = 0; T < CT; ++T) {
      const int t = T % 4, wg = T / 128;
      for (int r = 0; r < NT; ++r) {
        for (int j = 0; j < 4; ++j) {
          const int idx = int(A{}(T % 128, 2 * j)), next = int(A{}(T % 128, 2 * j + 1));
          const int m = idx % 64, k = idx / 64;
          CHECK(next == idx + 64, "%s: A register %d not two consecutive k", name, j);
          const int col = int(ColTV{}(T, (j % 2) + 2 * r));
          CHECK(64 * (NT * wg + r) + m == col, "%s: A row of (%d, r %d, j %d) is not column %d",
                name, T, r, j, col);
          CHECK(k == 2 * t + 8 * (j / 2), "%s: A k of (%d, j %d)", name, T, j);
        }
      }
    }
  }

  // ---- accumulators: the wgmma C fragment of each n64 tile, transposed onto out
  {
    using Acc = typename Cfg::AccTV;
    using AccRow = typename Cfg::AccRowTV;
    using AccCol = typename Cfg::AccColTV;
    using C = typename Wgmma64xNx16Layouts<BM>::CLayout;
    std::vector<long> elems;
    for (int T = 0; T < CT; ++T) {
      const auto thr = consumer_coord(T);
      const int wg = T / 128;
      for (int r = 0; r < NT; ++r) {
        for (int v = 0; v < Cfg::kAccRegs; ++v) {
          const auto vr = make_coord(v, r);
          const long idx = long(Acc{}(T, vr));
          elems.push_back(idx);
          const int row = int(AccRow{}(thr, vr)), col = int(AccCol{}(T, vr));
          CHECK(idx == row + long(BM) * col, "%s: AccTV != AccRowTV + kTileM AccColTV", name);
          CHECK(row == int(AccRow{}(T, vr)), "%s: AccRowTV at a coordinate", name);
          // wgmma's (M, N) of the C fragment: wgmma's M is N (64 per n64 tile), its N is M.
          const int c = int(C{}(T % 128, v)), wm = c % 64, wn = c / 64;
          CHECK(row == wn && col == 64 * (NT * wg + r) + wm,
                "%s: acc[%d][%d] of thread %d is not the C fragment's element", name, r, v, T);
          // The store's column: that of the weights of value (h, r).
          const int h = (v / 2) % 2;
          CHECK(col == int(typename Cfg::WeightColTV{}(T, h + 2 * r)),
                "%s: accumulator column differs from the weight column", name);
        }
      }
    }
    CHECK(bijective(elems, long(BM) * BN), "%s: AccTV does not cover the tile once", name);
  }

  // ---- the cp.async kernel's copies (its larger tiles)
  if constexpr (!Cfg::kTmaLoads) {
    using ACopy = typename Cfg::ACopyTV;
    const auto a_rows = tile_row_layout<BM>(ACopy{});
    const auto a_cols = tile_col_layout<BM>(ACopy{});
    constexpr int kRowStep = Cfg::kARowStep;
    CHECK(kRowStep % 8 == 0 || Cfg::kAPerThread == 1, "%s: row steps change the swizzle", name);
    std::vector<long> elems;
    for (int T = 0; T < Cfg::kThreads; ++T) {
      const int row0 = int(a_rows(T, 0)), kcol = int(a_cols(T, 0));
      CHECK(row0 == T / Cfg::kAChunksPerRow && kcol == 8 * (T % Cfg::kAChunksPerRow),
            "%s: activation chunk of thread %d", name, T);
      const long soff = long(sA(row0 % BM, kcol));
      for (int j = 0; j < Cfg::kAPerThread; ++j) {
        const int row = row0 + kRowStep * j;
        if (row >= BM) continue;  // the kernel's a_mine
        // One offset per thread plus a constant per chunk; the chunk's 8 elements contiguous.
        CHECK(long(sA(row, kcol)) == soff + long(sA(kRowStep * j, 0)),
              "%s: chunk %d of thread %d moves the swizzle", name, j, T);
        for (int e = 0; e < 8; ++e) {
          const auto v = make_coord(e, j);
          elems.push_back(long(ACopy{}(T, v)));
          CHECK(int(a_rows(T, v)) == row && int(a_cols(T, v)) == kcol + e, "%s: ACopyTV", name);
          CHECK(long(sA(row, kcol + e)) == long(sA(row, kcol)) + e, "%s: chunk split", name);
        }
      }
    }
    CHECK(bijective(elems, long(BM) * BK), "%s: the activation copy misses elements", name);

    using SCopy = typename Cfg::ScaleCopyTV;
    using SDst = typename Cfg::ScaleCopyDst;
    constexpr int kCopiers = Cfg::kScaleRows * Cfg::kScaleChunks;
    CHECK(kCopiers <= Cfg::kThreads, "%s: more scale chunks than threads", name);
    std::vector<long> scale_elems;
    for (int T = 0; T < kCopiers; ++T) {
      const int row = int(tile_row_layout<Cfg::kScaleRows>(SCopy{})(T, 0));
      const int n = int(tile_col_layout<Cfg::kScaleRows>(SCopy{})(T, 0));
      for (int v = 0; v < 8; ++v) {
        const long idx = long(SCopy{}(T, v));
        scale_elems.push_back(idx);
        CHECK(idx == row + long(Cfg::kScaleRows) * (n + v), "%s: ScaleCopyTV", name);
        CHECK(long(SDst{}(T, v)) == long(sS(row, n + v, 0)) && long(SDst{}(T, v)) == 8L * T + v,
              "%s: ScaleCopyDst of thread %d", name, T);
      }
    }
    CHECK(bijective(scale_elems, long(Cfg::kScaleRows) * BN), "%s: the scale copy", name);
  }

  // ---- the TMA boxes land where the layouts put the data
  if constexpr (Cfg::kTmaLoads) {
    CHECK(Cfg::kABoxRows * Cfg::kARowBoxes == BM && Cfg::kABoxK * 2 == 128 &&
              Cfg::kABoxes * Cfg::kABoxK == BK,
          "%s: activation boxes", name);
    for (int h = 0; h < Cfg::kABoxes; ++h)
      for (int b = 0; b < Cfg::kARowBoxes; ++b) {
        const long dst = long(sA(Cfg::kABoxRows * b, Cfg::kABoxK * h)) * 2;
        CHECK(dst % 1024 == 0, "%s: activation box (%d, %d) not 1024-aligned", name, b, h);
        for (int r = 0; r < Cfg::kABoxRows; ++r)
          for (int c = 0; c < Cfg::kABoxK; ++c) {
            CHECK(long(sA(Cfg::kABoxRows * b + r, Cfg::kABoxK * h + c)) * 2 ==
                      dst + sw128_box_byte(r, c),
                  "%s: activation box (%d, %d) element (%d, %d)", name, b, h, r, c);
          }
      }
    // A whole stage's boxes (every row box, every scale and zero row) are its buffers' bytes.
    CHECK(Cfg::tma_stage_bytes(Cfg::kARowBoxes, Cfg::kScaleRows, true) ==
              uint32_t(Cfg::kAStageBytes + Cfg::kStageBytes) &&
              Cfg::tma_stage_bytes(Cfg::kARowBoxes, 1, false) ==
              uint32_t(Cfg::kAStageBytes + Cfg::kWeightBytes + 2 * BN),
          "%s: TMA stage bytes", name);
    // The activation box fitted to M (kFittedABox): M rounded up to 8 below one tile, a whole
    // tile's rows from there; its rows are the first rows of the whole box (checked above), and
    // the stage counts them. Every other configuration keeps its box whatever M.
    for (int m = 1; m <= 2 * BM + 8; ++m) {
      const int rows = Cfg::a_box_rows(m);
      const int fitted = m < BM ? (m + 7) / 8 * 8 : BM;
      CHECK(rows == (Cfg::kFittedABox ? fitted : Cfg::kABoxRows) && rows % 8 == 0 &&
                rows <= Cfg::kABoxRows && (m >= BM || !Cfg::kFittedABox || rows >= m),
            "%s: activation box rows %d at M = %d", name, rows, m);
      CHECK(Cfg::tma_stage_bytes(Cfg::kARowBoxes, 1, false, rows) ==
                uint32_t(Cfg::kARowBoxes * Cfg::kABoxes * rows * 128 + Cfg::kWeightBytes + 2 * BN),
            "%s: TMA stage bytes at M = %d", name, m);
    }
    CHECK(Cfg::kFittedABox == (!Cfg::kProducer && BM == 64), "%s: fitted box", name);
    CHECK(Cfg::kWBoxBlocks == Cfg::kBlocksPerCta && Cfg::kWBoxWords == 128,
          "%s: weight box (%d, %d)", name, Cfg::kWBoxBlocks, Cfg::kWBoxWords);
    for (int b = 0; b < Cfg::kWBoxBlocks; ++b)
      for (int word = 0; word < Cfg::kWBoxWords; ++word) {
        // Box element (b, word) at (b * kWBoxWords + word) * 4 bytes: lane word / 4's unit.
        CHECK((long(b) * Cfg::kWBoxWords + word) * 4 == long(sW(word / 4, b)) * 16 + (word % 4) * 4,
              "%s: weight box element (%d, %d)", name, b, word);
      }
    // The scale (zero) boxes: one row of BN columns (a gated tile: its two halves) contiguous.
    for (int r = 0; r < Cfg::kScaleRows; ++r)
      for (int z = 0; z < 2; ++z)
        for (int c = 0; c < BN; ++c) {
          CHECK(long(sS(r, c, z)) == long(sS(r, 0, z)) + c, "%s: scale box row %d", name, r);
        }
    // A gated tile's weight box (its gate blocks, then its up blocks) holds logical block L =
    // 2 j + h (weight_block: gate block j for h = 0, up block j for h = 1) at h * BN / 16 + j,
    // where each lane reads it (GatedWeightSlotTV) and its scales (BlockColumns of that slot).
    if constexpr (Cfg::kGatesInRegisters) {
      std::vector<long> slots;
      for (int T = 0; T < CT; ++T)
        for (int v = 0; v < 2 * NT; ++v) {
          const int logical = int(typename Cfg::WeightBlockTV{}(consumer_coord(T), v));
          const int slot = int(typename Cfg::GatedWeightSlotTV{}(consumer_coord(T), v));
          CHECK(slot == (logical % 2) * (Cfg::kBlocksPerCta / 2) + logical / 2,
                "%s: gated slot of thread %d value %d", name, T, v);
          if (T % 32 == 0) slots.push_back(slot);
        }
      CHECK(bijective(slots, Cfg::kBlocksPerCta), "%s: gated slots", name);
    }
  } else {
    // Filled by cp.async: INT8's tiles without a producer and INT4's 64-row tile's second form.
    CHECK(!Cfg::kProducer && (Cfg::kBits == 8 || BM == 64) && !Cfg::kFittedABox &&
              Cfg::a_box_rows(1) == Cfg::kABoxRows,
          "%s: a cp.async configuration", name);
  }

  // ---- the accumulators' stores (WgmmaWarpSlice::store, stage_out): value (e, h, i) of n64 tile
  // r is row AccRowTV(e, 0) + 8 i and column WeightColTV(0) + 8 h + 64 r of the CTA tile.
  for (int T = 0; T < CT; ++T) {
    const int col0 = int(typename Cfg::WeightColTV{}(consumer_coord(T), 0));
    for (int r = 0; r < NT; ++r)
      for (int v = 0; v < Cfg::kAccRegs; ++v) {
        const int e = v & 1, h = (v >> 1) & 1, i = v >> 2;
        const int col = int(typename Cfg::WeightColTV{}(consumer_coord(T), h + 2 * r));
        const int row = int(typename Cfg::AccRowTV{}(consumer_coord(T), make_coord(v, r)));
        const int row_e = int(typename Cfg::AccRowTV{}(consumer_coord(T), make_coord(e, 0)));
        CHECK(col == col0 + 8 * h + 64 * r && row == row_e + 8 * i,
              "%s: thread %d value (%d, %d) off the stores' pattern", name, T, v, r);
      }
  }

  // ---- the warp-specialized kernel's output
  if constexpr (Cfg::kProducer) {
    // The output tiles: the output map's (kTileM, 64) box with the 128-byte swizzle, 1024-byte
    // aligned, over the stages; every element written by one consumer thread (the accumulators,
    // as stage_out places them, at their 8-row atoms' offsets), and a warp's stores of one value
    // index hit 8 distinct 4-byte bank words per 16-byte group (no bank conflicts: 4 rows x 16
    // bytes in 4 bank groups).
    const auto sO = typename Cfg::SmemOut{};
    CHECK(Cfg::kOutTileBytes == BM * 128 && Cfg::kOutTileBytes % 1024 == 0 &&
              NT * Cfg::kWarpGroups * Cfg::kOutTileBytes <= Cfg::kBarrierOffset,
          "%s: output tiles", name);
    for (int r = 0; r < BM; ++r)
      for (int c = 0; c < 64; ++c) {
        CHECK(long(sO(r, c)) * 2 == sw128_box_byte(r, c), "%s: output tile element (%d, %d)", name,
              r, c);
      }
    std::vector<int> written(size_t(BM) * BN, 0);
    for (int T = 0; T < CT; ++T)
      for (int r = 0; r < NT; ++r)
        for (int v = 0; v < Cfg::kAccRegs; ++v) {
          const int tile = NT * (T >> 7) + r;
          const int col =
              int(typename Cfg::WeightColTV{}(consumer_coord(T), ((v >> 1) & 1) + 2 * r));
          const int row = int(typename Cfg::AccRowTV{}(consumer_coord(T), make_coord(v, r)));
          CHECK(col / 64 == tile, "%s: thread %d value (%d, %d) outside its output tile", name, T,
                v, r);
          ++written[size_t(tile) * BM * 64 + size_t(sO(row, col - 64 * tile))];
          // stage_out (for_staged_values): value (e, h, i) lies one 8-row swizzle atom per i from
          // value (e, h, 0) (the stores' pattern, above).
          const int row_e = int(typename Cfg::AccRowTV{}(consumer_coord(T), make_coord(v & 1, 0)));
          CHECK(long(sO(row, col - 64 * tile)) ==
                    long(sO(row_e, col - 64 * tile)) + (v >> 2) * long(sO(8, 0)),
                "%s: thread %d value (%d, %d) staged apart from its atom", name, T, v, r);
        }
    for (size_t i = 0; i < written.size(); ++i) {
      CHECK(written[i] == 1, "%s: output tile element %ld written %d times", name, long(i),
            written[i]);
    }
    for (int warp = 0; warp < CT / 32; ++warp)
      for (int v = 0; v < Cfg::kAccRegs; ++v) {
        std::set<long> words;
        std::set<int> banks;
        for (int lane = 0; lane < 32; ++lane) {
          const int T = 32 * warp + lane;
          const int col = int(typename Cfg::WeightColTV{}(consumer_coord(T), (v >> 1) & 1)) % 64;
          const int row = int(typename Cfg::AccRowTV{}(consumer_coord(T), make_coord(v, 0)));
          const long word = sw128_box_byte(row, col) / 4;
          if (words.insert(word).second) banks.insert(int(word % 32));
        }
        CHECK(banks.size() == words.size(), "%s: warp %d value %d: bank conflicts", name, warp, v);
      }
    CHECK(Cfg::kScaleBoxCols == BN, "%s: scale box", name);
    for (int z = 0; z < 2; ++z)
      for (int r = 0; r < Cfg::kScaleRows; ++r)
        for (int c = 0; c < Cfg::kScaleBoxCols; ++c) {
          CHECK(long(sS(r, c, z)) == long(sS(r, 0, 0)) + long(sS(0, 0, z)) + c,
                "%s: scale box row %d element %d", name, r, c);
        }
  }

  // ---- resources
  CHECK(Cfg::kRegisters % 8 == 0 && Cfg::kRegisters <= Cfg::kLaunchRegisters,
        "%s: %d registers, bound %d", name, Cfg::kRegisters, Cfg::kLaunchRegisters);
  CHECK(Cfg::kStages >= (Cfg::kExactScales ? 2 : 3) && Cfg::kStages <= Cfg::kMaxStages,
        "%s: %d stages", name, Cfg::kStages);
  CHECK(Cfg::kThreads == CT + (Cfg::kProducer ? 128 : 0) && BN == 64 * NT * Cfg::kWarpGroups,
        "%s: CTA shape", name);
}

int main() {
  // Every wgmma instance the build has (the generator's table; f16 and bf16 share a config but
  // for the element type, which uint16_t stands in for here).
#define CG_MIXED_DECODE(...)
#define CG_MIXED_MMA(...)
#define CG_MIXED_WGMMA(name, bf16, bits, tm, nt, exact, wg, producer, cp_async)             \
  if (!bf16)                                                                                  \
    check_config<MixedWgmmaConfig<uint16_t, bits, tm, nt, exact, wg, producer, cp_async>>(#name);
#include "kernels/mixed/generated/mixed_instances.inc"
#undef CG_MIXED_WGMMA
#undef CG_MIXED_MMA
#undef CG_MIXED_DECODE
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
