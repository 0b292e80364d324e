#pragma once
// Configuration of the Hopper half-precision GEMM (gemm_wgmma_kernel.cuh, sm_90a): the CTA shape,
// every shared-memory layout the kernel and its tensor maps use, the descriptors derived from
// them and the accumulators' thread-value map. It is a header free of CUDA, so the CPU tests
// (tests/cpp/test_gemm_wgmma_layouts.cpp) check every map on the host.
//
//   C[M, N] = A[M, K] @ B[N, K]^T (+ bias[N]), the contract of gemm_launch.hpp.
//
// A CTA computes a (kBM = 64 ConsumerGroups, kBN) tile of C, in 1 + ConsumerGroups warpgroups:
//   - a producer warpgroup, of which one thread issues each stage as two TMA copies, the
//     (kBM rows, 64 k) box of A and the (kBN rows, 64 k) box of B, both landing as K-major tiles
//     with the 128-byte swizzle (Sw128KMajor): exactly what a wgmma descriptor reads;
//   - consumer warpgroups, warpgroup g the rows 64 g .. 64 g + 63 of the tile: per k16 step one
//     wgmma m64n(kBN)k16 with both operands from shared memory (SM90_64xNx16_F32_SS).
// MinCtasPerSm CTAs share an SM where their shared memory fits (the 128-row tiles take most of it;
// the 64-row tile runs where the grid has at most one tile per SM, with 8 stages in one CTA).
// Each stage has a "full" mbarrier (the producer's expected bytes, then the TMA's) and an "empty"
// one (an arrive per consumer warp once the wgmmas that read the stage are done); only the
// producer waits on "empty".

#include "cute_gemm/mma_traits_sm90.hpp"
#include "cute_gemm/wgmma_desc.hpp"

namespace cute_gemm {

template <class Element_, int BN, int Stages, int ConsumerGroups = 2, int MinCtasPerSm = 1>
struct GemmWgmmaConfig {
  using Element = Element_;
  static_assert(sizeof(Element) == 2, "16-bit operands");
  static_assert(ConsumerGroups == 1 || ConsumerGroups == 2, "64 or 128 rows per CTA");
  static constexpr int kConsumerGroups = ConsumerGroups;
  static constexpr int kMinCtasPerSm = MinCtasPerSm;
  static constexpr int kBM = 64 * kConsumerGroups;  // one wgmma M (64) per consumer warpgroup
  static constexpr int kBN = BN;                     // wgmma's N
  static constexpr int kBK = 64;                     // one 128-byte swizzle line of K per stage
  static constexpr int kKSteps = kBK / 16;
  static constexpr int kStages = Stages;
  static_assert(BN % 8 == 0 && BN <= 256, "wgmma's N: 8 .. 256 in 8s (one TMA box of B)");
  static_assert(Stages >= 2, "a stage refills while another is multiplied");

  static constexpr int kConsumerThreads = 128 * kConsumerGroups;
  static constexpr int kThreads = kConsumerThreads + 128;  // + the producer warpgroup
  static constexpr int kConsumerWarps = kConsumerThreads / 32;

  // ---- shared memory, per stage: the A tile, then the B tile; each a whole number of 1024-byte
  // swizzle atoms, so every tile starts on the atoms' alignment.
  using SmemA = Sw128KMajor<kBM, kBK>;  // (M128, K64) -> element
  using SmemB = Sw128KMajor<kBN, kBK>;  // (N, K64) -> element
  // Consumer warpgroup g reads rows 64 g .. 64 g + 63 of SmemA, which are this layout at element
  // kGroupARows * kBK * g (checked on the host: group_a_offset).
  using SmemAGroup = Sw128KMajor<64, kBK>;
  static constexpr int kABytes = kBM * kBK * 2;
  static constexpr int kBBytes = kBN * kBK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;  // also each stage's TMA byte count
  static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "tiles of whole swizzle atoms");
  CG_HOST_DEVICE static constexpr int group_a_bytes(int group) { return group * 64 * kBK * 2; }
  // [pad to 1024][stages][full barriers][empty barriers]
  static constexpr int kBarrierOffset = kStages * kStageBytes;
  static constexpr int kSmemBytes = 1024 + kBarrierOffset + 2 * kStages * 8;
  static_assert(kSmemBytes * MinCtasPerSm <= 227 * 1024, "MinCtasPerSm CTAs fit one SM");

  // Descriptors: of the warpgroup's A rows and of B, from the layouts; k16 step j starts
  // kStepBytes * j bytes later (row 0 of the swizzle atom is never swizzled: WgmmaDesc).
  using DescA = WgmmaDesc<SmemAGroup>;
  using DescB = WgmmaDesc<SmemB>;
  static constexpr int kStepBytes = 16 * 2;

  // ---- the output through shared memory (launches with one split and a 16-byte-aligned C, of
  // tiles of whole 64-column slabs: kCThroughSmem): the (kBM, kBN) tile of C row-major in (kBM
  // rows, 64 columns) slabs with the 128-byte swizzle, slab j at j * kBM * 64 elements, over the
  // drained stages; each slab is one box of C's TMA map (x = n0 + 64 j, y = m0). A warp's pairs
  // of columns (4 bytes, 8 rows x 4 lanes) land in 32 distinct banks: the rows' 16-byte units are
  // XOR-swizzled by row % 8. A tile of a half slab (224 columns) stores from registers instead:
  // a 64-column box would write the next tile's columns.
  static constexpr bool kCThroughSmem = kBN % 64 == 0;
  using SmemC = Sw128KMajor<kBM, kCThroughSmem ? kBN : 64>;  // (M, N) -> element
  static constexpr int kCSlabBytes = kBM * 64 * 2;           // slab j at j * kCSlabBytes
  static_assert(!kCThroughSmem || kBM * kBN * 2 <= kBarrierOffset,
                "the C tile fits over the stages");

  // ---- accumulators: warpgroup g's (T128, V kBN/2) -> (M64, N kBN) C fragment.
  using AccLayout = typename Wgmma64xNx16Layouts<kBN>::CLayout;
  static constexpr int kAccRegs = kBN / 2;

  // ---- registers: the CTA launches at the most that MinCtasPerSm CTAs per SM get (in 8s, at
  // most 240, what a consumer may hold); the producer gives all but kProducerRegisters back and
  // the consumers take them (setmaxnreg). The consumers hold kAccRegs accumulators.
  static constexpr int kRegisterShare = 65536 / (kThreads * MinCtasPerSm) / 8 * 8;
  static constexpr int kLaunchRegisters = kRegisterShare < 240 ? kRegisterShare : 240;
  static constexpr int kProducerRegisters = 40;
  static constexpr int kConsumerFree =
      (kThreads * kLaunchRegisters - 128 * kProducerRegisters) / kConsumerThreads / 8 * 8;
  static constexpr int kConsumerRegisters = kConsumerFree > 240 ? 240 : kConsumerFree;
  static_assert(kConsumerRegisters >= kLaunchRegisters, "the consumers must not lose registers");

  // ---- the grid: tiles in groups of kRasterM tile rows, column by column within a group, so
  // that CTAs running together share A rows and B columns in the L2.
  static constexpr int kRasterM = 8;
};

}  // namespace cute_gemm
