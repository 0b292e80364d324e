// Host checks of the Hopper GEMM's layouts (kernels/gemm/gemm_wgmma_config.hpp), for the compiled
// configurations (generated/gemm_wgmma_config.inc) and a smaller N:
//   - the tiles are where the TMA puts a box: a (rows, 64) box with the 128-byte swizzle stores
//     element (r, k) at byte 128 r + 16 ((k / 8) ^ (r % 8)) + 2 (k % 8) (CU_TENSOR_MAP_SWIZZLE_128B
//     within 1024-byte atoms), and SmemA / SmemB must say the same;
//   - consumer warpgroup g's rows of SmemA are SmemAGroup at group_a_bytes(g), on the atoms'
//     alignment, so its descriptor is WgmmaDesc<SmemAGroup> of that address;
//   - the descriptors' byte offsets (8-row core-matrix groups 1024 bytes apart) and the k16 step
//     (kStepBytes = the byte offset of (0, 16));
//   - the accumulators' map covers the (64, N) tile once, values 2i, 2i + 1 are columns n, n + 1
//     of one row (the epilogue's pair stores), and it has the closed form the epilogue's quad
//     transpose relies on;
//   - the output tile SmemC is C's TMA boxes, covered once by the epilogue's column pairs with no
//     bank conflicts (tiles of whole 64-column slabs; the 224-column tile stores from registers);
//   - shared memory: stages and barriers inside kSmemBytes, stages on 1024 bytes; the register
//     split gives the consumers at least the launch registers and fits the register file;
//   - the heuristic's picks (gemm_wgmma_heuristic) on 132 SMs, the 128x224 wave-fill tile's
//     included.
#include <cstdio>
#include <vector>

#include "host_check.hpp"
#include "kernels/gemm/gemm_configs.hpp"
#include "kernels/gemm/gemm_wgmma_config.hpp"

using namespace cute_gemm;

// Where a TMA box of 128-byte rows with the 128-byte swizzle puts element (r, k) (bytes).
long tma_sw128_byte(int r, int k) { return 128L * r + 16L * ((k / 8) ^ (r % 8)) + 2 * (k % 8); }

template <class Cfg>
void check(char const* name) {
  const int before = failures;
  constexpr int BM = Cfg::kBM, BN = Cfg::kBN, BK = Cfg::kBK;
  // ---- the tiles as the TMA writes them
  for (int r = 0; r < BM; ++r)
    for (int k = 0; k < BK; ++k)
      CHECK(2L * long(typename Cfg::SmemA{}(r, k)) == tma_sw128_byte(r, k), "%s: SmemA(%d, %d)",
            name, r, k);
  for (int r = 0; r < BN; ++r)
    for (int k = 0; k < BK; ++k)
      CHECK(2L * long(typename Cfg::SmemB{}(r, k)) == tma_sw128_byte(r, k), "%s: SmemB(%d, %d)",
            name, r, k);
  CHECK(Cfg::kABytes == 2 * int(cosize(typename Cfg::SmemA{})) &&
            Cfg::kBBytes == 2 * int(cosize(typename Cfg::SmemB{})),
        "%s: tile bytes", name);
  // ---- the warpgroups' rows of A
  for (int g = 0; g < Cfg::kConsumerGroups; ++g) {
    CHECK(Cfg::group_a_bytes(g) % 1024 == 0, "%s: group %d's rows off the atoms", name, g);
    for (int r = 0; r < 64; ++r)
      for (int k = 0; k < BK; ++k)
        CHECK(2L * long(typename Cfg::SmemA{}(64 * g + r, k)) ==
                  Cfg::group_a_bytes(g) + 2L * long(typename Cfg::SmemAGroup{}(r, k)),
              "%s: group %d row %d k %d", name, g, r, k);
  }
  // ---- descriptors
  CHECK(Cfg::DescA::kStrideBytes == 1024 && Cfg::DescB::kStrideBytes == 1024 &&
            Cfg::DescA::kLeadingBytes == 16 && Cfg::DescB::kLeadingBytes == 16,
        "%s: descriptor byte offsets", name);
  for (int j = 0; j < Cfg::kKSteps; ++j) {
    CHECK(j * Cfg::kStepBytes == 2 * int(typename Cfg::SmemAGroup{}(0, 16 * j)) &&
              j * Cfg::kStepBytes == 2 * int(typename Cfg::SmemB{}(0, 16 * j)),
          "%s: k16 step %d", name, j);
  }
  CHECK(Cfg::DescA::make(0x8400) == make_wgmma_desc(0x8400, 16, 1024, WgmmaSwizzle::k128B),
        "%s: DescA encoding", name);
  // ---- accumulators
  {
    std::vector<long> idx;
    for (int t = 0; t < 128; ++t) {
      for (int v = 0; v < Cfg::kAccRegs; ++v) {
        idx.push_back(long(typename Cfg::AccLayout{}(t, v)));
        if (v % 2 == 1) {
          const long a = idx[idx.size() - 2], b = idx.back();
          CHECK(b == a + 64, "%s: thread %d values %d, %d are not adjacent columns", name, t,
                v - 1, v);
        }
      }
    }
    CHECK(bijective(idx, 64L * BN), "%s: the accumulators do not cover (M64, N) once", name);
    // The epilogue's quad transpose (gemm_wgmma_store_rows) relies on this closed form: value
    // e + 2 h + 4 i of thread 32 w + 4 g + t is row 16 w + g + 8 h, column 8 i + 2 t + e.
    for (int w = 0; w < 4; ++w)
      for (int g = 0; g < 8; ++g)
        for (int t = 0; t < 4; ++t)
          for (int i = 0; i < BN / 8; ++i)
            for (int h = 0; h < 2; ++h)
              for (int e = 0; e < 2; ++e)
                CHECK(long(typename Cfg::AccLayout{}(32 * w + 4 * g + t, e + 2 * h + 4 * i)) ==
                          (16 * w + g + 8 * h) + 64L * (8 * i + 2 * t + e),
                      "%s: accumulator (w %d, g %d, t %d, i %d, h %d, e %d)", name, w, g, t, i, h,
                      e);
  }
  // ---- the output through shared memory (SmemC): (kBM, 64) slabs with the 128-byte swizzle,
  // slab j at byte j * kBM * 128 (one box of C's map each); the epilogue's column pairs cover the
  // (kBM, kBN) tile once, each pair one aligned 4-byte word, and a warp's 32 words of one value
  // pair fall in 32 distinct banks.
  if (Cfg::kCThroughSmem) {
    const auto sC = typename Cfg::SmemC{};
    for (int j = 0; j < BN / 64; ++j)
      for (int r = 0; r < BM; ++r)
        for (int c = 0; c < 64; ++c)
          CHECK(2L * long(sC(r, 64 * j + c)) == long(Cfg::kCSlabBytes) * j + tma_sw128_byte(r, c),
                "%s: SmemC(%d, %d)", name, r, 64 * j + c);
    std::vector<long> words;
    for (int tid = 0; tid < Cfg::kConsumerThreads; ++tid)
      for (int v = 0; v < Cfg::kAccRegs; v += 2) {
        const long idx = long(typename Cfg::AccLayout{}(tid % 128, v));
        const int row = 64 * (tid / 128) + int(idx % 64), col = int(idx / 64);
        const long at = long(sC(row, col));
        CHECK(col % 2 == 0 && at % 2 == 0 && long(sC(row, col + 1)) == at + 1,
              "%s: thread %d pair %d is not one aligned word of SmemC", name, tid, v);
        words.push_back(at / 2);
      }
    CHECK(bijective(words, long(BM) * BN / 2), "%s: the pairs do not cover SmemC once", name);
    for (int warp = 0; warp < Cfg::kConsumerThreads / 32; ++warp)
      for (int v = 0; v < Cfg::kAccRegs; v += 2) {
        std::vector<int> bank_used(32, 0);
        for (int lane = 0; lane < 32; ++lane) {
          const int tid = 32 * warp + lane;
          const long idx = long(typename Cfg::AccLayout{}(tid % 128, v));
          const int row = 64 * (tid / 128) + int(idx % 64), col = int(idx / 64);
          ++bank_used[int(long(sC(row, col)) / 2 % 32)];
        }
        for (int b = 0; b < 32; ++b)
          CHECK(bank_used[b] == 1, "%s: warp %d pair %d: bank %d taken %d times", name, warp, v,
                b, bank_used[b]);
      }
    CHECK(long(BM) * BN * 2 <= Cfg::kBarrierOffset, "%s: SmemC over the stages", name);
  }
  // ---- shared memory and registers
  CHECK(Cfg::kStageBytes % 1024 == 0 && Cfg::kBarrierOffset % 8 == 0 &&
            Cfg::kBarrierOffset + 2 * Cfg::kStages * 8 + 1024 <= Cfg::kSmemBytes &&
            Cfg::kSmemBytes * Cfg::kMinCtasPerSm <= 227 * 1024,
        "%s: shared memory", name);
  CHECK(Cfg::kThreads * Cfg::kLaunchRegisters * Cfg::kMinCtasPerSm <= 65536 &&
            128 * Cfg::kProducerRegisters + Cfg::kConsumerThreads * Cfg::kConsumerRegisters <=
                Cfg::kThreads * Cfg::kLaunchRegisters &&
            Cfg::kConsumerRegisters >= Cfg::kLaunchRegisters && Cfg::kConsumerRegisters % 8 == 0,
        "%s: registers", name);
  std::printf("%s: %s (%d bytes of shared memory, %d / %d / %d registers)\n", name,
              failures == before ? "ok" : "FAILED", Cfg::kSmemBytes, Cfg::kLaunchRegisters,
              Cfg::kProducerRegisters, Cfg::kConsumerRegisters);
}

// gemm_wgmma_heuristic on 132 SMs (H100 / H200): the walk's picks of sessions 16 and 21 (the
// GPU test test_heuristic_takes_wgmma_wherever_it_runs has the same cases), and the wave-fill
// tile where it runs in no more rounds than the widest: N = 28672 at M <= 768 (measured in
// session 72 at 256 / 512 / 768), not at M = 1024 (8 rounds of 128x224 against 7 of 128x256) nor
// on N = 4096 / 8192 / 14336 at M = 4096.
void check_heuristic() {
  const int before = failures;
  struct Case {
    int m, n;
    char const* want;
  } const cases[] = {
      {4096, 4096, "wgmma_128x256x64_s4"},  {1024, 4096, "wgmma_128x256x64_s4"},
      {256, 8192, "wgmma_128x128x64_s6"},   {512, 4096, "wgmma_128x128x64_s6"},
      {256, 4096, "wgmma_64x128x64_s8"},    {1, 512, "wgmma_64x128x64_s8"},
      {1024, 1024, "wgmma_64x128x64_s8"},   {128, 28672, "wgmma_128x224x64_s5"},
      {256, 28672, "wgmma_128x224x64_s5"},  {512, 28672, "wgmma_128x224x64_s5"},
      {768, 28672, "wgmma_128x224x64_s5"},  {1024, 28672, "wgmma_128x256x64_s4"},
      {4096, 28672, "wgmma_128x256x64_s4"}, {4096, 14336, "wgmma_128x256x64_s4"},
      {4096, 8192, "wgmma_128x256x64_s4"},  {2048, 4096, "wgmma_128x256x64_s4"},
  };
  for (Case const& c : cases) {
    const std::string got =
        gemm_config_name(kGemmWgmmaFirst + gemm_wgmma_heuristic(c.m, c.n, 132));
    CHECK(got == c.want, "heuristic(%d, %d): %s, expected %s", c.m, c.n, got.c_str(), c.want);
  }
  // The wave-fill tile only in place of the widest tile, never in more rounds; the widest tile
  // wherever no wave-fill tile can match its rounds.
  GemmWgmmaShape const& wide = kGemmWgmmaConfigs[0];
  for (int m = 1; m <= 8192; m += 37)
    for (int n : {1024, 4096, 6144, 8192, 14336, 28672, 57344, 128256}) {
      const int i = gemm_wgmma_heuristic(m, n, 132);
      const bool widest_walk = 2 * gemm_tiles_of(m, n, wide.bm, wide.bn) >= 132;
      const bool fill_fits =
          gemm_wgmma_rounds(kGemmWgmmaConfigs[1], m, n, 132) <= gemm_wgmma_rounds(wide, m, n, 132);
      CHECK(kGemmWgmmaConfigs[i].wave_fill == (widest_walk && fill_fits),
            "heuristic(%d, %d) took %s", m, n, gemm_config_name(kGemmWgmmaFirst + i).c_str());
    }
  std::printf("heuristic: %s\n", failures == before ? "ok" : "FAILED");
}

int main() {
  // The compiled configurations (generated/gemm_wgmma_config.inc, as scripts/generate_kernels.py
  // instantiates them), and one more.
  constexpr GemmWgmmaShape const* c = kGemmWgmmaConfigs;
  using Wide = GemmWgmmaConfig<uint16_t, c[0].bn, c[0].stages, c[0].bm / 64, 1>;
  using Fill = GemmWgmmaConfig<uint16_t, c[1].bn, c[1].stages, c[1].bm / 64, 1>;
  using Narrow = GemmWgmmaConfig<uint16_t, c[2].bn, c[2].stages, c[2].bm / 64, 1>;
  using Small = GemmWgmmaConfig<uint16_t, c[3].bn, c[3].stages, c[3].bm / 64, 1>;
  static_assert(kGemmWgmmaCount == 4 && c[1].wave_fill && !c[0].wave_fill,
                "check every compiled configuration");
  static_assert(Wide::kBM == c[0].bm && Wide::kBK == c[0].bk && Fill::kBM == c[1].bm &&
                    Fill::kBK == c[1].bk && Narrow::kBM == c[2].bm && Narrow::kBK == c[2].bk &&
                    Small::kBM == c[3].bm && Small::kBK == c[3].bk,
                "the generated configurations' BM and BK are the config's");
  static_assert(!Fill::kCThroughSmem && Wide::kCThroughSmem && Narrow::kCThroughSmem &&
                    Small::kCThroughSmem,
                "224 columns (3.5 slabs) store from registers; whole slabs through SmemC");
  check<Wide>(gemm_config_name(kGemmWgmmaFirst).c_str());
  check<Fill>(gemm_config_name(kGemmWgmmaFirst + 1).c_str());
  check<Narrow>(gemm_config_name(kGemmWgmmaFirst + 2).c_str());
  check<Small>(gemm_config_name(kGemmWgmmaFirst + 3).c_str());
  check<GemmWgmmaConfig<uint16_t, 64, 8>>("N 64, 8 stages");
  check_heuristic();
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
