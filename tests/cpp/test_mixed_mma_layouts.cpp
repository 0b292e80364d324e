// Host checks of the layouts and thread-value maps of the mma.sync mixed-input GEMM kernel, the
// split-K reduction and the dequantize kernel (kernels/mixed/mixed_mma_config.hpp), for every
// instance the generator builds (fp16/bf16 x INT4/INT8 x 1/2/4 m16 tiles x fine groups):
//   - shared memory: every layout is a bijection onto its buffer, the buffers of a stage do not
//     overlap, everything fits kSmemBytes, and kSmemBytes fits the SM at kMinCtasPerSm CTAs;
//   - the MMA's C and B maps cover their tiles exactly once, A once per warp; the row / column
//     projections (AccRows, AccCols, BCols) and their warp / lane / value parts agree with them;
//   - the weight map covers a stage's weights once and gives each lane the 16 bytes of the n8
//     block its B fragments lie in; the scale copy covers a stage's scales once, in thread order;
//   - ldmatrix reads of the swizzled activation tile and the cp.async stores into it are free of
//     bank conflicts; the A copy covers the tile once;
//   - the split-K reduction's map covers [M, N] once, its workspace layout [splits][M][N] once;
//   - the dequantize kernel's fragment stores cover its tile once without bank conflicts, its
//     write-back covers the tile once, and together with the (n8 block, k block) items they
//     cover [N, K] once.
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "host_check.hpp"
#include "kernels/mixed/mixed_mma_config.hpp"

using namespace cute_gemm;
using namespace cute_gemm::mixed;

template <class Cfg>
void check_mma_config(char const* name) {
  using Mma = typename Cfg::Mma;
  constexpr int BM = Cfg::kTileM, TN = Cfg::kTileN, BK = Cfg::kBlockK;
  constexpr int T = Cfg::kThreads, W = Cfg::kWarps, NB = Cfg::kBlocksPerWarp;
  constexpr int E = int(sizeof(typename Cfg::Element));
  using AccRows = typename Cfg::AccRows;
  using AccCols = typename Cfg::AccCols;
  using BCols = typename Cfg::BCols;
  using WeightTV = typename Cfg::WeightTV;
  using SmemS = typename Cfg::SmemS;
  std::printf("%s: %d threads, tile %dx%d, %d stages, %d bytes of shared memory, %d registers\n",
              name, T, BM, TN, Cfg::kStages, Cfg::kSmemBytes, Cfg::kRegisters);

  // ---- shared memory
  CHECK(covers(coverage(typename Cfg::SmemW{}), Cfg::kBlocksPerCta * 32),
        "%s: SmemW is not a bijection onto the stage's weight units", name);
  CHECK(16 * int(size(typename Cfg::SmemW{})) == Cfg::kWeightBytes, "%s: kWeightBytes", name);
  CHECK(covers(coverage(SmemS{}), 2 * Cfg::kScaleElems),
        "%s: SmemS is not a bijection onto the stage's scales and zeros", name);
  CHECK(Cfg::kScaleOffset >= Cfg::kWeightBytes && Cfg::kScaleOffset % 16 == 0,
        "%s: scales overlap the weights or are misaligned", name);
  CHECK(Cfg::kScaleOffset + 2 * Cfg::kScaleElems * E <= Cfg::kStageBytes &&
            Cfg::kStageBytes % 16 == 0,
        "%s: a stage's scales overflow it", name);
  CHECK(int(SmemS{}(0, 0, 1)) % 8 == 0, "%s: zeros not 16-byte aligned", name);
  {
    // The swizzled activation tile: a bijection onto its stage; stage s is stage 0 plus a constant.
    std::vector<int> hits(Cfg::kAStageElems, 0);
    const auto a = typename Cfg::SmemA{};
    for (int r = 0; r < BM; ++r)
      for (int k = 0; k < BK; ++k) {
        const long o = long(a(r, k));
        if (o >= 0 && o < Cfg::kAStageElems) ++hits[o];
      }
    for (int i = 0; i < Cfg::kAStageElems; ++i)
      CHECK(hits[i] == 1, "%s: SmemA slot %d hit %d times", name, i, hits[i]);
  }
  CHECK(Cfg::kStages * Cfg::kStageBytes + Cfg::kStages * Cfg::kAStageElems * E == Cfg::kSmemBytes,
        "%s: kSmemBytes is not the stages plus the activation tiles", name);
  CHECK(Cfg::kSmemBytes <= 227 * 1024, "%s: %d bytes exceed a CTA's shared memory", name,
        Cfg::kSmemBytes);
  // sm_90: 228 KB per SM, 1 KB of it reserved per CTA.
  CHECK(Cfg::kMinCtasPerSm * (Cfg::kSmemBytes + 1024) <= 228 * 1024,
        "%s: %d CTAs per SM do not fit the shared memory", name, Cfg::kMinCtasPerSm);

  // ---- the MMA's maps
  CHECK(covers(coverage(typename Mma::LayoutC_TV{}), BM * TN), "%s: C map", name);
  CHECK(covers(coverage(typename Mma::LayoutB_TV{}), TN * BK), "%s: B map", name);
  CHECK(covers(coverage(typename Mma::LayoutA_TV{}), BM * BK, W), "%s: A map", name);
  {
    // Projections and their parts against the maps themselves, at every (thread, value).
    const auto c_tv = typename Mma::LayoutC_TV{};
    const auto b_tv = typename Mma::LayoutB_TV{};
    const int vc = int(size<1>(c_tv)), vb = int(size<1>(b_tv));
    for (int tid = 0; tid < T; ++tid) {
      const int lane = tid % 32, warp = tid / 32, t = lane % 4, g = lane / 4;
      const auto thr = make_coord(make_coord(t, g), 0, warp);
      for (int v = 0; v < vc; ++v) {
        const long idx = long(c_tv(tid, v));
        const int row = int(AccRows{}(tid, v)), col = int(AccCols{}(tid, v));
        CHECK(idx == row + long(BM) * col, "%s: AccRows/AccCols differ from the C map", name);
        const auto vcrd = idx2crd(v, shape<1>(c_tv));
        CHECK(int(AccCols{}(make_coord(thr, vcrd))) == col,
              "%s: AccCols at a hierarchical coordinate", name);
        CHECK(mma_warp_part<AccCols>(warp) + mma_lane_part<AccCols>(t, g) +
                      mma_value_part<AccCols>(vcrd) ==
                  col,
              "%s: AccCols parts do not add up", name);
      }
      for (int v = 0; v < vb; ++v) {
        const long idx = long(b_tv(tid, v));
        const int n = int(BCols{}(tid, v));
        CHECK(idx % TN == n, "%s: BCols differs from the B map", name);
        const auto vcrd = idx2crd(v, shape<1>(b_tv));
        CHECK(mma_warp_part<BCols>(warp) + mma_lane_part<BCols>(t, g) +
                      mma_value_part<BCols>(vcrd) ==
                  n,
              "%s: BCols parts do not add up", name);
        // The packed format: lane l holds column 8 * block + l / 4 of each n8 block.
        CHECK(n % 8 == g, "%s: B value of lane %d in column %d", name, lane, n);
      }
      // Accumulator values 0, 1 are adjacent columns of one row (one T2 of scales, one float2 or
      // T2 store); values 2, 3 the same columns 8 rows down.
      for (int m = 0; m < Cfg::kTileM / 16; ++m)
        for (int b = 0; b < NB; ++b) {
          const auto at = [&](int v) {
            return make_coord(int(AccRows{}(make_coord(thr, make_coord(v, m, b)))),
                              int(AccCols{}(make_coord(thr, make_coord(v, m, b)))));
          };
          CHECK(get<0>(at(1)) == get<0>(at(0)) && get<1>(at(1)) == get<1>(at(0)) + 1 &&
                    get<1>(at(0)) % 2 == 0,
                "%s: accumulator pair not adjacent", name);
          CHECK(get<0>(at(2)) == get<0>(at(0)) + 8 && get<1>(at(2)) == get<1>(at(0)) &&
                    get<0>(at(3)) == get<0>(at(1)) + 8 && get<1>(at(3)) == get<1>(at(1)),
                "%s: accumulator values 2, 3 not 8 rows below 0, 1", name);
        }
    }
  }

  // ---- weights: WeightTV covers a stage's units once; the lane's unit of value b is in the n8
  // block of its B fragments b, which is WeightBlocks.
  CHECK(covers(coverage(WeightTV{}), Cfg::kBlocksPerCta * 32), "%s: weight map", name);
  for (int tid = 0; tid < T; ++tid) {
    const int lane = tid % 32, warp = tid / 32, t = lane % 4, g = lane / 4;
    const auto thr = make_coord(make_coord(t, g), 0, warp);
    for (int b = 0; b < NB; ++b) {
      const auto rc = tile_coord<32>(WeightTV{}, make_coord(lane, warp), b);
      CHECK(int(get<0>(rc)) == lane, "%s: a lane reads another lane's weights", name);
      CHECK(long(typename Cfg::SmemW{}(rc)) == long(WeightTV{}(tid, b)),
            "%s: SmemW o WeightTV", name);
      const int blk = int(typename Cfg::WeightBlocks{}(make_coord(make_coord(lane, warp), b)));
      CHECK(blk == int(get<1>(rc)), "%s: WeightBlocks", name);
      for (int j = 0; j < Cfg::kKSteps; ++j)
        for (int v = 0; v < 4; ++v) {
          const int n = int(BCols{}(make_coord(thr, make_coord(v, b, j))));
          CHECK(n / 8 == blk, "%s: B fragment %d of thread %d is in block %d, its weights in %d",
                name, b, tid, n / 8, blk);
        }
    }
  }
  {
    // One LDS.128 per lane and n8 block: the 8 lanes of each phase read 128 contiguous bytes.
    for (int w = 0; w < W; ++w)
      for (int b = 0; b < NB; ++b) {
        std::vector<long> addr;
        for (int l = 0; l < 32; ++l) addr.push_back(16 * long(WeightTV{}(32 * w + l, b)));
        CHECK(conflict_free_16B(addr), "%s: weight read bank conflict", name);
      }
  }

  // ---- scales: the copy covers a stage's (kMaxGroups, kTileN) scales once, thread t writing
  // 16-byte unit t; rows and columns are its projections.
  {
    using G2SScale = typename Cfg::G2SScale;
    const auto tv = typename G2SScale::LayoutTV{};
    CHECK(covers(coverage(tv), Cfg::kMaxGroups * TN), "%s: scale copy map", name);
    for (int tid = 0; tid < Cfg::kMaxGroups * Cfg::kScaleChunks; ++tid) {
      const auto chunk = make_coord(make_coord(tid % Cfg::kScaleChunks, _0{}), _0{});
      const auto row = make_coord(make_coord(_0{}, tid / Cfg::kScaleChunks), _0{});
      const int r = int(typename Cfg::ScaleCopyRows{}(row));
      const int c = int(typename Cfg::ScaleCopyCols{}(chunk));
      CHECK(long(tv(tid, 0)) == r + long(Cfg::kMaxGroups) * c, "%s: scale copy projections", name);
      CHECK(long(SmemS{}(r, c, 0)) == 8L * tid, "%s: scale copy not in thread order", name);
      for (int v = 0; v < 8; ++v)
        CHECK(long(typename Cfg::ScaleCopyDst{}(tid, v)) == long(SmemS{}(r, c + v, 0)),
              "%s: ScaleCopyDst", name);
    }
  }

  // ---- activations: the G2S copy covers its tile once and its 16-byte stores, like the
  // ldmatrix reads, are conflict-free in the swizzled tile.
  {
    using G2S = typename Cfg::G2S;
    CHECK(covers(coverage(typename G2S::LayoutTV{}), G2S::kTileR * G2S::kTileS), "%s: G2S", name);
    std::vector<uint16_t> smem(Cfg::kAStageElems + 64);
    uint16_t* base = smem.data();
    auto sA = make_tensor(base, typename Cfg::SmemA{});
    auto byte_of = [&](uint16_t const* p) { return long(p - base) * 2; };
    const auto probe = get_thread_copy(G2S{}, 0).partition_D(sA);
    for (int i = 0; i < int(size<1>(probe)); ++i)
      for (int w = 0; w < W; ++w) {
        std::vector<long> addr;
        for (int l = 0; l < 32; ++l) {
          const auto part = get_thread_copy(G2S{}, 32 * w + l).partition_D(sA);
          addr.push_back(byte_of(&part(0, i, 0)));
          CHECK(byte_of(&part(7, i, 0)) == addr.back() + 14, "%s: G2S vector split", name);
        }
        CHECK(conflict_free_16B(addr), "%s: cp.async store bank conflict", name);
      }
    using CopyA = typename Cfg::CopyA;
    const auto ld = get_thread_copy(CopyA{}, 0).partition_S(sA);
    for (int w = 0; w < W; ++w)
      for (int i = 0; i < int(size<1>(ld)); ++i)
        for (int j = 0; j < int(size<2>(ld)); ++j) {
          std::vector<long> addr;
          for (int l = 0; l < 32; ++l) {
            const auto part = get_thread_copy(CopyA{}, 32 * w + l).partition_S(sA);
            addr.push_back(byte_of(&part(0, i, j)));
            for (int v = 1; v < 8; ++v)
              CHECK(byte_of(&part(v, i, j)) == addr.back() + 2 * v, "%s: ldmatrix row split", name);
            // The kernel's kLdsmStepsByXor addresses: step 0's offset plus a stage, XOR the step's
            // constant, is the copy's own source of that step in that stage.
            const long step0 = byte_of(&part(0, i, 0));
            for (int s = 0; s < Cfg::kStages; ++s) {
              const long stage = long(s) * Cfg::kAStageBytes;
              CHECK(((step0 + stage) ^ Cfg::a_step_xor_bytes(j)) == addr.back() + stage,
                    "%s: ldmatrix source of step %d is not step 0's XOR a_step_xor_bytes", name, j);
            }
          }
          CHECK(conflict_free_16B(addr), "%s: ldmatrix bank conflict", name);
        }
  }

  // ---- registers: the allocation unit, and within what __launch_bounds__ allows.
  const int cap = 65536 / (T * Cfg::kMinCtasPerSm) / 8 * 8;
  CHECK(Cfg::kRegisters % 8 == 0 && Cfg::kRegisters <= 256 &&
            Cfg::kRegisters <= (cap < 256 ? cap : 256),
        "%s: kRegisters %d (launch bound cap %d)", name, Cfg::kRegisters, cap);
}

void check_split_k_reduce() {
  for (int m : {1, 3, 16, 33}) {
    for (int n : {8, 24, 4096}) {
      const long total4 = long(m) * n / 4;
      const auto tv = SplitKReduceConfig::tv(total4);
      std::map<long, int> hits;
      for (long i = 0; i < total4; ++i) {
        for (int v = 0; v < 4; ++v) hits[long(tv(i, v))]++;
        // The four outputs of a thread stay in one row.
        CHECK(long(tv(i, 0)) / n == long(tv(i, 3)) / n, "split-K: thread %ld straddles a row", i);
      }
      CHECK(covers(hits, long(m) * n), "split-K map misses [%d, %d]", m, n);
      for (int splits : {1, 2, 5}) {
        const auto ws = SplitKReduceConfig::workspace(total4, splits);
        std::map<long, int> units;
        for (int s = 0; s < splits; ++s)
          for (long u = 0; u < total4; ++u) units[long(ws(u, s))]++;
        CHECK(covers(units, total4 * splits), "split-K workspace [%d][%d][%d]", splits, m, n);
      }
    }
  }
}

template <int Bits>
void check_dequant() {
  using Cfg = DequantWeightConfig<Bits>;
  constexpr int BK = Cfg::kBlockK;
  using FragTV = typename Cfg::FragTV;
  using S2G = typename Cfg::S2G;
  // Fragment values: the tile once; values (0, 1) and (2, 3) adjacent pairs at even columns.
  CHECK(covers(coverage(FragTV{}), 8 * BK), "dequant %d: fragment map", Bits);
  for (int lane = 0; lane < 32; ++lane) {
    const auto thr = make_coord(lane % 4, lane / 4);
    for (int j = 0; j < Cfg::kKSteps; ++j)
      for (int h = 0; h < 2; ++h) {
        const auto v0 = make_coord(make_coord(0, h), j), v1 = make_coord(make_coord(1, h), j);
        const auto a = tile_coord<8>(FragTV{}, thr, v0), b = tile_coord<8>(FragTV{}, thr, v1);
        CHECK(get<0>(a) == lane / 4 && get<0>(b) == get<0>(a) && get<1>(b) == get<1>(a) + 1 &&
                  get<1>(a) % 2 == 0,
              "dequant %d: register pair not adjacent", Bits);
        CHECK(long(typename Cfg::SmemTilePairs{}(get<0>(a), get<1>(a) / 2)) * 2 ==
                  long(typename Cfg::SmemTile{}(get<0>(a), get<1>(a))),
              "dequant %d: SmemTilePairs", Bits);
      }
  }
  // Fragment stores: per register, 32 lanes conflict-free; the tile's rows 16-byte aligned.
  for (int j = 0; j < Cfg::kKSteps; ++j)
    for (int h = 0; h < 2; ++h) {
      std::vector<long> addr;
      for (int lane = 0; lane < 32; ++lane) {
        const auto rc = tile_coord<8>(FragTV{}, make_coord(lane % 4, lane / 4),
                                      make_coord(make_coord(0, h), j));
        addr.push_back(4 * long(typename Cfg::SmemTilePairs{}(get<0>(rc), get<1>(rc) / 2)));
      }
      CHECK(conflict_free_words(addr), "dequant %d: fragment store bank conflict", Bits);
    }
  CHECK(Cfg::kRowStride * 2 % 16 == 0, "dequant %d: rows not 16-byte aligned", Bits);
  // Write-back: lane coordinates c = lane + 32 pass cover the tile once, 8 elements each.
  std::map<long, int> wb;
  for (int c = 0; c < 32 * Cfg::kPasses; ++c) {
    const auto rc = tile_coord<S2G::kTileR>(typename S2G::LayoutTV{}, c, _0{});
    for (int v = 0; v < 8; ++v) {
      const auto rv = tile_coord<S2G::kTileR>(typename S2G::LayoutTV{}, c, v);
      CHECK(get<0>(rv) == get<0>(rc) && get<1>(rv) == get<1>(rc) + v,
            "dequant %d: write-back segment split", Bits);
      wb[long(get<0>(rv)) + 8L * get<1>(rv)]++;
    }
    CHECK(get<1>(rc) % 8 == 0, "dequant %d: write-back misaligned", Bits);
  }
  CHECK(covers(wb, 8L * BK), "dequant %d: write-back does not cover the tile", Bits);
  // The whole kernel: items (n8 block, k block), fragment values and the write-back's K limit
  // cover a dense [N, K] once.
  for (int n : {8, 24}) {
    for (int k : {32, 96, 4 * BK}) {
      const int k_blocks = (k + BK - 1) / BK;
      std::map<long, int> hits;
      for (int item = 0; item < n / 8 * k_blocks; ++item) {
        const int kb = item % k_blocks, nb = item / k_blocks;
        const int k_valid = BK < k - kb * BK ? BK : k - kb * BK;
        for (int c = 0; c < 32 * Cfg::kPasses; ++c) {
          const auto rc = tile_coord<S2G::kTileR>(typename S2G::LayoutTV{}, c, _0{});
          if (get<1>(rc) >= k_valid) continue;
          for (int v = 0; v < 8; ++v)
            hits[long(nb * 8 + get<0>(rc)) * k + kb * BK + get<1>(rc) + v]++;
        }
      }
      CHECK(covers(hits, long(n) * k), "dequant %d: [%d, %d] not covered once", Bits, n, k);
    }
  }
}

int main() {
#define CG_MIXED_MMA(op, bits, mt, fine)                \
  check_mma_config<MixedConfig<uint16_t, op, bits, mt, fine>>( \
      #op " int" #bits " m_tiles " #mt " fine " #fine)
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 4, 1, false);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 4, 1, true);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 4, 2, false);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 4, 2, true);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 4, 4, false);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 4, 4, true);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 8, 1, false);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 8, 1, true);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 8, 2, false);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 8, 2, true);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 8, 4, false);
  CG_MIXED_MMA(SM80_16x8x16_F32F16F16F32_TN, 8, 4, true);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 4, 1, false);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 4, 1, true);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 4, 2, false);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 4, 2, true);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 4, 4, false);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 4, 4, true);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 8, 1, false);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 8, 1, true);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 8, 2, false);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 8, 2, true);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 8, 4, false);
  CG_MIXED_MMA(SM80_16x8x16_F32BF16BF16F32_TN, 8, 4, true);
#undef CG_MIXED_MMA
  check_split_k_reduce();
  check_dequant<4>();
  check_dequant<8>();
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
