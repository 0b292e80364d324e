// Host checks of the decode kernel's layouts and thread-value maps (kernels/mixed/
// mixed_decode_config.hpp), for every instantiated config (fp16 / bf16 mma x INT4 / INT8 x coarse /
// fine groups) and k slices of col_warps 1, 2 and 4 warps:
//   - shared memory: the weights, scales and zeros of each warp's slice, the activation rows (up
//     to each row count 1..8), the zero row, the mbarriers and the parked sums are bijective onto
//     their buffers, pairwise disjoint, aligned for their accesses and inside smem_bytes(), which
//     they fill, for every warp count that fits 227 KB; the activation swizzle is a bijection;
//   - thread-value maps: the mma's A, B and C maps cover their tiles once; the packed format's B
//     fragments are the A fragments the kernel assembles (a_block, a_block_reg); the ldmatrix
//     along K delivers exactly the B fragments of its two k16 steps; the activation and scale
//     copies cover their tiles once; AccCol / AccToken are the C map's row and column;
//   - no bank conflicts where the kernel relies on it: the weights' cp.async stores and LDS.128
//     reads, the scale copies' stores, the activation copies' stores and the ldmatrix row reads
//     (16 bytes per lane, 8 lanes per phase), the scale and zero reads (2 bytes, 32 lanes) and the
//     parked sums' stores and loads (4 bytes, 32 lanes). The ldmatrix rows past M all read the
//     zero row (one broadcast unit) and are not checked against the real rows.
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "host_check.hpp"
#include "kernels/mixed/mixed_decode_config.hpp"

using namespace cute_gemm;
using namespace cute_gemm::mixed;

// Marks the bytes [at, at + len) of a shared-memory map as `owner`; every byte has one owner.
struct SmemMap {
  std::vector<int> owner;
  int bad = 0;
  explicit SmemMap(int bytes) : owner(bytes, -1) {}
  void mark(long at, long len, int who) {
    for (long b = at; b < at + len; ++b) {
      if (b < 0 || b >= long(owner.size()) || owner[b] != -1) {
        ++bad;
        return;
      }
      owner[b] = who;
    }
  }
};

template <class Cfg>
void check_maps(char const* name) {
  constexpr int BK = Cfg::kBlockK, M = Cfg::kTileM, WN = Cfg::kWarpN;
  constexpr int NB = Cfg::kBlocksPerWarp, RT = Cfg::kRowTiles;
  const int failures_before = failures;

  // ---- the mma's maps over the warp's tiles: A (M32, K), B (N8, K), C (M32, N8), each once.
  {
    std::vector<long> a, b, c;
    for (int i = 0; i < int(size(typename Cfg::LayoutA_TV{})); ++i)
      a.push_back(long(typename Cfg::LayoutA_TV{}(i)));
    for (int i = 0; i < int(size(typename Cfg::LayoutB_TV{})); ++i)
      b.push_back(long(typename Cfg::LayoutB_TV{}(i)));
    for (int i = 0; i < int(size(typename Cfg::LayoutC_TV{})); ++i)
      c.push_back(long(typename Cfg::LayoutC_TV{}(i)));
    CHECK(bijective(a, long(WN) * BK), "%s: the A map does not cover (M32, K) once", name);
    CHECK(bijective(b, long(M) * BK), "%s: the B map does not cover (N8, K) once", name);
    CHECK(bijective(c, long(WN) * M), "%s: the C map does not cover (M32, N8) once", name);
  }
  // AccCol / AccToken: the C map's row (the warp's column) and column (the token); acc[r][v] is
  // value v + 4 r.
  for (int l = 0; l < 32; ++l) {
    for (int r = 0; r < RT; ++r) {
      for (int v = 0; v < 4; ++v) {
        const int vi = v + 4 * r;
        const long idx = long(typename Cfg::LayoutC_TV{}(l, vi));
        const int col = int(typename Cfg::AccCol{}(l, vi));
        const int tok = int(typename Cfg::AccToken{}(l, vi));
        CHECK(idx == col + long(WN) * tok, "%s: AccCol/AccToken differ from the C map", name);
        // The kernel evaluates them at the lane's (t, g) coordinate.
        const auto thr = make_coord(make_coord(l % 4, l / 4), _0{}, _0{});
        CHECK(int(typename Cfg::AccCol{}(thr, vi)) == col &&
                  int(typename Cfg::AccToken{}(thr, vi)) == tok,
              "%s: the (t, g) coordinate differs from the lane", name);
        // The m16n8k16 C fragment: row g + 8 (v / 2) of row tile r, token 2 t + v % 2.
        CHECK(col == 16 * r + l / 4 + 8 * (v / 2) && tok == 2 * (l % 4) + v % 2,
              "%s: lane %d value (%d, %d) is not the C fragment's", name, l, v, r);
      }
    }
  }

  // ---- A from the packed B fragments. Lane 4 g + t holds, of n8 block nb, column 8 nb + g and
  // per k16 step r0 = k 2t, 2t + 1 and r1 = k 2t + 8, 2t + 9 (weight_format.hpp); register j of the
  // row tile's A fragment must hold the same weights as register a_block_reg(j) of block
  // 2 r + a_block(j).
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int b = 0; b < NB; ++b) {
      CHECK(int(typename Cfg::WeightCols{}(l, b)) == 8 * b + g, "%s: WeightCols of lane %d", name,
            l);
    }
    for (int r = 0; r < RT; ++r) {
      for (int s = 0; s < Cfg::kKSteps; ++s) {
        for (int j = 0; j < 4; ++j) {
          for (int x = 0; x < 2; ++x) {
            // The tiled A map at (lane, (value 2j + x, row tile r, step s)): index m + 32 k.
            const int vi = (2 * j + x) + 8 * (r + RT * s);
            const long idx = long(typename Cfg::LayoutA_TV{}(l, vi));
            const int m = int(idx % WN), k = int(idx / WN);
            const int block = 2 * r + Cfg::a_block(j), reg = Cfg::a_block_reg(j);
            const int col = 8 * block + g;
            const int kk = 16 * s + 2 * t + x + 8 * reg;  // the packed fragment's k
            CHECK(m == col && k == kk, "%s: A register %d of lane %d, tile %d, step %d", name, j, l,
                  r, s);
          }
        }
      }
    }
  }

  // ---- ldmatrix along K (LdsmB_x4_K32) for each pair of k16 steps: lane q*8 + i addresses row
  // i of matrix q, 8 consecutive k; register q of lane 4 g + t gets row g, elements 2t, 2t + 1 of
  // matrix q. That must be the B map's values of steps 2p (q = 0, 1) and 2p + 1 (q = 2, 3).
  for (int pr = 0; pr < Cfg::kKSteps / 2; ++pr) {
    int row_of[32], k_of[32];
    for (int l = 0; l < 32; ++l) {
      row_of[l] = int(typename Cfg::CopyBRow{}(l, 0));
      k_of[l] = int(typename Cfg::CopyBCol{}(l, 0)) + 32 * pr;
      for (int v = 0; v < 8; ++v) {
        const long idx = long(typename Cfg::CopyB::SrcLayout{}(l, v));
        CHECK(idx % M == row_of[l] && idx / M + 32 * pr == k_of[l] + v,
              "%s: ldmatrix lane %d value %d is not one row of 8 k", name, l, v);
      }
    }
    for (int q = 0; q < 4; ++q) {
      for (int i = 0; i < 8; ++i) CHECK(row_of[8 * q + i] == i, "%s: matrix %d row %d", name, q, i);
      for (int i = 1; i < 8; ++i)
        CHECK(k_of[8 * q + i] == k_of[8 * q], "%s: matrix %d is not 8 k wide", name, q);
    }
    for (int l = 0; l < 32; ++l) {
      for (int q = 0; q < 4; ++q) {
        for (int e = 0; e < 2; ++e) {
          const int n = l / 4, k = k_of[8 * q] + 2 * (l % 4) + e;  // what ldmatrix delivers
          const long ref = long(typename Cfg::CopyB::RefLayout{}(l, 2 * q + e));
          CHECK(ref == n + M * (k - 32 * pr), "%s: ldmatrix register %d of lane %d", name, q, l);
          const int step = 2 * pr + q / 2, v = 2 * (q % 2) + e;  // b0, b1 of the step
          const long mma = long(typename Cfg::LayoutB_TV{}(l, v + 4 * step));
          CHECK(mma == n + long(M) * k, "%s: ldmatrix register %d of lane %d is not the B map's",
                name, q, l);
        }
      }
    }
  }

  // ---- the activation rows: SmemA bijective onto [0, M * BK); row r < rows stays below
  // rows * BK (a stage holds only the M rows); its swizzle is a bijection of those offsets.
  {
    std::vector<long> offs;
    for (int r = 0; r < M; ++r)
      for (int k = 0; k < BK; ++k) {
        const long o = long(typename Cfg::SmemA{}(r, k));
        offs.push_back(o);
        CHECK(o < long(r + 1) * BK && o >= long(r) * BK, "%s: row %d leaves its row", name, r);
        CHECK(2 * o == Cfg::a_unit_bytes(r, k / 8) + 2 * (k % 8), "%s: a_unit_bytes", name);
      }
    CHECK(bijective(offs, long(M) * BK), "%s: SmemA is not a bijection", name);
    const auto sw = typename Cfg::SmemA{}.layout_a();
    std::vector<long> swz;
    for (long x = 0; x < long(M) * BK; ++x) swz.push_back(long(sw(x)));
    CHECK(bijective(swz, long(M) * BK), "%s: the swizzle is not a bijection", name);
    // ldmatrix phases: the 8 rows of one matrix hit all 32 banks (all 8 rows real, M = 8).
    for (int pr = 0; pr < Cfg::kKSteps / 2; ++pr) {
      std::vector<long> addr;
      for (int l = 0; l < 32; ++l) {
        const int row = int(typename Cfg::CopyBRow{}(l, 0));
        const int k = int(typename Cfg::CopyBCol{}(l, 0)) + 32 * pr;
        addr.push_back(2 * long(typename Cfg::SmemA{}(row, k)));
        // What the kernel computes: the pr % 2 offset plus kPairHalf elements per pr / 2.
        const long kernel = 2 * long(typename Cfg::SmemA{}(row, k - 32 * pr + 32 * (pr % 2))) +
                            (pr / 2) * 2 * Cfg::kPairHalf;
        CHECK(kernel == addr.back(), "%s: pair %d of lane %d", name, pr, l);
      }
      CHECK(conflict_free_16B(addr), "%s: ldmatrix bank conflict (pair %d)", name, pr);
    }
  }

  // ---- the slice: weights and scales bijective onto their regions.
  {
    std::vector<long> w, sc;
    for (int b = 0; b < NB; ++b)
      for (int l = 0; l < 32; ++l) w.push_back(long(typename Cfg::SmemWeights{}(b, l)));
    CHECK(bijective(w, Cfg::kWeightBytes / 16), "%s: SmemWeights", name);
    // The kernel reads unit b * SmemWeights(1, 0) + lane.
    for (int b = 0; b < NB; ++b)
      for (int l = 0; l < 32; ++l)
        CHECK(b * int(typename Cfg::SmemWeights{}(1, 0)) + l ==
                  int(typename Cfg::SmemWeights{}(b, l)),
              "%s: the weight read of block %d, lane %d", name, b, l);
    for (int z = 0; z < 2; ++z)
      for (int gr = 0; gr < Cfg::kScaleRows; ++gr)
        for (int c = 0; c < WN; ++c) sc.push_back(long(typename Cfg::SmemScales{}(c, gr, z)));
    CHECK(bijective(sc, 2L * Cfg::kScaleRows * WN), "%s: SmemScales", name);
    CHECK(Cfg::kWeightBytes + 2 * Cfg::kScaleBytes == Cfg::kSliceBytes, "%s: slice bytes", name);
    // Weight copies and reads (16 bytes per lane): lane l, block b at unit b * 32 + l.
    for (int b = 0; b < NB; ++b) {
      std::vector<long> addr;
      for (int l = 0; l < 32; ++l) addr.push_back(16 * long(typename Cfg::SmemWeights{}(b, l)));
      CHECK(conflict_free_16B(addr), "%s: weight bank conflict (block %d)", name, b);
    }
    // Scale copies: lanes 4 r + c (r < kScaleRows) store 16 bytes each, covering the scales once.
    std::vector<long> sd, saddr;
    for (int l = 0; l < 4 * Cfg::kScaleRows; ++l) {
      const long e = long(typename Cfg::ScaleCopy{}(l));
      CHECK(e == long(typename Cfg::SmemScales{}(8 * (l % 4), l / 4, 0)), "%s: ScaleCopy", name);
      for (int i = 0; i < 8; ++i) sd.push_back(e + i);
      saddr.push_back(Cfg::kWeightBytes + 2 * e);
    }
    CHECK(bijective(sd, long(Cfg::kScaleRows) * WN), "%s: the scale copy", name);
    CHECK(conflict_free_16B(saddr), "%s: scale copy bank conflict", name);
    // Scale and zero reads, 2 bytes by 32 lanes: lane l reads column AccCol(l, 0) + offset.
    for (int gr = 0; gr < Cfg::kScaleRows; ++gr) {
      for (int z = 0; z < 2; ++z) {
        for (int vi = 0; vi < 4 * RT; vi += 2) {
          std::vector<long> addr;
          for (int l = 0; l < 32; ++l) {
            const int col = z ? int(typename Cfg::WeightCols{}(l, vi / 2))
                              : int(typename Cfg::AccCol{}(l, vi));
            addr.push_back(Cfg::kWeightBytes + 2 * long(typename Cfg::SmemScales{}(col, gr, z)));
          }
          CHECK(conflict_free_words(addr), "%s: scale read bank conflict", name);
        }
      }
    }
  }

  // ---- the activation copy of a k slice of cw warps: thread x copies unit x % U of row
  // x / U + j * rows_per_iter (below `rows`); together once each unit of the rows, stores
  // conflict-free per warp.
  for (int cw = 1; cw <= Cfg::kMaxColWarps; cw *= 2) {
    if (!Cfg::col_warps_valid(cw)) continue;
    constexpr int U = BK / 8;
    const int iters = (M * U + 31) / 32, rows_per_iter = 32 * cw / U;
    for (int rows = 1; rows <= M; ++rows) {
      std::vector<long> units;
      for (int j = 0; j < iters; ++j) {
        if (j * rows_per_iter >= rows) break;
        for (int w = 0; w < cw; ++w) {
          std::vector<long> addr;
          for (int l = 0; l < 32; ++l) {
            const int x = 32 * w + l, r = x / U + j * rows_per_iter, u = x % U;
            if (r >= rows) continue;
            units.push_back(long(r) * U + u);
            addr.push_back(Cfg::a_unit_bytes(r, u));
          }
          while (addr.size() % 8) addr.push_back(addr.back());
          CHECK(conflict_free_16B(addr), "%s: activation copy bank conflict (cw %d)", name, cw);
        }
      }
      CHECK(bijective(units, long(rows) * U), "%s: activation copy, cw %d, %d rows", name, cw,
            rows);
    }
  }

  // ---- the whole shared memory, for every row count, col_warps and warp count that fits.
  constexpr int kLimit = 227 * 1024;
  for (int cw = 1; cw <= Cfg::kMaxColWarps; cw *= 2) {
    for (int rows = 1; rows <= M; ++rows) {
      const int max_warps = Cfg::max_warps(rows, cw, kLimit);
      CHECK(max_warps >= cw, "%s: not one k slice fits (cw %d, %d rows)", name, cw, rows);
      for (int warps = cw; warps <= max_warps; warps += cw) {
        const int bytes = Cfg::smem_bytes(rows, warps, cw), slices = warps / cw;
        CHECK(bytes <= kLimit, "%s: smem_bytes over the limit", name);
        SmemMap map(bytes);
        map.mark(0, Cfg::kZeroRowBytes, 0);
        for (int y = 0; y < slices; ++y) map.mark(Cfg::kZeroRowBytes + 8 * y, 8, 1);
        map.mark(Cfg::kZeroRowBytes + 8 * slices, Cfg::kBarrierBytes - 8 * slices, 2);  // unused
        const auto stages = Cfg::stages_layout(rows, cw, slices);
        bool aligned = true;
        for (int y = 0; y < slices; ++y) {
          for (int s = 0; s < Cfg::kStages; ++s) {
            const long st = Cfg::kStagesOffset + long(stages(y, s));
            aligned = aligned && st % 128 == 0;
            for (int c = 0; c < cw; ++c) {
              const long slice = st + long(c) * Cfg::kSliceBytes;
              for (int b = 0; b < NB; ++b)
                for (int l = 0; l < 32; ++l)
                  map.mark(slice + 16 * long(typename Cfg::SmemWeights{}(b, l)), 16, 3);
              for (int z = 0; z < 2; ++z)
                for (int gr = 0; gr < Cfg::kScaleRows; ++gr)
                  for (int col = 0; col < WN; ++col)
                    map.mark(slice + Cfg::kWeightBytes +
                                 2 * long(typename Cfg::SmemScales{}(col, gr, z)),
                             2, 4);
            }
            const long a = st + Cfg::a_offset(cw);
            aligned = aligned && a % 128 == 0;
            for (int r = 0; r < rows; ++r)
              for (int k = 0; k < BK; ++k)
                map.mark(a + 2 * long(typename Cfg::SmemA{}(r, k)), 2, 5);
          }
        }
        const long parked = Cfg::parked_offset(rows, cw, slices);
        aligned = aligned && parked % 16 == 0;
        for (int w = 0; w < warps - cw; ++w)
          for (int vi = 0; vi < Cfg::kAccs; ++vi)
            for (int l = 0; l < 32; ++l)
              map.mark(parked + 4 * long(typename Cfg::SmemParked{}(l, vi, w)), 4, 6);
        int holes = 0;
        for (int o : map.owner) holes += o == -1;
        CHECK(map.bad == 0, "%s: overlapping or out-of-range buffers (cw %d, %d rows, %d warps)",
              name, cw, rows, warps);
        CHECK(holes == 0, "%s: %d bytes of smem_bytes unused (cw %d, %d rows, %d warps)", name,
              holes, cw, rows, warps);
        CHECK(aligned, "%s: a stage or buffer is misaligned", name);
      }
      if (max_warps < Cfg::kMaxWarps) {
        CHECK(Cfg::smem_bytes(rows, max_warps + cw, cw) > kLimit, "%s: max_warps too small", name);
      }
    }
  }
  // The parked sums: a value of all lanes is one 128-byte row (conflict-free stores and loads).
  for (int vi = 0; vi < Cfg::kAccs; ++vi) {
    std::vector<long> addr;
    for (int l = 0; l < 32; ++l) addr.push_back(4 * long(typename Cfg::SmemParked{}(l, vi, 1)));
    CHECK(conflict_free_words(addr), "%s: parked sums bank conflict", name);
  }

  // ---- the single-row copies: each scale, zero-point and activation unit of a k block by one
  // lane, the rest idle, where single_row_fits; an activation unit of row 0 lands where the
  // activation copy's layout puts it (16 bytes per unit, no swizzle on row 0).
  for (int group : {32, 64, 128, 256, 4096}) {
    for (int groups : {1, 2, 33}) {
      if (!Cfg::single_row_fits(group, groups)) continue;
      const int scale_rows = Cfg::kFineGroups ? Cfg::kBlockK / group : 1;
      CHECK(group <= Cfg::kBlockK || groups == 1, "%s: single row with group %d", name, group);
      for (int zero_units : {0, 4 * scale_rows}) {
        std::map<std::pair<int, int>, int> seen;
        for (int l = 0; l < 32; ++l) {
          const auto c = Cfg::small_copy(l, 4 * scale_rows, zero_units);
          if (c.kind != Cfg::kIdleLane) seen[{c.kind, c.unit}]++;
        }
        const int want = 4 * scale_rows + zero_units + Cfg::kBlockK / 8;
        bool once = int(seen.size()) == want;
        for (auto const& [key, n] : seen) {
          const int units = key.first == Cfg::kActUnit     ? Cfg::kBlockK / 8
                            : key.first == Cfg::kScaleUnit ? 4 * scale_rows
                                                           : zero_units;
          once &= n == 1 && key.second >= 0 && key.second < units;
        }
        CHECK(once, "%s: single-row copies (group %d, %d zero units) cover a block's units once",
              name, group, zero_units);
      }
    }
  }
  for (int u = 0; u < Cfg::kBlockK / 8; ++u)
    CHECK(Cfg::a_unit_bytes(0, u) == 16 * u, "%s: row 0's activation unit %d", name, u);
  for (bool gated : {false, true})
    CHECK(Cfg::registers(1, gated, true) % 8 == 0 && Cfg::registers(1, gated, true) <= 128,
          "%s: single-row registers", name);

  // ---- the planner's members.
  CHECK(Cfg::rows_for(0) == 1 && Cfg::rows_for(3) == 3 && Cfg::rows_for(100) == M, "%s: rows_for",
        name);
  CHECK(Cfg::col_warps_valid(1) && Cfg::col_warps_valid(2) && Cfg::col_warps_valid(4) &&
            !Cfg::col_warps_valid(3) && !Cfg::col_warps_valid(8),
        "%s: col_warps_valid", name);
  CHECK(Cfg::max_warps(8, 3, kLimit) == 0, "%s: max_warps of an invalid col_warps", name);
  for (bool gated : {false, true}) {
    CHECK(Cfg::kRegisters % 8 == 0 && Cfg::registers(1, gated) <= Cfg::kRegisters &&
              Cfg::registers(2, gated) <= Cfg::kRegisters &&
              Cfg::registers(2, gated) == Cfg::registers(4, gated) && Cfg::kRegisters <= 128,
          "%s: registers (gated %d)", name, int(gated));
  }
  std::printf("%s: %s (max warps at 8 rows: %d / %d / %d for col_warps 1 / 2 / 4; registers %d, "
              "%d; gated %d, %d)\n",
              name, failures == failures_before ? "ok" : "FAILED", Cfg::max_warps(8, 1, kLimit),
              Cfg::max_warps(8, 2, kLimit), Cfg::max_warps(8, 4, kLimit),
              Cfg::registers(1, false), Cfg::registers(2, false), Cfg::registers(1, true),
              Cfg::registers(2, true));
}

int main() {
  using F16 = SM80_16x8x16_F32F16F16F32_TN;
  using BF16 = SM80_16x8x16_F32BF16BF16F32_TN;
  check_maps<MixedDecodeConfig<uint16_t, F16, 4, false>>("f16 int4");
  check_maps<MixedDecodeConfig<uint16_t, F16, 4, true>>("f16 int4 fine");
  check_maps<MixedDecodeConfig<uint16_t, F16, 8, false>>("f16 int8");
  check_maps<MixedDecodeConfig<uint16_t, F16, 8, true>>("f16 int8 fine");
  check_maps<MixedDecodeConfig<uint16_t, BF16, 4, false>>("bf16 int4");
  check_maps<MixedDecodeConfig<uint16_t, BF16, 4, true>>("bf16 int4 fine");
  check_maps<MixedDecodeConfig<uint16_t, BF16, 8, false>>("bf16 int8");
  check_maps<MixedDecodeConfig<uint16_t, BF16, 8, true>>("bf16 int8 fine");
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
