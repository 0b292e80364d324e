// Host checks of every thread-value map and shared-memory access of the half-precision GEMM
// kernel, for each configuration it is instantiated with (generated/gemm_configs.inc):
//   - the MMA's C map covers the CTA tile exactly once; A (B) is held by each of the WarpsN
//     (WarpsM) warps that need it;
//   - each ldmatrix instruction's 32 lanes address exactly the elements of the fragments it fills,
//     8 consecutive k per lane (one 16-byte row);
//   - the G2S and S2G copies cover their tiles exactly once;
//   - no shared-memory bank conflicts: cp.async stores and S2G loads (16 B per thread, served 8
//     threads at a time), ldmatrix row reads (8 rows per matrix), and the epilogue's 2-byte
//     accumulator stores (32 lanes at once).
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "host_check.hpp"
#include "kernels/gemm/gemm_config.hpp"

using namespace cute_gemm;

template <class Cfg>
void check_config(char const* name) {
  using Mma = typename Cfg::Mma;
  constexpr int BM = Cfg::kBM, BN = Cfg::kBN, BK = Cfg::kBK;
  constexpr int T = Cfg::kThreads;
  constexpr int WM = Mma::kWarpsM, WN = Mma::kWarpsN;
  std::printf("%s: %d threads\n", name, T);

  // ---- MMA maps
  {
    auto c = coverage(typename Mma::LayoutC_TV{});
    CHECK(int(c.size()) == BM * BN, "%s: C map covers %d of %d", name, int(c.size()), BM * BN);
    for (auto const& kv : c) CHECK(kv.second == 1, "%s: C element %ld held %d times", name, kv.first, kv.second);
    auto a = coverage(typename Mma::LayoutA_TV{});
    CHECK(int(a.size()) == BM * BK, "%s: A map covers %d of %d", name, int(a.size()), BM * BK);
    for (auto const& kv : a) CHECK(kv.second == WN, "%s: A element held %d times", name, kv.second);
    auto b = coverage(typename Mma::LayoutB_TV{});
    CHECK(int(b.size()) == BN * BK, "%s: B map covers %d of %d", name, int(b.size()), BN * BK);
    for (auto const& kv : b) CHECK(kv.second == WM, "%s: B element held %d times", name, kv.second);
  }

  // ---- shared buffers on the host; addresses are offsets from their base
  std::vector<uint16_t> smem(Cfg::kSmemBytes / 2 + 64);
  uint16_t* base = smem.data();
  auto sA = make_tensor(base, typename Cfg::SmemA{});
  auto sB = make_tensor(base + BM * BK * Cfg::kStages, typename Cfg::SmemB{});
  auto byte_of = [&](uint16_t const* p) { return long(p - base) * 2; };

  // ---- ldmatrix: lanes address whole fragments' elements; 8 rows per matrix conflict-free
  auto check_ldsm = [&](auto copy, auto s_tensor, char const* op) {
    using Copy = decltype(copy);
    for (int w = 0; w < T / 32; ++w) {
      const auto probe = get_thread_copy(Copy{}, 32 * w).partition_S(s_tensor);
      const int R = int(size<1>(probe)), S = int(size<2>(probe));
      for (int i = 0; i < R; ++i) {
        for (int j = 0; j < S; ++j) {
          std::vector<long> rows_addr;
          for (int l = 0; l < 32; ++l) {
            const auto part = get_thread_copy(Copy{}, 32 * w + l).partition_S(s_tensor);
            const long a0 = byte_of(&part(0, i, j, 0));
            rows_addr.push_back(a0);
            for (int v = 1; v < 8; ++v)
              CHECK(byte_of(&part(v, i, j, 0)) == a0 + 2 * v, "%s %s: lane values not one row", name, op);
          }
          CHECK(conflict_free_16B(rows_addr), "%s %s: ldmatrix bank conflict (warp %d, %d, %d)",
                name, op, w, i, j);
        }
      }
    }
  };
  check_ldsm(typename Cfg::CopyA{}, sA, "A");
  check_ldsm(typename Cfg::CopyB{}, sB, "B");

  // ldmatrix coverage against the MMA fragments, in tile-index space.
  auto check_ldsm_cover = [&](auto src_tv, auto mma_tv, int tile_r, int v_atom, char const* op) {
    const int f = 8 / v_atom;
    const int R = int(size<1>(layout<1>(src_tv))), S = int(size<2>(layout<1>(src_tv)));
    for (int w = 0; w < T / 32; ++w)
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < S; ++j) {
          std::multiset<long> got, want;
          for (int l = 0; l < 32; ++l) {
            const int t = 32 * w + l;
            for (int v = 0; v < 8; ++v) {
              const long idx = long(src_tv(t + T * (v + 8 * (i + R * j))));
              got.insert(idx);
              if (v > 0) {
                const long prev = long(src_tv(t + T * (v - 1 + 8 * (i + R * j))));
                CHECK(idx == prev + tile_r, "%s %s: lane's values are not consecutive k", name, op);
              }
            }
            for (int u = 0; u < f; ++u)
              for (int v = 0; v < v_atom; ++v)
                want.insert(long(mma_tv(t + T * (v + v_atom * ((f * i + u) + f * R * j)))));
          }
          CHECK(got == want, "%s %s: instruction (%d,%d) of warp %d misses fragment elements", name, op, i, j, w);
        }
  };
  check_ldsm_cover(typename Cfg::CopyA::LayoutSrcTV{}, typename Mma::LayoutA_TV{}, BM, 8, "A");
  check_ldsm_cover(typename Cfg::CopyB::LayoutSrcTV{}, typename Mma::LayoutB_TV{}, BN, 4, "B");

  // ---- G2S: coverage and conflict-free 16-byte stores into the swizzled buffers
  {
    using G2S = typename Cfg::G2S;
    auto c = coverage(typename G2S::LayoutTV{});
    CHECK(int(c.size()) == G2S::kTileR * G2S::kTileS, "%s: G2S covers %d", name, int(c.size()));
    for (auto const& kv : c) CHECK(kv.second == 1, "%s: G2S element copied %d times", name, kv.second);
    auto check_g2s = [&](auto s_tensor, char const* op) {
      const auto probe = get_thread_copy(G2S{}, 0).partition_D(s_tensor);
      for (int i = 0; i < int(size<1>(probe)); ++i)
        for (int w = 0; w < T / 32; ++w) {
          std::vector<long> addr;
          for (int l = 0; l < 32; ++l) {
            const auto part = get_thread_copy(G2S{}, 32 * w + l).partition_D(s_tensor);
            addr.push_back(byte_of(&part(0, i, 0, 0)));
            CHECK(byte_of(&part(7, i, 0, 0)) == addr.back() + 14, "%s %s: G2S vector split", name, op);
          }
          CHECK(conflict_free_16B(addr), "%s %s: cp.async store bank conflict (warp %d, %d)", name, op, w, i);
        }
    };
    check_g2s(sA, "A");
    check_g2s(sB, "B");
  }

  // ---- epilogue R2S copy (make_tiled_copy_C): covers the C tile once, moves exactly the MMA
  // fragments, each pair of values adjacent (one 4-byte store), stores conflict-free.
  {
    using CopyC = typename Cfg::CopyC;
    auto c = coverage(typename CopyC::LayoutSrcTV{});
    CHECK(int(c.size()) == BM * BN, "%s: C copy covers %d of %d", name, int(c.size()), BM * BN);
    for (auto const& kv : c) CHECK(kv.second == 1, "%s: C copy element %ld held %d times", name, kv.first, kv.second);
    auto sC = make_tensor(base, typename Cfg::SmemC{});
    for (int w = 0; w < T / 32; ++w) {
      const auto probe = get_thread_copy(CopyC{}, 32 * w).partition_D(sC);
      for (int i = 0; i < int(size<1>(probe)); ++i)
        for (int j = 0; j < int(size<2>(probe)); ++j)
          for (int pair = 0; pair < 2; ++pair) {
            std::vector<long> addr;
            for (int l = 0; l < 32; ++l) {
              const int t = 32 * w + l;
              const auto part = get_thread_copy(CopyC{}, t).partition_D(sC);
              const auto frag = get_thread_slice(Mma{}, t).partition_C(sC);
              const long a0 = byte_of(&part(2 * pair, i, j)), a1 = byte_of(&part(2 * pair + 1, i, j));
              CHECK(a1 == a0 + 2 && a0 % 4 == 0, "%s: C copy pair not one aligned word", name);
              // Instruction (i, j) of the copy moves the fragment's atom (i, j), in order.
              CHECK(a0 == byte_of(&frag(2 * pair, i, j)), "%s: C copy differs from the fragment", name);
              addr.push_back(a0);
            }
            CHECK(conflict_free_words(addr), "%s: C copy store bank conflict (warp %d, %d, %d)", name, w, i, j);
          }
    }
  }

  // ---- epilogue: accumulator stores (2 bytes each) and S2G 16-byte loads
  {
    auto sC = make_tensor(base, typename Cfg::SmemC{});
    for (int w = 0; w < T / 32; ++w) {
      const auto probe = get_thread_slice(Mma{}, 32 * w).partition_C(sC);
      for (int v = 0; v < int(size(probe)); ++v) {
        std::vector<long> addr;
        for (int l = 0; l < 32; ++l) {
          const auto part = get_thread_slice(Mma{}, 32 * w + l).partition_C(sC);
          addr.push_back(byte_of(&part(v)));
        }
        CHECK(conflict_free_words(addr), "%s: accumulator store bank conflict (warp %d, value %d)", name, w, v);
      }
    }
    using S2G = typename Cfg::S2G;
    auto c = coverage(typename S2G::LayoutTV{});
    CHECK(int(c.size()) == S2G::kTileR * S2G::kTileS, "%s: S2G covers %d", name, int(c.size()));
    for (auto const& kv : c) CHECK(kv.second == 1, "%s: S2G element copied %d times", name, kv.second);
    const auto probe = get_thread_copy(S2G{}, 0).partition_S(sC);
    CHECK(int(size(probe)) * T == BM * BN, "%s: S2G partitions %d per thread", name, int(size(probe)));
    for (int i = 0; i < int(size<1>(probe)); ++i)
      for (int w = 0; w < T / 32; ++w) {
        std::vector<long> addr;
        for (int l = 0; l < 32; ++l) {
          const auto part = get_thread_copy(S2G{}, 32 * w + l).partition_S(sC);
          addr.push_back(byte_of(&part(0, i, 0)));
          CHECK(byte_of(&part(7, i, 0)) == addr.back() + 14, "%s: S2G vector split", name);
        }
        CHECK(conflict_free_16B(addr), "%s: S2G load bank conflict (warp %d, %d)", name, w, i);
      }
  }
}

int main() {
#define CG_GEMM_CONFIG(bm, bn, bk, s, wm, wn)                                             \
  check_config<GemmConfig<uint16_t, SM80_16x8x16_F32F16F16F32_TN, bm, bn, bk, s, wm, wn>>( \
      #bm "x" #bn "x" #bk "_s" #s "_w" #wm "x" #wn);
#include "kernels/gemm/generated/gemm_configs.inc"
#undef CG_GEMM_CONFIG
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
