// The mixed GEMM's planner (mixed_plan.hpp): every decision about a call, as one pure function of
// the problem, the device and the schedule. The measurements behind each rule are in
// benchmarks/results/NOTES.md (probe_mixed.py reproduces them).

#include "kernels/mixed/mixed_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "kernels/mixed/stream_k.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {

namespace {

constexpr int kMaxSplits = 64;
// The decode kernel runs up to one 8-row token tile.
constexpr int kDecodeMaxM = 8;
// With wgmma the mma.sync kernel may run up to here, wgmma above. INT8 takes wgmma's 32-row tile
// from M = 9 (Llama-3-8B's q/k/v, o and down at M = 9 / 16 on an H200: 9.2-19.5 us against
// 9.8-22.6 in mma.sync's best split) but where mma.sync's 16-row columns come near filling the SMs
// (int8_on_mma). INT4 takes wgmma's 16-row tile with exact scales where the groups are whole k
// blocks (hopper_small_m_kernel), and otherwise where that grid splits K into slices of at most
// kWgmma16MaxSliceK, mma.sync otherwise (K-long slices with rounded weights: 28672x8192 49.6 vs
// 47.0 us at M = 16 on an H100).
constexpr int kMmaSyncMaxM = 16;
constexpr int kWgmma16MaxSliceK = 2048;
// Without wgmma the fused mma.sync kernel runs below this M; from here the product is
// compute-bound and dequantizing the weight once for a dense GEMM is faster. With wgmma the fused
// kernel keeps up with the dense GEMM at every M (it also saves the dequantization pass).
constexpr int kDenseFromMMmaSync = 192;
// A gated mma.sync plan whose tile gates in registers (16 rows) runs unsplit, without the reduce
// kernel, where a wave of its CTAs would take at most this many splits (Llama-3-8B's gate/up
// 4096x28672 at M = 9-16: 2).
constexpr int kGatedInRegistersMaxSplits = 2;
// On Hopper such a gated GEMM runs this many splits instead (SiLU(gate) * up in the reduce
// kernel), each of at least kGatedSplitMinBlocks k blocks: the 16-row tile's CTAs of 4 warps in
// ~1.7 waves, which the SMs take as they free, where 224 CTAs of 2 k slices left 40 of 132 SMs
// with one CTA and the others with two. H200, the compiled Llama-3-8B-shaped step at batch 16
// (gate/up 4096x28672 bf16), three machines: 2.533 / 2.544 / 2.535 ms against 2.600 / 2.591 /
// 2.592 unsplit; 6 splits 2.597, 8 splits 2.655 (NOTES.md, session 51). Not measured on the H100.
constexpr int kGatedHopperSplits = 4;
constexpr int kGatedSplitMinBlocks = 8;
// Token tiles of 129 rows and up (wgmma's 128, 160, 192 and 256 rows, one CTA per SM): the time
// grows with the rows each SM computes (rows_per_sm). A smaller tile in as many M tiles computes
// no more rows per SM and replaces a larger one where it does not compute more; one that needs
// more M tiles (each dequantizes the weights again) replaces it where it computes at most this
// share of its rows per SM. 4096x14336 at M = 384 runs 2 waves of 256 rows (512) or 3 of 128
// (384, 0.75): 114.5 vs 84.3 us on the H100 (fp16 74.1); M = 512 on 4096x28672 (128 rows: 0.875)
// keeps 256 rows. Same M tiles: 8192² M = 320 takes 100.7 / 77.8 / 66.7 us in 256 / 192 / 160
// rows (fp16 71.0).
constexpr double kWgmmaRowsShare = 0.8;
// INT8's warp-specialized tiles (64 rows and up) scale exactly where K is one group
// (per-channel scales): the sums of a (q - z) are scaled once after the loop
// (mixed_wgmma_config.hpp), two fewer instructions per packed word than rounded weights.
constexpr int kWsExactMinTileM = 64;
// The tile also gives way to 128 rows where its grid would split K into slices of at most this
// many k and 128-row tiles pad M no further: twice the CTAs need fewer splits, and each split
// refills and drains its pipeline.
constexpr int kWgmmaShortSplitK = 2048;
// Decode: from this M the k slices may be 2 or 4 warps wide (sharing the activations); below,
// 1-warp slices need no barrier and the activations are a small part of a k block's bytes.
constexpr int kDecodeSharedFromM = 5;
// Decode: a split-K grid (workspace + reduce kernel, a few us) pays where no unsplit grid has
// CTAs for half the SMs, otherwise only where each split keeps at least this much of K.
constexpr int kDecodeMinSplitK = 8192;
constexpr int kColWarpChoices[] = {1, 2, 4};
// Decode with partial sums taken by the caller (no reduce kernel; the compiled model adds them in
// the next kernel): INT4 on a K of at least kDecodeMinSplitK whose plan is one wave of CTAs of
// more than this many 1-warp k slices runs CTAs of this many in as many more splits, each warp
// keeping its k range. A CTA that takes a whole SM (16 warps at 1 CTA per SM) starts only when
// every CTA of the kernel before it has left that SM; CTAs of 4 warps start as those leave. H200,
// the compiled Llama-3-8B-shaped step at batch 1 (down 14336x4096 after gate/up's 896 CTAs), three
// machines: 1.948 / 1.947 / 1.940 ms against 1.986 / 1.990 / 1.984 (2 splits of 8 warps 1.951, 8
// of 2 warps 1.981); o_proj (K = 4096, after attention's 32 CTAs) 1.996 against 1.986 (NOTES.md,
// session 51).
constexpr int kPartialsCtaWarps = 4;
// Decode on Hopper, INT8 at M <= kSlicedCtaInt8MaxM and gated bf16 INT4 at M <= kSlicedCtaInt4MaxM:
// a plan of unsplit 1-warp k slices in CTAs of fewer than kSlicedCtaWarps, with the CTAs for one to
// two waves of CTAs this wide, takes CTAs of kSlicedCtaWarps k slices (each warp then streams half
// the k blocks, 16 warps per SM where the 2-warp grid had ~14, in ~1.7 waves). Where that was
// measured faster (H200, graph replays, us, 2 -> 4 warps): 4096x28672 with SiLU(gate) * up, bf16
// INT4 M = 1 17.85 -> 16.59, M = 2 17.90 -> 16.93; INT8 M = 1, 2, 4: bf16 39.6 -> 30.9, 34.6 ->
// 31.4, 34.3 -> 31.8, fp16 32.5 -> 30.2, 32.7 -> 30.7, 31.0 -> 30.8; the compiled
// Llama-3-8B-shaped step at batch 1 1.946 -> 1.919 ms (NOTES.md, session 52). Ungated INT8, fp16
// 4096x28672 M = 1 34.7 -> 28.9 (8 warps 29.4; session 74, NOTES.md for the other shapes). Not
// fp16 INT4 (slower: gated M = 1 17.0 -> 17.6, M = 2 16.9 -> 18.3) nor INT4 from M = 3 (bf16
// M = 4 from 1-warp CTAs: 20.5 either way); ungated INT4 not measured. 8 warps lost everywhere
// (bf16 INT4 M = 1 22.3 us). Not measured on the H100.
constexpr int kSlicedCtaWarps = 4;
constexpr int kSlicedCtaMaxWaves = 2;  // at most this many waves of them (as measured)
constexpr int kSlicedCtaInt4MaxM = 2;
constexpr int kSlicedCtaInt8MaxM = 4;
// Decode on Hopper, unscheduled and unsplit (the busiest wave counts warps, not SMs, and takes
// more of them than pays). H200, graph replays, us, the old plan forced -> the rule's (NOTES.md,
// session 75, for every row):
// - From kDecodeSharedFromM rows (where k slices may be wide), a grid of 2- or 4-warp-wide CTAs
//   that leaves more than kWideIdleSmShare of the SMs idle, where 1-warp-wide CTAs number one to
//   kWideToSlicedMaxPerSm per SM: CTAs of kWideToSlicedWarps one-warp k slices, so every SM
//   streams. M = 5 / 8: INT8 bf16 4096x6144 (96 CTAs of 16 warps) 11.64 / 11.53 -> 10.55 /
//   10.45, 3584x4608 (72) 10.30 / 10.37 -> 8.93 / 8.91; INT4 fp16 4096x6144 8.12 / 7.94 -> 7.15 /
//   7.17, 4096x5120 7.89 / 7.76 -> 6.81 / 6.87. The one loss: INT4 5120² at M = 5-7 (80 CTAs of
//   14 warps), fp16 7.73 -> 8.06 (M = 8 8.53 -> 8.09). At 1.7 per SM (5120x7168) INT8 lost (bf16
//   12.6 -> 14.4); where 128 of 132 SMs stream (8192²) the wide CTAs stay (INT8 bf16 M = 5 19.2
//   against 22.8 in 4-warp CTAs).
// - At any M, a grid of 1-warp-wide CTAs, one per SM, of more than kSlicedCapWarps k slices:
//   that many, where CTAs of that many are still one per SM (at M <= 2, and INT8 at M <= 4, two
//   fit, and 128 CTAs of 8 warps ran 1.4x slower than of 16); INT4 only where the CTAs leave at
//   most kWideIdleSmShare of the SMs idle. INT8 bf16 4096² M = 5 / 8 (15 / 13 warps) 7.55 / 7.73
//   -> 6.90 / 6.94, 14336x4096 17.49 / 18.99 -> 17.37 / 17.53, 3072² 6.00 / 6.19 -> 5.79 / 5.80;
//   INT4 bf16 4096² M = 4 / 5 / 8 (13 / 12 / 10 warps) 5.79 / 5.30 / 5.58 -> 5.15 / 5.17 / 5.24,
//   14336x4096 12.20 / 11.52 / 12.54 -> 10.85 / 11.64 / 11.80 (M = 5 the one loss). INT4 3072²
//   (96 CTAs) lost (fp16 M = 8 3.89 -> 4.06).
constexpr double kWideIdleSmShare = 0.1;
constexpr double kWideToSlicedMaxPerSm = 1.5;
constexpr int kWideToSlicedWarps = 4;
constexpr int kSlicedCapWarps = 8;
// Decode on Hopper, ungated, a grid of few columns (1-warp-wide CTAs at most 1 / kFewColumnsShare
// of the SMs: N <= 1056 on 132 SMs), unscheduled: the splits that make one CTA per SM, in CTAs of
// kFewColumnsWarps one-warp k slices (fewer where a split has under 2 k blocks a slice; INT4 only
// where that leaves kFewColumnsInt4MinWarps or more). The busiest wave took 1-14 splits of 8-16
// warps, wide or not. H200, bf16, graph replays, us, the old plan forced -> the rule's, M = 1 / 4
// / 8: INT8 4096x512 5.22 / 5.38 / 5.31 -> 3.70 / 3.78 / 3.82 (8 splits of 4 warps), 3584x512
// (Qwen2-7B's k / v) 4.87 / 5.09 / 5.03 -> 3.84 / 3.79 / 3.78, 14336x1024 8.96 / 9.41 / 9.55 ->
// 7.63 / 7.96 / 7.99; INT4 5120x1024 4.68 / 4.81 / 4.81 -> 4.18 / 4.16 / 4.11, 14336x512 5.38 /
// 4.74 / 5.01 -> 4.45 / 4.57 / 4.55. Of 87 changed plans over 12 shapes at M = 1-8, 83 faster
// (geometric mean 1.16x), INT8 5120x1024 up to 2% slower (NOTES.md, session 75). INT4 in CTAs of
// 1-2 warps was mixed: 2048x512 and 2048x1024 10-23% slower at every M, 3584x512 4-15% at M = 2,
// 4, 8; 8192x256 38-51% faster at M = 1-2, 3-6% slower from M = 4; 4096x512 7-15% faster. At N =
// 2048 (64 CTAs) the busiest wave's plans held in a sweep (INT8 14336x2048 M = 4: 16 warps in 2
// splits 12.54, 8 warps 16.93).
constexpr int kFewColumnsShare = 4;
constexpr int kFewColumnsWarps = 8;
constexpr int kFewColumnsInt4MinWarps = 3;
// Decode: a grid of 1-warp k slices that is more than one wave even in 1-warp CTAs (a
// vocabulary-sized N) runs CTAs of this many 1-warp k slices, each of at least
// kManyWavesSliceBlocks k blocks (a full pipeline): the CTAs' fixed costs (prologue, k-slice sum,
// epilogue) are paid once per 4 warps, not per warp. More waves then, as many warps busy.
constexpr int kManyWavesSlices = 4;
constexpr int kManyWavesSliceBlocks = 4;
// Decode, INT4 at M <= kMinSliceMaxM, a grid of more 1-warp-slice CTAs than SMs: where the
// busiest wave cuts the k slices shorter than kShortSliceBlocks k blocks, the plan takes slices of
// at least kMinSliceBlocks. On an H100 (bf16, M = 1, 1-warp slices, us): 4096x6144 (192 CTAs)
// 8 warps (4 blocks a slice, the busiest wave) 8.55, 4 warps 7.91; the compiled Llama-3-8B
// decode step with its q/k/v so 1.3% faster (NOTES.md, session 36). Longer slices stay as they
// are: 4096x12288 (384 CTAs) 5 warps (6.4 blocks a slice) 11.1, 4 warps 12.2. Not INT8 (4096x6144
// fastest at 16 blocks a slice), nor M >= 3 (shared memory bounds the CTAs per SM).
constexpr int kShortSliceBlocks = 5;
constexpr int kMinSliceBlocks = 8;
constexpr int kMinSliceMaxM = 2;
// Warp-specialized wgmma grids of more than one M tile: the raster group (raster_rows) replaces
// the row-major order where it cuts a wave's modelled DRAM bytes to at most this share. Cuts of
// 33-65% ran INT8 at M = 1024-4096 1-3.5% faster on an H100 (less DRAM traffic, higher clocks
// under the power limit); cuts of about 20% (INT4 on 8192² and 28672x8192) gained nothing, and
// on 4096² (everything in the L2) raster groups were 1-4% slower.
constexpr double kRasterBytesShare = 0.7;
// Decode grids that take at least this share of the resident CTA slots (ctas_per_sm x SMs) let
// the next kernel launch right after their dependency wait (MixedPlan::early_dependents): its
// CTAs then wait for SMs this grid leaves and stream their first weights in its tail. H100,
// back-to-back GEMMs (NOTES.md, session 43): 4-15% faster at fills of 0.85-0.97 (4096x28672
// M = 1: 22.6 -> 20.0 us; INT8 4096² 8.4 -> 7.1), but 23.0 -> 32.7 us for 4096x28672 M = 4 in
// 1-warp CTAs (fill 0.52), where half the slots are free and the next grid's CTAs move in beside
// this one while it streams. The wgmma and mma.sync kernels gained nothing from it (INT8's split
// wgmma grids lost up to 9%) and keep the trigger after their loop, but for the grid below.
constexpr double kEarlyDependentsFill = 0.75;
// The wgmma tiles without a producer warpgroup trigger after their loop, but for a gated grid of
// the 16-row tile, unsplit, of fewer CTAs than resident slots (Llama-3-8B's gate/up at M = 9-16:
// 224 tiles on an H200's 264 slots, so 40 SMs run one CTA): it lets the next kernel (the down
// projection) launch at its start, whose CTAs take the free slots and stream their first stages
// while gate/up runs. H200, the Llama-3-8B-shaped model at batch 16, early and late alternating
// in one build: 2.191 / 2.175 against 2.207 / 2.189 ms per step. The same trigger on the full
// split-K grids of down, o and q/k/v (480-512 CTAs of 528 slots) gained nothing (NOTES.md
// session 72).
constexpr bool kEarlyDependentsGated16 = true;

[[noreturn]] void refuse(std::string const& what) { throw std::invalid_argument(what); }

// The kernels that honour the schedule's trigger key, for its refusals; the plan's kernel follows.
constexpr char kTriggerScope[] =
    "schedule: trigger applies to the decode kernel and the wgmma tiles without a producer "
    "warpgroup; this plan runs ";

// Stream-K by default where an unsplit grid of the instances that can (the 16-row exact tile in
// 128 columns) holds more tiles than SMs, so that some SMs run one CTA more than others, and its
// tiles fill at most 1 - kStreamKCostBlocks / k_blocks of the resident slots: spread over every
// slot, each CTA runs fill * k_blocks blocks, plus what the hand-over of partial sums and the
// kernel's longer start cost, about 6 k blocks of time. H200, bf16, M = 16, us, unsplit against
// stream-K over 264 CTAs (NOTES.md session 70): K = 4096 (32 blocks, at most 0.81) 140 tiles
// 23.6 / 17.9, 160 23.8 / 19.2, 180 23.8 / 21.2, 200 23.9 / 22.3, 224 (Llama-3-8B's gate/up) 24.1 /
// 24.6, 237 24.1 / 26.1; K = 8192 224 tiles 45.4 / 43.7; K = 14336 192 tiles 77.0 / 63.9.
constexpr int kStreamKCostBlocks = 6;
// The warp-specialized tiles' stream-K (plan_ws_stream_k) by default where the tiles are more
// than the resident slots and those past the full waves fill at most this share of them. H200,
// fp16, stream-K over 132 CTAs against the unsplit grid, interleaved in one process, medians, us
// (NOTES.md session 78): 4096x28672 M = 512 (448 256-row tiles, 52 past 3 waves: 0.39) INT4
// 197.9 -> 193.1, INT8 208.8 -> 203.4; M = 768 (0.09) INT4 300.3 -> 293.0, INT8 319.9 -> 309.5;
// M = 1536 / 4096 0.2-2.2% faster; M = 384 (192-row tiles, 0.39) INT4 1.6% faster, INT8 2.2%
// slower; fuller last waves lose: 28672x8192 M = 512 (0.97) INT4 337.1 -> 353.1, 14336x4096
// M = 1536 (0.94) INT8 286.5 -> 299.3.
constexpr double kWsStreamKMaxFill = 0.5;

// As many splits as fill one wave of `ctas_per_sm` CTAs per SM for `base` CTAs per split, at
// least 2 k blocks per split, at most `cap`.
int wave_splits(DeviceSpec const& d, int64_t base, int ctas_per_sm, int k_blocks, int cap) {
  const int64_t wave = int64_t(ctas_per_sm) * d.sm_count;
  int64_t splits = base >= wave ? 1 : wave / base;
  const int max_splits = k_blocks / 2 > 1 ? k_blocks / 2 : 1;
  splits = std::min<int64_t>(splits, max_splits);
  return int(std::min<int64_t>(splits, cap));
}

// `splits` lowered so that none is empty: each gets ceil(k_blocks / splits) k blocks.
int non_empty_splits(int splits, int k_blocks) {
  splits = std::min(splits, k_blocks);
  const int per_split = (k_blocks + splits - 1) / splits;
  return (k_blocks + per_split - 1) / per_split;
}

// wgmma's output columns per CTA unless a schedule asks for tile_n or narrow_wgmma16 picks the
// 16-row tile's 64-column form.
constexpr int kWgmmaDefaultTileN = 128;
// The 16-row tile takes 64 columns where 128 would split K this many ways or more to fill a wave,
// or would give each split at most kWgmma16NarrowMaxSplitBlocks k blocks: twice the column tiles
// fill the SMs at 4 CTAs (16 warps) per SM instead of 2 (8 warps), so the same partial sums come
// out of a loop whose latency more warps hide; a long loop per CTA (many k blocks) hides it
// alone. H200 (s60, M = 16, bf16): 4096x4096 6.3 against 6.7 us and 14336x4096 13.8 against 14.1
// in 8 splits. With TMA loads (H200, s67, M = 16, 64 / 128 columns, us, bf16 and fp16): 4096x6144
// (5 splits of 6.4 blocks) 8.15 / 8.56 and 7.73 / 8.02, 8192x8192 (4 of 16) 14.42 / 14.77 and
// 13.55 / 13.90; 28672x8192 (4 of 56) 42.6 / 41.7 and 41.0 / 38.8, 4096x28672 (1 of 32) within 1%.
constexpr int kWgmma16NarrowMinSplits = 8;
constexpr int kWgmma16NarrowMaxSplitBlocks = 16;

// INT4's 64-row tile runs its cp.async form (MixedSchedule::Loads) where M is at most
// kCpAsyncMaxRows (one M tile) and each split runs at least kCpAsyncMinSplitBlocks k blocks; its
// TMA form elsewhere. cp.async copies only the rows of A inside M, so its per-block copy work
// halves from M = 64 to 33 while TMA's issue stays the same; TMA's stages also arrive sooner,
// which short splits feel most. H200, s83, fitted TMA box against cp.async (time ratio): M = 64
// 0.925-0.979 on six shapes; M = 33-40 in long loops 4096x28672 (1 split of 32 blocks) bf16
// 1.01-1.06, fp16 0.97-1.04, 28672x8192 (4 of 56) 1.03-1.04; in short ones 4096² (8 of 4)
// 0.93-0.96, 4096x6144 (5 of 6.4) 0.92-0.93, 14336x4096 (8 of 14) 0.94-1.00, 8192² (4 of 16)
// 0.99-1.01; M = 44-48 0.96-1.02. s84, this rule against TMA everywhere: 0.949-1.004 (median
// 0.987) where it picks cp.async, against a median of 1.012 where both run the same kernel.
constexpr int kCpAsyncMaxRows = 40;
constexpr int kCpAsyncMinSplitBlocks = 32;

// The first instance of `kernel` for the problem's bits and dtype with this token tile; decode and
// mma.sync: with `fine` groups or not; wgmma: with the scales asked for (kAuto: rounded weights,
// which let a warp dequantize the next k block while the wgmmas of this one run), `tile_n`
// columns per CTA (0: kWgmmaDefaultTileN) and its stages filled as `loads` says (kAuto: the
// first listed, the TMA form of a tile that has both).
int find_instance(MixedKernel kernel, MixedGemmProblem const& p, int tile_m, bool fine,
                  MixedSchedule::Scales scales = MixedSchedule::Scales::kAuto, int tile_n = 0,
                  MixedSchedule::Loads loads = MixedSchedule::Loads::kAuto) {
  const int want_n = tile_n > 0 ? tile_n : kWgmmaDefaultTileN;
  for (int i = 0; i < mixed_instance_count(); ++i) {
    MixedInstanceInfo const& inst = mixed_instance(i);
    if (inst.kernel != kernel || inst.bits != p.bits || inst.bf16 != p.bf16 ||
        inst.tile_m != tile_m || (kernel == MixedKernel::kWgmma && inst.tile_n != want_n))
      continue;
    if (loads != MixedSchedule::Loads::kAuto &&
        inst.tma_loads != (loads == MixedSchedule::Loads::kTma))
      continue;
    if (kernel != MixedKernel::kWgmma ? inst.fine_groups == fine
                                      : inst.exact_scales ==
                                            (scales == MixedSchedule::Scales::kExact))
      return i;
  }
  return -1;
}

void fill_from_instance(MixedPlan& plan, int index) {
  MixedInstanceInfo const& inst = mixed_instance(index);
  plan.instance = index;
  plan.tile_m = inst.tile_m;
  plan.tile_n = inst.tile_n;
  plan.stages = inst.stages;
  plan.threads = inst.threads;
  plan.smem_bytes = inst.smem_bytes;
  plan.warps = inst.threads / 32;
  plan.warp_groups = inst.warp_groups;
  plan.producer = inst.producer;
  plan.tma_loads = inst.tma_loads;
  plan.fine_groups = inst.fine_groups;
  plan.exact_scales = inst.kernel != MixedKernel::kWgmma || inst.exact_scales;
}

// CTAs of an mma.sync or wgmma instance resident per SM (its threads, registers and shared
// memory are fixed; the decode kernel's depend on the plan).
int instance_ctas_per_sm(DeviceSpec const& d, MixedInstanceInfo const& inst) {
  return occupancy_ctas_per_sm(d, inst.threads, inst.registers, inst.smem_bytes);
}

// The output tiles of `inst`'s grid (N tiles x M tiles), the CTAs of one split.
int64_t wgmma_output_tiles(MixedGemmProblem const& p, MixedInstanceInfo const& inst) {
  return ceil_div(p.n, inst.tile_n) * ceil_div(p.m, inst.tile_m);
}

int wgmma_splits(MixedGemmProblem const& p, DeviceSpec const& d, MixedSchedule const& s,
                 MixedInstanceInfo const& inst, int k_blocks) {
  const int splits = s.splits > 0 ? s.splits
                                  : wave_splits(d, wgmma_output_tiles(p, inst),
                                                instance_ctas_per_sm(d, inst), k_blocks,
                                                kMaxSplits);
  return non_empty_splits(splits, k_blocks);
}

// wgmma's default token tile: the smallest of 16 (INT4), 32, 64, 128 that holds M, then 256
// (each dequantized weight feeds more tokens, even with the last tile padded), which
// fitted_wide_tile may exchange for 192, 160 or 128 rows.
int default_wgmma_tile_m(MixedGemmProblem const& p) {
  if (p.m <= 16 && p.bits == 4) return 16;
  return p.m <= 32 ? 32 : (p.m <= 64 ? 64 : (p.m <= 128 ? 128 : 256));
}

// INT8 at M = 9..kMmaSyncMaxM on Hopper: mma.sync's 16-row tile's column tiles per SM, 0 where
// the problem is outside these rules (the fine-group instance of the tile is as wide as this one).
double int8_mma16_columns_per_sm(MixedGemmProblem const& p, DeviceSpec const& d) {
  if (p.bits != 8 || !d.wgmma || p.m <= kDecodeMaxM || p.m > kMmaSyncMaxM) return 0.0;
  const int index = find_instance(MixedKernel::kMma, p, 16, false);
  if (index < 0) return 0.0;
  return double(ceil_div(p.n, mixed_instance(index).tile_n)) / d.sm_count;
}

// INT8 at M = 9..16 on Hopper: whether mma.sync's 16-row tile runs it unsplit: where that tile's
// column tiles alone give the SMs kInt8MmaUnsplitMinCtasPerSm CTAs each. Those wide grids run
// unsplit on wgmma's 32-row tile too, one CTA per SM, where mma.sync's 4-warp CTAs go several to
// an SM. H200, M = 9 / 12 / 16 (NOTES.md, session 61), us, mma.sync unsplit against wgmma:
// 4096x28672 (1.7 CTAs per SM) fp16 34.2-34.4 / 34.7-37.3, bf16 37.5-37.9 / 40.2-42.1, gated (in
// registers against wgmma's reduce kernel) fp16 33.8-34.1 / 44.2-44.6, bf16 38.5-39.1 /
// 54.8-55.7; 8192x28672 fp16 65.9-69.1 / 68.6-71.7, bf16 71.9-75.6 / 78.2-80.5; the 4096x128256
// head (7.6) bf16 145.1-169.7 / 155.6-170.7 but fp16 143.7-149.6 / 144.1-145.2 (3% slower at
// M = 12-16, and at every M in a second call). Unsplit at 14336x17024 (1.0) lost 27%: there
// int8_on_mma splits it.
constexpr double kInt8MmaUnsplitMinCtasPerSm = 1.5;
bool int8_on_mma_unsplit(MixedGemmProblem const& p, DeviceSpec const& d) {
  return int8_mma16_columns_per_sm(p, d) >= kInt8MmaUnsplitMinCtasPerSm;
}

// INT8 at M = 9..16 on Hopper: whether mma.sync's 16-row tile runs it rather than wgmma's 32-row
// tile: unsplit from kInt8MmaUnsplitMinCtasPerSm column tiles per SM (int8_on_mma_unsplit), and,
// ungated, in the wave model's splits from kInt8MmaSplitMinCtasPerSm. H200, M = 9 / 16 (NOTES.md,
// session 62), us, mma.sync in those splits against wgmma: 14336x17024 (1.0) fp16 65.0 / 72.1
// against 75.9 / 77.8, bf16 77.3 / 79.8 against 94.1 / 93.5; 8192x10240 (0.61) fp16 24.4 / 25.6
// against 25.2 / 26.1, bf16 25.9 / 27.0 against 29.7 / 30.1. At 0.48 (N = 8192) it is a wash
// (8192² fp16 1-2% slower, 28672x8192 up to 5% faster) and at 0.24 (N = 4096) mma.sync loses
// 2-11%: wgmma keeps those. Gated problems below 1.5 were not measured there and keep wgmma.
constexpr double kInt8MmaSplitMinCtasPerSm = 0.55;
bool int8_on_mma(MixedGemmProblem const& p, DeviceSpec const& d) {
  const double share = int8_mma16_columns_per_sm(p, d);
  return share >= kInt8MmaUnsplitMinCtasPerSm || (!p.gated && share >= kInt8MmaSplitMinCtasPerSm);
}

// mma.sync: the smallest M tile of 16, 32 or 64 rows that holds M (64 above), split-K to one
// wave of the CTAs resident per SM (the occupancy model: on the H100 the register cap's
// min_ctas_per_sm; on the A100 shared memory allows fewer); a gated GEMM that the tile gates in
// registers runs unsplit, on Hopper in kGatedHopperSplits splits.
void plan_mma(MixedPlan& plan, MixedGemmProblem const& p, DeviceSpec const& d,
              MixedSchedule const& s, int k_blocks, int group) {
  const int tile_m = p.m <= 16 ? 16 : (p.m <= 32 ? 32 : 64);
  const bool fine = mixed::fine_groups_for(p.bits, group, p.k);
  const int index = find_instance(MixedKernel::kMma, p, tile_m, fine);
  if (index < 0) refuse("no mma.sync instance for this problem");
  fill_from_instance(plan, index);
  MixedInstanceInfo const& inst = mixed_instance(index);
  if (s.k_slices > inst.max_k_slices)
    refuse("schedule: k_slices=" + std::to_string(s.k_slices) + " exceeds the " +
           std::to_string(inst.max_k_slices) + " of " + inst.name +
           " (2 only in INT4's 16-row tile)");
  const int one_slice_ctas = instance_ctas_per_sm(d, inst);
  const int64_t base = ceil_div(p.n, plan.tile_n) * ceil_div(p.m, plan.tile_m);
  int splits =
      s.splits > 0 ? s.splits : wave_splits(d, base, one_slice_ctas, k_blocks, kMaxSplits);
  int k_slices = s.k_slices > 0 ? s.k_slices : 1;
  // A gated GEMM that the tile gates in registers runs unsplit where one wave would take at
  // most kGatedInRegistersMaxSplits: a second split fills the wave better, but gains less than
  // the reduce kernel it brings costs (bf16 4096x28672 M = 16 on an H100: 26.3 us unsplit, 27.0
  // with 2 splits and the reduce kernel; NOTES.md, session 37).
  // On Hopper it runs kGatedHopperSplits splits where K has the k blocks for them (measured in
  // the model, above), otherwise 2 k slices per CTA where the tile has them: twice the warps per
  // SM without a workspace or reduce kernel (H200, 4096x28672 gated at M = 16: bf16 27.7 us
  // against 28.9 in one slice, fp16 25.4 against 27.4; NOTES.md, session 48). Not measured on the
  // A100, which keeps one slice.
  if (s.splits == 0 && p.gated && inst.gates_in_registers &&
      splits <= kGatedInRegistersMaxSplits) {
    const int hopper_splits = std::min(kGatedHopperSplits, k_blocks / kGatedSplitMinBlocks);
    if (d.wgmma && s.k_slices == 0 && hopper_splits > kGatedInRegistersMaxSplits) {
      splits = hopper_splits;
    } else {
      splits = 1;
      if (s.k_slices == 0 && d.wgmma && inst.max_k_slices == 2 && k_blocks >= 4) k_slices = 2;
    }
  }
  // Hopper's INT8 16-row tile where its columns alone fill the SMs: unsplit (gated in registers
  // where gated), as hopper_small_m_kernel chose it (int8_on_mma_unsplit).
  if (s.splits == 0 && int8_on_mma_unsplit(p, d)) splits = 1;
  plan.k_slices = k_slices;
  plan.threads = inst.threads * k_slices;
  plan.warps = plan.threads / 32;
  plan.smem_bytes = k_slices == 1 ? inst.smem_bytes : inst.sliced_smem_bytes;
  plan.ctas_per_sm = occupancy_ctas_per_sm(d, plan.threads, inst.registers, plan.smem_bytes);
  if (k_slices > 1 && plan.ctas_per_sm < 1)
    refuse("schedule: k_slices=" + std::to_string(k_slices) + " does not fit device '" + d.name +
           "' (" + std::to_string(plan.smem_bytes) + " B of shared memory per CTA)");
  plan.splits = non_empty_splits(splits, k_blocks);
}


// A wgmma grid's CTAs over its resident slots (the CTAs per SM times the SMs): at most 1 in one
// wave.
double wgmma_slot_share(MixedGemmProblem const& p, DeviceSpec const& d, MixedSchedule const& s,
                        MixedInstanceInfo const& inst, int k_blocks) {
  const int64_t ctas = wgmma_output_tiles(p, inst) * wgmma_splits(p, d, s, inst, k_blocks);
  return double(ctas) / (double(instance_ctas_per_sm(d, inst)) * d.sm_count);
}

// The scales of the wgmma tile by default, where the groups are whole k blocks (or all of K,
// mixed::whole_block_groups); rounded weights elsewhere (with finer groups these tiles take
// turns with the tensor cores: 4-32% slower at M = 24-32, session 19) and in the taller tiles,
// which have no exact scales.
// - INT4's 16- and 32-row tiles: exact. They dequantize a block while the previous one's wgmmas
//   run (mixed_wgmma_kernel's per_block loop) with fewer instructions than rounded weights.
//   H200, us, exact against rounded: s63 M = 16, bf16 4096x6144 8.6 / 8.9, 4096x4096 6.3 / 6.3,
//   14336x4096 13.3 / 13.9, 4096x28672 23.5 / 25.7; fp16 8192x8192 14.3 / 15.0, 28672x8192
//   42.8 / 46.7. s64 M = 32, fp16: 4096x4096 7.4 / 7.6, 4096x28672 28.6 / 29.9, 14336x4096 14.8 /
//   16.0, 8192x8192 16.6 / 17.8, 28672x8192 52.7 / 56.1 (M = 17 and 24 alike).
// - INT8's 32-row tile: exact where its grid is one wave that fills its slots (2 CTAs per SM)
//   better than the rounded tile's grid fills its 3 (wgmma_slot_share; grids of more waves were not
//   measured); where both fill alike the two were within +-2.5%. Unsplit, the exact tile gates in
//   registers, the rounded one in the reduce kernel. H200, us, M = 16 / 24 / 32, default (rounded,
//   or mma.sync at M = 16 where its columns fill the SMs) -> exact (NOTES.md, session 76): bf16
//   4096x4096 (8 splits filling 256 of 264 slots, against 11 filling 352 of 396)
//   9.57 / 9.80 / 10.36 -> 8.37 / 8.69 / 9.13, 4096x28672 (unsplit, 224 CTAs) M = 24 / 32
//   44.46 / 46.68 -> 42.04 / 42.84, gated 56.32 / 56.69 -> 41.82 / 42.74; fp16 4096x4096
//   8.42 / 8.81 / 9.33 -> 7.62 / 7.95 / 8.40, gated 4096x28672 45.10 / 45.85 -> 37.11 / 38.32.
//   Where the rounded grid fills better, exact lost 2-4% (4096x6144: 5 splits filling 240 of 264
//   slots, against 8 filling 384 of 396; bf16 M = 16 11.03 -> 11.47). On 17 other shapes the rule's
//   45 changed plans were 1.04x faster (geometric mean; gated 5120x27648 bf16 M = 24
//   69.40 -> 53.25, 4096x2048 7.72 -> 6.59 at M = 16), at worst 2.9% slower (4096x3072 bf16 M = 16;
//   N = 512 grids, the same splits either way, 1-2%); where it kept rounded weights those were
//   1.03x faster than exact (4096x22016: rounded in 2 splits 33.64 against exact unsplit 40.80 at
//   M = 24, gated alike).
MixedSchedule::Scales default_wgmma_scales(MixedGemmProblem const& p, DeviceSpec const& d,
                                           MixedSchedule const& s, int tile_m, int group,
                                           int k_blocks) {
  if (!mixed::whole_block_groups(p.bits, group, p.k)) return MixedSchedule::Scales::kRounded;
  if (p.bits == 4) {
    return tile_m <= 32 ? MixedSchedule::Scales::kExact : MixedSchedule::Scales::kRounded;
  }
  if (tile_m >= kWsExactMinTileM) {
    return group == p.k && find_instance(MixedKernel::kWgmma, p, tile_m, false,
                                         MixedSchedule::Scales::kExact, s.tile_n) >= 0
               ? MixedSchedule::Scales::kExact
               : MixedSchedule::Scales::kRounded;
  }
  if (tile_m != 32) return MixedSchedule::Scales::kRounded;
  const int exact = find_instance(MixedKernel::kWgmma, p, tile_m, false,
                                  MixedSchedule::Scales::kExact, s.tile_n);
  const int rounded = find_instance(MixedKernel::kWgmma, p, tile_m, false,
                                    MixedSchedule::Scales::kRounded, s.tile_n);
  if (exact < 0 || rounded < 0) return MixedSchedule::Scales::kRounded;
  const double exact_share = wgmma_slot_share(p, d, s, mixed_instance(exact), k_blocks);
  return exact_share <= 1.0 &&
                 exact_share > wgmma_slot_share(p, d, s, mixed_instance(rounded), k_blocks)
             ? MixedSchedule::Scales::kExact
             : MixedSchedule::Scales::kRounded;
}

// Hopper at M <= kMmaSyncMaxM: INT8 runs wgmma unless mma.sync's columns come near filling the
// SMs (int8_on_mma); INT4 runs wgmma's 16-row tile where it has exact scales (groups of whole k
// blocks, default_wgmma_scales), and otherwise where its split-K slices are short
// (kWgmma16MaxSliceK), mma.sync elsewhere. The exact tile against mma.sync's 16-row tile (H200,
// s63, M = 9 / 16, us): 4096x28672 bf16 23.5 / 23.5 against 24.8 / 25.4, gated (in registers
// against mma.sync's 4 splits and the reduce kernel) bf16 24.2 / 24.4 against 24.0 / 24.5, fp16
// 22.6 / 23.5 against 23.4 / 24.7; 28672x8192 fp16 41.5 / 42.8 against 41.2 / 42.6.
MixedKernel hopper_small_m_kernel(MixedGemmProblem const& p, DeviceSpec const& d, int k_blocks,
                                  int group) {
  if (p.bits != 4) {
    return int8_on_mma(p, d) ? MixedKernel::kMma : MixedKernel::kWgmma;
  }
  if (default_wgmma_scales(p, d, MixedSchedule{}, 16, group, k_blocks) ==
          MixedSchedule::Scales::kExact &&
      find_instance(MixedKernel::kWgmma, p, 16, false, MixedSchedule::Scales::kExact) >= 0) {
    return MixedKernel::kWgmma;
  }
  const int index = find_instance(MixedKernel::kWgmma, p, 16, false);
  if (index < 0) return MixedKernel::kMma;
  const int splits = wgmma_splits(p, d, MixedSchedule{}, mixed_instance(index), k_blocks);
  const int64_t slice_k = int64_t(ceil_div(k_blocks, splits)) * mixed::block_k(p.bits);
  return slice_k <= kWgmma16MaxSliceK ? MixedKernel::kWgmma : MixedKernel::kMma;
}

// Rows each SM computes in `inst`'s grid of `splits` k slices, in units of the whole K: waves of
// resident CTAs times the token tile over the splits (the time of a grid of more than one wave
// grows with its last, partial wave).
double rows_per_sm(MixedGemmProblem const& p, DeviceSpec const& d, MixedInstanceInfo const& inst,
                   int splits) {
  const int64_t ctas = wgmma_output_tiles(p, inst) * splits;
  const int64_t resident = int64_t(instance_ctas_per_sm(d, inst)) * d.sm_count;
  return double(ceil_div(ctas, resident) * inst.tile_m) / splits;
}

// The default token tile from 129 rows: from 256 rows down through 192, 160 and 128, each tile
// replaces the choice so far where it computes no more rows per SM in as many M tiles, or at most
// kWgmmaRowsShare of them in more; then 128 rows where the choice's grid splits K short
// (kWgmmaShortSplitK) and 128 rows pad M no further.
int fitted_wide_tile(MixedGemmProblem const& p, DeviceSpec const& d, MixedSchedule const& s,
                     int index_256, MixedSchedule::Scales scales, int k_blocks) {
  auto rows = [&](int index) {
    MixedInstanceInfo const& inst = mixed_instance(index);
    return rows_per_sm(p, d, inst, wgmma_splits(p, d, s, inst, k_blocks));
  };
  auto m_tiles = [&](int index) { return ceil_div(p.m, mixed_instance(index).tile_m); };
  int index = index_256;
  double index_rows = rows(index);
  int index_128 = -1;
  for (int tile_m : {192, 160, 128}) {
    const int smaller = find_instance(MixedKernel::kWgmma, p, tile_m, false, scales);
    if (smaller < 0) continue;
    if (tile_m == 128) index_128 = smaller;
    const double share = m_tiles(smaller) == m_tiles(index) ? 1.0 : kWgmmaRowsShare;
    const double smaller_rows = rows(smaller);
    if (smaller_rows <= share * index_rows) index = smaller, index_rows = smaller_rows;
  }
  if (index_128 < 0 || index == index_128) return index;
  MixedInstanceInfo const& inst = mixed_instance(index);
  const int splits = wgmma_splits(p, d, s, inst, k_blocks);
  const bool short_split =
      int64_t(ceil_div(k_blocks, splits)) * mixed::block_k(p.bits) <= kWgmmaShortSplitK &&
      ceil_div(p.m, 128) * 128 <= m_tiles(index) * inst.tile_m;
  return short_split ? index_128 : index;
}

// The 16-row tile's 64-column instance (with the same scales) in place of `index_128` (the
// 128-column one) where the latter's grid splits K kWgmma16NarrowMinSplits ways or more on `d`;
// `index_128` otherwise.
int narrow_wgmma16(MixedGemmProblem const& p, DeviceSpec const& d, MixedSchedule::Scales scales,
                   int index_128, int k_blocks) {
  const int narrow = find_instance(MixedKernel::kWgmma, p, 16, false, scales, 64);
  if (narrow < 0) return index_128;
  const int splits = wgmma_splits(p, d, MixedSchedule{}, mixed_instance(index_128), k_blocks);
  const bool short_splits = ceil_div(k_blocks, splits) <= kWgmma16NarrowMaxSplitBlocks;
  return splits >= kWgmma16NarrowMinSplits || short_splits ? narrow : index_128;
}

// wgmma: the scheduled token tile or default_wgmma_tile_m, where that is 256 rows the tile that
// fits the grid best (fitted_wide_tile), where it is 16 rows the columns narrow_wgmma16 picks;
// the scheduled scales or default_wgmma_scales; the scheduled loads or, for INT4's 64-row tile,
// its cp.async form where kCpAsyncMaxRows says.
void plan_wgmma(MixedPlan& plan, MixedGemmProblem const& p, DeviceSpec const& d,
                MixedSchedule const& s, int k_blocks, int group) {
  int tile_m = s.tile_m;
  if (tile_m == 0) {
    tile_m = default_wgmma_tile_m(p);
    // Exact scales: the 16-row (INT4) and 32-row tiles have them.
    if (s.scales == MixedSchedule::Scales::kExact && p.m <= 32 &&
        find_instance(MixedKernel::kWgmma, p, tile_m, false, s.scales, s.tile_n) < 0) {
      tile_m = 32;
    }
  }
  const MixedSchedule::Scales scales =
      s.scales != MixedSchedule::Scales::kAuto
          ? s.scales
          : default_wgmma_scales(p, d, s, tile_m, group, k_blocks);
  int index = find_instance(MixedKernel::kWgmma, p, tile_m, false, scales, s.tile_n, s.loads);
  if (index < 0) {
    char const* const scales_asked[] = {"", " and exact scales", " and rounded weights"};
    char const* const loads_asked[] = {"", " filled by TMA", " filled by cp.async"};
    refuse("schedule: no wgmma instance with tile_m=" + std::to_string(tile_m) +
           (s.tile_n > 0 ? ", tile_n=" + std::to_string(s.tile_n) : std::string()) +
           scales_asked[int(s.scales)] + loads_asked[int(s.loads)] + " for INT" +
           std::to_string(p.bits) +
           (s.loads == MixedSchedule::Loads::kCpAsync
                ? " (loads=cp_async: INT4's 64-row tile and INT8's 32-row tiles)"
                : std::string()));
  }
  if (s.tile_m == 0 && s.tile_n == 0 && tile_m == 256) {
    index = fitted_wide_tile(p, d, s, index, scales, k_blocks);
  }
  if (s.tile_n == 0 && tile_m == 16) {
    index = narrow_wgmma16(p, d, scales, index, k_blocks);
  }
  if (mixed_instance(index).producer && mixed_instance(index).exact_scales && group != p.k) {
    refuse("schedule: scales=exact on the warp-specialized wgmma tiles (tile_m=" +
           std::to_string(mixed_instance(index).tile_m) +
           ") needs one group over K (per-channel scales); this problem has groups of " +
           std::to_string(group) + " over K = " + std::to_string(p.k));
  }
  int splits = wgmma_splits(p, d, s, mixed_instance(index), k_blocks);
  if (s.loads == MixedSchedule::Loads::kAuto && mixed_instance(index).tma_loads &&
      !mixed_instance(index).producer && p.m <= kCpAsyncMaxRows &&
      ceil_div(k_blocks, splits) >= kCpAsyncMinSplitBlocks) {
    const int cp_async = find_instance(MixedKernel::kWgmma, p, tile_m, false, scales, s.tile_n,
                                       MixedSchedule::Loads::kCpAsync);
    if (cp_async >= 0) {
      index = cp_async;
      splits = wgmma_splits(p, d, s, mixed_instance(index), k_blocks);
    }
  }
  fill_from_instance(plan, index);
  plan.ctas_per_sm = instance_ctas_per_sm(d, mixed_instance(index));
  plan.splits = splits;
}

// The raster group of a warp-specialized wgmma grid (MixedPlan::raster_m), from a model of the
// DRAM bytes one wave of resident CTAs reads: a wave in groups of g M tiles covers g M tiles x
// wave / g N tiles (row-major, g = 1: all N tiles of wave / tiles_n M tiles), and each operand
// tile it covers comes from DRAM once, so the weights are read tiles_m / (M tiles covered) times
// and the activations tiles_n / (N tiles covered) times. The smallest g of 2, 4, 8, 16 that
// models the fewest bytes replaces row-major where it cuts them to kRasterBytesShare or less
// (4096x28672 INT8 at M = 4096: DRAM throughput 45% -> 14%, SM clock 1.49 -> 1.55 GHz, 3.4%
// faster on an H100; NOTES.md, session 30). Grids of one M tile stay row-major.
int raster_rows(MixedGemmProblem const& p, DeviceSpec const& d, MixedPlan const& plan) {
  const double tiles_m = double(plan.grid[1]), tiles_n = double(plan.grid[0]);
  if (plan.grid[1] < 2) return 1;
  const double wave = double(plan.ctas_per_sm) * d.sm_count;  // of split 0's tiles first
  const int group = mixed::effective_group_size(p.group_size, int(p.k));
  const double weight_bytes =  // packed weights and scales (zero points, if any, not counted)
      double(p.n) * double(p.k) * p.bits / 8 + double(p.n) * double(ceil_div(p.k, group)) * 2;
  const double act_bytes = double(p.m) * double(p.k) * 2;
  auto bytes = [&](double m_tiles, double n_tiles) {
    m_tiles = std::min(std::max(m_tiles, 1.0), tiles_m);
    n_tiles = std::min(std::max(n_tiles, 1.0), tiles_n);
    return weight_bytes * tiles_m / m_tiles + act_bytes * tiles_n / n_tiles;
  };
  const double row_major = bytes(wave / tiles_n, wave);
  int best = 1;
  double best_bytes = row_major;
  for (int g : {2, 4, 8, 16}) {
    if (g > plan.grid[1]) break;
    const double b = bytes(g, wave / g);
    if (b < best_bytes) best = g, best_bytes = b;
  }
  return best_bytes <= kRasterBytesShare * row_major ? best : 1;
}

// The order in which col_warps win a tie: the widest first.
int col_warps_rank(int col_warps) { return col_warps == 4 ? 0 : (col_warps == 2 ? 1 : 2); }

// The most warps per CTA (whole k slices of col_warps) whose stages fit in the device's shared
// memory at `rows` rows; 0 when not even one k slice fits.
int decode_max_warps(DeviceSpec const& d, MixedInstanceInfo const& inst, int rows,
                     int col_warps) {
  return inst.decode_max_warps(rows, col_warps, d.smem_per_block_optin);
}

// single_row: at M = 1, where the instance's single-row copies fit (MixedPlan::single_row); one-
// warp k slices then run that instance.
int decode_ctas_per_sm(DeviceSpec const& d, MixedInstanceInfo const& inst, int rows, int warps,
                       int col_warps, bool gated, bool single_row) {
  return occupancy_ctas_per_sm(
      d, 32 * warps, inst.decode_registers(col_warps, gated, single_row && col_warps == 1),
      inst.decode_smem_bytes(rows, warps, col_warps));
}

// Decode: CTAs of k slices of col_warps warps (32 columns each, sharing the activations), each k
// slice a part of the CTA's k range, summed in shared memory, so that one wave fills the GPU
// without a second kernel where it can. Candidates: col_warps 1, 2, 4; k slices per CTA (each at
// least 2 k blocks) whose CTAs fit in one wave; no split or the splits that fill the wave. The
// plan takes, in order: a split-K grid only where it is cheap (kDecodeMinSplitK), the most warps
// busy in the wave (shared memory bounds the CTAs per SM at larger M), the fewest splits, the
// preferred col_warps (col_warps_rank; only 1 below kDecodeSharedFromM); 1-warp slices of a
// grid of several waves come kManyWavesSlices to a CTA, and short INT4 slices of a grid of more
// CTAs than SMs are lengthened at M <= 2 (kShortSliceBlocks); with partial sums, a long K's
// one-wave grid of wide CTAs runs CTAs of kPartialsCtaWarps in splits; on Hopper an INT8 or gated
// bf16 INT4 grid of narrow CTAs at small M takes CTAs of kSlicedCtaWarps where they make one to
// two waves; on Hopper wide CTAs that leave SMs idle take kWideToSlicedWarps 1-warp slices, and
// 1-warp-wide CTAs one per SM at most kSlicedCapWarps; an ungated grid of few columns runs one
// CTA per SM in splits (kFewColumnsShare).
// Scheduled splits get as many k slices as the split has k blocks; scheduled warps are
// rounded down to whole k slices.
void plan_decode(MixedPlan& plan, MixedGemmProblem const& p, DeviceSpec const& d,
                 MixedSchedule const& s, int k_blocks, int group) {
  const bool fine = mixed::fine_groups_for(p.bits, group, p.k);
  const int index = find_instance(MixedKernel::kDecode, p, 8, fine);
  if (index < 0) refuse("no decode instance for this problem");
  fill_from_instance(plan, index);
  MixedInstanceInfo const& inst = mixed_instance(index);
  const int rows = inst.decode_rows(int(p.m));
  const bool single_row = p.m == 1 && inst.decode_single_row(group, int(ceil_div(p.k, group)));
  const int64_t m_tiles = ceil_div(p.m, inst.tile_m);
  // The CTAs of an unsplit grid whose k slices are `cw` warps (32 columns each) wide.
  auto col_ctas = [&](int cw) { return ceil_div(p.n, 32 * cw) * m_tiles; };
  const int64_t narrow_ctas = col_ctas(1);  // CTAs of 32-column k slices
  const int64_t sms = d.sm_count;
  auto tried = [&](int cw) {
    if (s.col_warps > 0 ? cw != s.col_warps : (cw > 1 && p.m < kDecodeSharedFromM)) return false;
    return decode_max_warps(d, inst, rows, cw) >= cw;
  };
  // Whether some unsplit grid has CTAs for half the SMs (the one of 32-column k slices has most).
  bool unsplit_fills = false;
  for (int cw : kColWarpChoices) {
    if (tried(cw)) unsplit_fills |= 2 * col_ctas(cw) >= sms;
  }
  // 1-warp CTAs of 1-warp k slices more than fill a wave (kManyWavesSlices).
  const bool many_waves =
      s.warps == 0 && s.splits == 0 && tried(1) &&
      narrow_ctas > int64_t(decode_ctas_per_sm(d, inst, rows, 1, 1, p.gated, single_row)) * sms;
  // The best candidate's key: (cheap split, busy warps, -splits, -rank), compared in order;
  // 1-warp-wide CTAs take at most `slice_cap` k slices.
  bool best_cheap = false;
  int64_t best_busy = -1;
  int best_rank = 0;
  auto choose = [&](int slice_cap) {
    best_cheap = false;
    best_busy = -1;
    best_rank = 0;
    plan.splits = 1;
    for (int cw : kColWarpChoices) {
      if (!tried(cw)) continue;
      int max_slices = decode_max_warps(d, inst, rows, cw) / cw;
      if (k_blocks / 2 < max_slices) max_slices = k_blocks / 2 > 1 ? k_blocks / 2 : 1;
      const int64_t base = col_ctas(cw);
      const int rank = col_warps_rank(cw);
      int lo = 1, hi = max_slices;
      if (s.splits > 0) {
        const int per_split = (k_blocks + s.splits - 1) / s.splits;
        lo = hi = std::max(1, std::min(per_split, max_slices));
      }
      if (s.warps > 0) lo = hi = std::max(1, std::min(s.warps / cw, max_slices));
      if (many_waves && cw == 1) {
        lo = hi = std::max(1, std::min({kManyWavesSlices, k_blocks / kManyWavesSliceBlocks,
                                        max_slices}));
      }
      if (cw == 1) hi = std::max(lo, std::min(hi, slice_cap));
      for (int slices = lo; slices <= hi; ++slices) {
        const int w = slices * cw;
        const int per_sm = decode_ctas_per_sm(d, inst, rows, w, cw, p.gated, single_row);
        const int64_t resident = int64_t(per_sm) * sms;
        if (slices > lo && base > resident) continue;  // more than one wave
        const int filling = non_empty_splits(
            wave_splits(d, base, per_sm, k_blocks / slices, kMaxSplits), k_blocks);
        // No split, or the wave-filling splits; scheduled splits: no cost model, the ranked
        // col_warps decide.
        const int options[2] = {1, s.splits > 0 ? non_empty_splits(s.splits, k_blocks) : filling};
        for (int i = s.splits > 0 ? 1 : 0; i < 2; ++i) {
          const int splits = options[i];
          const int64_t ctas = base * splits;
          const bool cheap = s.splits > 0 || splits == 1 || !unsplit_fills ||
                             p.k >= int64_t(kDecodeMinSplitK) * splits;
          const int64_t busy = s.splits > 0 ? 0 : std::min(ctas, resident) * w;
          const bool better =
              best_busy < 0 || cheap > best_cheap ||
              (cheap == best_cheap &&
               (busy > best_busy ||
                (busy == best_busy &&
                 (splits < plan.splits || (splits == plan.splits && rank < best_rank)))));
          if (better) {
            best_cheap = cheap;
            best_busy = busy;
            best_rank = rank;
            plan.warps = w;
            plan.col_warps = cw;
            plan.splits = splits;
            plan.ctas_per_sm = per_sm;
          }
        }
      }
    }
  };
  choose(k_blocks);
  // The measured exceptions below reshape only an unscheduled, unsplit plan of 1-warp k slices
  // (a grid of `narrow_ctas` CTAs).
  auto reshapeable = [&] {
    return best_busy >= 0 && s.warps == 0 && s.splits == 0 && plan.col_warps == 1 &&
           plan.splits == 1;
  };
  // INT4 at M <= 2, more CTAs than SMs and the busiest wave's slices shorter than
  // kShortSliceBlocks: slices of kMinSliceBlocks instead.
  if (reshapeable() && !many_waves && p.bits == 4 && p.m <= kMinSliceMaxM && narrow_ctas > sms &&
      k_blocks < kShortSliceBlocks * plan.warps) {
    choose(std::max(1, k_blocks / kMinSliceBlocks));
  }
  // Hopper, INT8 and gated bf16 INT4 at small M (kSlicedCtaWarps): CTAs of 4 one-warp k slices
  // where they make 1-2 waves.
  const bool sliced_cta_rule = p.bits == 8 ? p.m <= kSlicedCtaInt8MaxM
                                           : p.gated && p.bf16 && p.m <= kSlicedCtaInt4MaxM;
  if (reshapeable() && d.wgmma && sliced_cta_rule && plan.warps < kSlicedCtaWarps &&
      k_blocks >= 2 * kSlicedCtaWarps) {
    const int per_sm = decode_ctas_per_sm(d, inst, rows, kSlicedCtaWarps, 1, p.gated, single_row);
    const int64_t wave = int64_t(per_sm) * sms;
    if (per_sm >= 1 && narrow_ctas >= wave && narrow_ctas <= kSlicedCtaMaxWaves * wave) {
      plan.warps = kSlicedCtaWarps;
      plan.ctas_per_sm = per_sm;
    }
  }
  // Hopper without partial sums (as measured): wide CTAs (from kDecodeSharedFromM rows) that
  // leave SMs idle become CTAs of kWideToSlicedWarps 1-warp slices; 1-warp-wide CTAs, one per SM,
  // keep kSlicedCapWarps slices where CTAs of that many stay one per SM.
  const bool unscheduled = best_busy >= 0 && s.warps == 0 && s.splits == 0 && s.col_warps == 0;
  if (unscheduled && d.wgmma && !p.partials && plan.splits == 1) {
    const int64_t ctas = col_ctas(plan.col_warps);
    const int sliced_per_sm =
        decode_ctas_per_sm(d, inst, rows, kWideToSlicedWarps, 1, p.gated, single_row);
    const int capped_per_sm =
        decode_ctas_per_sm(d, inst, rows, kSlicedCapWarps, 1, p.gated, single_row);
    const double busy_share = 1.0 - kWideIdleSmShare;  // of the SMs
    if (plan.col_warps > 1 && double(ctas) < busy_share * double(sms) && narrow_ctas >= sms &&
        double(narrow_ctas) <= kWideToSlicedMaxPerSm * double(sms) && sliced_per_sm >= 2 &&
        k_blocks >= 2 * kWideToSlicedWarps) {
      plan.warps = kWideToSlicedWarps;
      plan.col_warps = 1;
      plan.ctas_per_sm = sliced_per_sm;
    } else if (plan.col_warps == 1 && plan.warps > kSlicedCapWarps && narrow_ctas <= sms &&
               capped_per_sm == 1 &&
               (p.bits == 8 || double(narrow_ctas) >= busy_share * double(sms))) {
      plan.warps = kSlicedCapWarps;
      plan.ctas_per_sm = capped_per_sm;
    }
  }
  // Hopper, ungated, few columns: one CTA per SM of kFewColumnsWarps 1-warp slices in splits.
  if (unscheduled && d.wgmma && !p.partials && !p.gated && tried(1) &&
      narrow_ctas * kFewColumnsShare <= sms) {
    const int splits =
        non_empty_splits(wave_splits(d, narrow_ctas, 1, k_blocks, kMaxSplits), k_blocks);
    const int split_blocks = int(ceil_div(k_blocks, splits));  // 2 or more for each k slice
    const int warps = std::max(
        1, std::min({kFewColumnsWarps, split_blocks / 2, decode_max_warps(d, inst, rows, 1)}));
    if (p.bits == 8 || warps >= kFewColumnsInt4MinWarps) {
      plan.warps = warps;
      plan.col_warps = 1;
      plan.splits = splits;
      plan.ctas_per_sm = decode_ctas_per_sm(d, inst, rows, warps, 1, p.gated, single_row);
    }
  }
  // Partial sums on a long K: CTAs of kPartialsCtaWarps 1-warp slices, if they fit in one wave.
  if (reshapeable() && p.partials && p.bits == 4 && p.k >= kDecodeMinSplitK &&
      plan.warps > kPartialsCtaWarps && plan.warps % kPartialsCtaWarps == 0) {
    const int per_sm =
        decode_ctas_per_sm(d, inst, rows, kPartialsCtaWarps, 1, p.gated, single_row);
    const int splits = plan.warps / kPartialsCtaWarps;
    if (narrow_ctas * splits <= int64_t(per_sm) * sms &&
        non_empty_splits(splits, k_blocks) == splits) {
      plan.warps = kPartialsCtaWarps;
      plan.splits = splits;
      plan.ctas_per_sm = per_sm;
    }
  }
  if (best_busy < 0) {
    refuse(s.col_warps > 0 ? "schedule col_warps=" + std::to_string(s.col_warps) +
                                 ": not even one k slice of that width fits in shared memory"
                           : "no decode CTA fits in shared memory");
  }
  plan.single_row = single_row && plan.col_warps == 1;
  plan.k_slices = plan.warps / plan.col_warps;
  plan.threads = 32 * plan.warps;
  plan.tile_n = 32 * plan.col_warps;
  plan.smem_bytes = inst.decode_smem_bytes(rows, plan.warps, plan.col_warps);
}

// The token tiles of the wgmma instances (the generated table), ascending, and as text for an
// error message ("16, 32, ... or 256").
std::vector<int> wgmma_tiles(int MixedInstanceInfo::*side = &MixedInstanceInfo::tile_m) {
  std::vector<int> tiles;
  for (int i = 0; i < mixed_instance_count(); ++i) {
    MixedInstanceInfo const& inst = mixed_instance(i);
    if (inst.kernel == MixedKernel::kWgmma) tiles.push_back(inst.*side);
  }
  std::sort(tiles.begin(), tiles.end());
  tiles.erase(std::unique(tiles.begin(), tiles.end()), tiles.end());
  return tiles;
}

std::string list_text(std::vector<int> const& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i)
    text += (i == 0 ? "" : (i + 1 == values.size() ? " or " : ", ")) + std::to_string(values[i]);
  return text;
}

void check_problem(MixedGemmProblem const& p) {
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.m > 0x7fffffff || p.n > 0x7fffffff || p.k > 0x7fffffff)
    refuse("plan_mixed_gemm: need 1 <= M, N, K < 2^31; got M=" + std::to_string(p.m) +
           ", N=" + std::to_string(p.n) + ", K=" + std::to_string(p.k));
  if (p.n % mixed::kBlockN != 0)
    refuse("plan_mixed_gemm: N must be a multiple of 8; got N=" + std::to_string(p.n));
  if (p.gated && p.partials)
    refuse("plan_mixed_gemm: partial sums are for ungated problems (the gate is applied to the "
           "sums)");
  if (p.gated && p.n % (2 * mixed::kBlockN) != 0)
    refuse("plan_mixed_gemm: a gated GEMM needs N (gate and up halves) a multiple of 16; got N=" +
           std::to_string(p.n));
  if (!mixed::valid_bits(p.bits))
    refuse(std::string("plan_mixed_gemm: bits must be ") + mixed::kValidBitsText + "; got bits=" +
           std::to_string(p.bits));
  if (!mixed::valid_group_size(p.group_size))
    refuse(std::string("plan_mixed_gemm: group_size must be ") + mixed::kValidGroupSizesText +
           "; got group_size=" + std::to_string(p.group_size));
}

}  // namespace

int occupancy_ctas_per_sm(DeviceSpec const& d, int threads, int regs, int smem) {
  const int warps = (threads + 31) / 32;
  int ctas = std::min(d.max_ctas_per_sm, d.max_threads_per_sm / (32 * warps));
  // Registers are allocated per warp in units of 256 (8 per thread), from the register file of
  // one of the SM's 4 sub-partitions, each a quarter of it.
  constexpr int kSubPartitions = 4;
  const int regs_per_warp = ((regs * 32 + 255) / 256) * 256;
  if (regs_per_warp > 0) {
    const int warps_by_regs = kSubPartitions * (d.regs_per_sm / kSubPartitions / regs_per_warp);
    ctas = std::min(ctas, warps_by_regs / warps);
  }
  // Shared memory in units of 128 bytes, with the system's share per CTA.
  const int smem_per_cta = ((smem + d.smem_reserved_per_cta + 127) / 128) * 128;
  if (smem_per_cta > 0) ctas = std::min(ctas, d.smem_per_sm / smem_per_cta);
  return std::max(ctas, 0);
}

char const* kernel_name(MixedKernel kernel) {
  switch (kernel) {
    case MixedKernel::kAuto: return "auto";
    case MixedKernel::kDecode: return "decode";
    case MixedKernel::kMma: return "mma";
    case MixedKernel::kWgmma: return "wgmma";
    case MixedKernel::kDense: return "dense";
  }
  return "?";
}

DeviceSpec h100_sxm_spec() {
  DeviceSpec d;
  d.name = "NVIDIA H100 SXM";
  d.sm_count = 132;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.smem_per_sm = 228 * 1024;
  d.smem_per_block_optin = 227 * 1024;
  d.wgmma = true;
  return d;
}

DeviceSpec h200_spec() {
  DeviceSpec d = h100_sxm_spec();
  d.name = "NVIDIA H200";
  return d;
}

DeviceSpec a100_spec() {
  DeviceSpec d;
  d.name = "NVIDIA A100";
  d.sm_count = 108;
  d.cc_major = 8;
  d.cc_minor = 0;
  d.smem_per_sm = 164 * 1024;
  d.smem_per_block_optin = 163 * 1024;
  d.wgmma = false;
  return d;
}

DeviceSpec builtin_device_spec(std::string const& name) {
  if (name == "h100") return h100_sxm_spec();
  if (name == "h200") return h200_spec();
  if (name == "a100") return a100_spec();
  refuse("unknown device '" + name + "': the built-in specs are 'h100', 'h200' and 'a100'");
}

MixedSchedule MixedSchedule::parse(std::string const& text) {
  MixedSchedule s;
  std::stringstream items(text);
  std::string item;
  // v as an integer in lo..hi, or false.
  auto integer = [](std::string const& v, int lo, int hi, int* x) {
    size_t used = 0;
    try {
      *x = std::stoi(v, &used);
    } catch (std::exception const&) {
      used = 0;
    }
    return used == v.size() && !v.empty() && *x >= lo && *x <= hi;
  };
  auto number = [&](std::string const& key, std::string const& v, int lo, int hi) {
    int x = 0;
    if (!integer(v, lo, hi, &x))
      refuse("schedule: " + key + " must be an integer in " + std::to_string(lo) + ".." +
             std::to_string(hi) + "; got '" + v + "'");
    return x;
  };
  while (std::getline(items, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      refuse("schedule: expected key=value items separated by commas; got '" + item + "'");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "kernel") {
      if (value == "auto") s.kernel = MixedKernel::kAuto;
      else if (value == "decode") s.kernel = MixedKernel::kDecode;
      else if (value == "mma") s.kernel = MixedKernel::kMma;
      else if (value == "wgmma") s.kernel = MixedKernel::kWgmma;
      else if (value == "dense") s.kernel = MixedKernel::kDense;
      else refuse("schedule: kernel must be auto, decode, mma, wgmma or dense; got '" + value +
                  "'");
    } else if (key == "tile_m") {
      s.tile_m = number(key, value, 16, 256);
      static const std::vector<int> tiles = wgmma_tiles();
      if (!std::binary_search(tiles.begin(), tiles.end(), s.tile_m))
        refuse("schedule: tile_m must be " + list_text(tiles) + "; got " + value);
    } else if (key == "tile_n") {
      s.tile_n = number(key, value, 8, 256);
      static const std::vector<int> widths = wgmma_tiles(&MixedInstanceInfo::tile_n);
      if (!std::binary_search(widths.begin(), widths.end(), s.tile_n))
        refuse("schedule: tile_n must be " + list_text(widths) + "; got " + value);
    } else if (key == "scales") {
      if (value == "exact") s.scales = MixedSchedule::Scales::kExact;
      else if (value == "rounded") s.scales = MixedSchedule::Scales::kRounded;
      else refuse("schedule: scales must be exact or rounded; got '" + value + "'");
    } else if (key == "loads") {
      if (value == "tma") s.loads = MixedSchedule::Loads::kTma;
      else if (value == "cp_async") s.loads = MixedSchedule::Loads::kCpAsync;
      else refuse("schedule: loads must be tma or cp_async; got '" + value + "'");
    } else if (key == "splits") {
      s.splits = number(key, value, 1, kMaxSplits);
    } else if (key == "warps") {
      s.warps = number(key, value, 1, 16);
    } else if (key == "col_warps") {
      s.col_warps = number(key, value, 1, 4);
      if (s.col_warps == 3) refuse("schedule: col_warps must be 1, 2 or 4; got 3");
    } else if (key == "k_slices") {
      s.k_slices = number(key, value, 1, 2);
    } else if (key == "raster_m") {
      s.raster_m = number(key, value, 1, 64);
    } else if (key == "reduce") {
      if (value == "cluster") s.reduce = MixedSchedule::Reduce::kCluster;
      else if (value == "kernel") s.reduce = MixedSchedule::Reduce::kKernel;
      else refuse("schedule: reduce must be cluster or kernel; got '" + value + "'");
    } else if (key == "stream_k") {
      if (value == "off") {
        s.stream_k = 0;
      } else if (!integer(value, 1, 1 << 20, &s.stream_k)) {
        refuse("schedule: stream_k must be off or a number of CTAs (1.." +
               std::to_string(1 << 20) + "); got '" + value + "'");
      }
    } else if (key == "trigger") {
      if (value == "early") s.trigger = MixedSchedule::Trigger::kEarly;
      else if (value == "late") s.trigger = MixedSchedule::Trigger::kLate;
      else refuse("schedule: trigger must be early or late; got '" + value + "'");
    } else {
      refuse("schedule: unknown key '" + key +
             "' (keys: kernel, tile_m, tile_n, scales, loads, splits, warps, col_warps, "
             "k_slices, raster_m, reduce, stream_k, trigger)");
    }
  }
  return s;
}

std::string MixedSchedule::str() const {
  std::string out;
  auto add = [&](std::string const& item) { out += (out.empty() ? "" : ",") + item; };
  if (kernel != MixedKernel::kAuto) add(std::string("kernel=") + kernel_name(kernel));
  if (tile_m > 0) add("tile_m=" + std::to_string(tile_m));
  if (tile_n > 0) add("tile_n=" + std::to_string(tile_n));
  if (scales != Scales::kAuto) add(scales == Scales::kExact ? "scales=exact" : "scales=rounded");
  if (loads != Loads::kAuto) add(loads == Loads::kTma ? "loads=tma" : "loads=cp_async");
  if (splits > 0) add("splits=" + std::to_string(splits));
  if (warps > 0) add("warps=" + std::to_string(warps));
  if (col_warps > 0) add("col_warps=" + std::to_string(col_warps));
  if (k_slices > 0) add("k_slices=" + std::to_string(k_slices));
  if (raster_m > 0) add("raster_m=" + std::to_string(raster_m));
  if (reduce != Reduce::kAuto) add(reduce == Reduce::kCluster ? "reduce=cluster" : "reduce=kernel");
  if (stream_k >= 0) add(stream_k == 0 ? "stream_k=off" : "stream_k=" + std::to_string(stream_k));
  if (trigger != Trigger::kAuto) add(trigger == Trigger::kEarly ? "trigger=early" : "trigger=late");
  return out;
}

bool MixedSchedule::is_auto() const { return str().empty(); }

std::string MixedPlan::describe() const {
  std::ostringstream o;
  o << kernel_name(kernel);
  if (kernel == MixedKernel::kDense) {
    o << ": dequantize the weight once, then a dense GEMM";
    if (gated) o << ", then SiLU(gate) * up";
    if (partials) o << ", its output as the one partial sum";
    return o.str();
  }
  o << " " << mixed_instance(instance).name << ": tile " << tile_m << "x" << tile_n
    << " (M x N), " << stages << " stages, ";
  if (kernel == MixedKernel::kDecode) {
    o << warps << " warps (" << k_slices << " k slice" << (k_slices > 1 ? "s" : "") << " of "
      << col_warps << ")";
  } else if (kernel == MixedKernel::kWgmma) {
    o << warp_groups << (producer ? " consumer warpgroups + TMA producer" : " warpgroups");
  } else if (k_slices > 1) {
    o << warps << " warps (" << k_slices << " k slices of " << warps / k_slices << ")";
  } else {
    o << warps << " warps";
  }
  o << ", grid " << grid[0] << "x" << grid[1] << "x" << grid[2];
  if (raster_m > 1) o << " in groups of " << raster_m << " M tiles";
  o << ", " << ctas_per_sm << " CTA/SM";
  if (early_dependents) o << ", next kernel launched at its start";
  if (single_row) o << ", single-row copies";
  if (partials) {
    o << ", " << splits << " fp32 partial sum" << (splits > 1 ? "s" : "") << " to the caller ("
      << workspace_bytes << " B, no reduce kernel)";
  } else if (reduce_in_cluster) {
    o << ", split-K " << splits << " (sums added in a cluster of the splits)";
  } else if (splits > 1) {
    o << ", split-K " << splits << " (workspace " << workspace_bytes << " B)";
  }
  if (stream_k_ctas > 0 && producer) {
    o << ", " << grid[1] - 1 << " full waves of " << stream_k_ctas << " tiles, then stream-K over "
      << stream_k_ctas << " CTAs (workspace " << workspace_bytes << " B)";
  } else if (stream_k_ctas > 0) {
    o << ", stream-K over " << stream_k_ctas << " CTAs (workspace " << workspace_bytes << " B)";
  }
  if (gated) {
    o << (!via_workspace ? ", SiLU(gate) * up in registers"
                         : ", SiLU(gate) * up in the reduce kernel (workspace " +
                               std::to_string(workspace_bytes) + " B)");
  }
  o << (exact_scales ? ", exact scales" : ", rounded weights");
  if (fine_groups) o << ", fine groups";
  return o.str();
}

// Where the plan's kernel lets the next kernel launch (MixedPlan::early_dependents): the
// schedule's trigger, else the decode grids that fill the SMs (kEarlyDependentsFill) and the gated
// 16-row wgmma grids of one partial wave (kEarlyDependentsGated16); refuses a trigger the kernel
// cannot honour (the warp-specialized wgmma tiles trigger after their loop).
void plan_trigger(MixedPlan& plan, DeviceSpec const& d, MixedSchedule const& s) {
  const double ctas = double(plan.grid[0]) * double(plan.grid[1]) * double(plan.grid[2]);
  const double slots = double(plan.ctas_per_sm) * d.sm_count;
  if (s.trigger != MixedSchedule::Trigger::kAuto) {
    if (plan.kernel == MixedKernel::kWgmma && plan.producer)
      refuse(kTriggerScope + plan.describe());
    plan.early_dependents = s.trigger == MixedSchedule::Trigger::kEarly;
  } else if (plan.kernel == MixedKernel::kDecode) {
    plan.early_dependents = ctas >= kEarlyDependentsFill * slots;
  } else if (plan.kernel == MixedKernel::kWgmma) {
    plan.early_dependents = kEarlyDependentsGated16 && !plan.producer && plan.gates_in_kernel() &&
                            plan.tile_m == 16 && plan.splits == 1 && plan.stream_k_ctas == 0 &&
                            ctas < slots;
  }
}

// The warp-specialized tiles' stream-K (mixed_wgmma_ws_kernel.cuh's StreamK form): C CTAs per
// wave run the first floor(tiles / C) * C tiles whole, one each, and then share the k blocks of
// the rest (fewer than C) evenly; grid (C, full waves + 1). Unsplit, that last wave takes a
// whole tile's time on part of the SMs; shared, each CTA runs the fill's share of a tile plus
// the hand-over of partial sums. By default C is the resident slots, where there is at least one
// full wave and the tiles past it fill at most kWsStreamKMaxFill of the slots.
void plan_ws_stream_k(MixedPlan& plan, MixedGemmProblem const& p, DeviceSpec const& d,
                      MixedSchedule const& s, MixedInstanceInfo const& inst, int k_blocks) {
  const int64_t tiles = plan.grid[0] * plan.grid[1];
  auto tail = [&](int64_t ctas) { return tiles % ctas; };  // the tiles past the full waves
  // Whether `ctas` CTAs can run it: an unsplit, ungated plan without partial sums, and tiles past
  // the full waves with at least one k block for each CTA.
  auto runs = [&](int64_t ctas) {
    return inst.stream_k_partial_floats > 0 && plan.splits == 1 && !plan.via_workspace &&
           tail(ctas) > 0 && ctas <= tail(ctas) * k_blocks &&
           mixed::stream_k_fits_32_bits(tail(ctas) * k_blocks, int(ctas));
  };
  int64_t ctas = s.stream_k;
  if (ctas > 0) {
    if (!runs(ctas)) {
      refuse("schedule: stream_k=" + std::to_string(ctas) + " on a warp-specialized wgmma tile "
             "needs it unsplit, not gated, no partial sums, and a number of CTAs that leaves "
             "tiles past the full waves (" + std::to_string(tiles) + " tiles) with at least one "
             "k block each; this plan runs " + plan.describe());
    }
  } else {
    ctas = int64_t(plan.ctas_per_sm) * d.sm_count;
    if (s.splits > 0 || tiles <= ctas || !runs(ctas) ||
        double(tail(ctas)) > kWsStreamKMaxFill * double(ctas))
      return;
  }
  plan.stream_k_ctas = int(ctas);
  plan.grid[0] = ctas;
  plan.grid[1] = tiles / ctas + 1;
  plan.workspace_bytes = size_t(mixed::stream_k_workspace_bytes(
      plan.stream_k_ctas, inst.stream_k_partial_floats, 4 * inst.warp_groups));
}

// Stream-K for `plan` (unsplit, of an instance that can): the schedule's CTAs, or by default one
// per resident slot where kStreamKCostBlocks says; refuses a stream_k the plan cannot run.
// The 16-row tile shares all its tiles' k blocks; the warp-specialized tiles run full waves of
// the CTAs and share the tiles past them (plan_ws_stream_k).
void plan_stream_k(MixedPlan& plan, MixedGemmProblem const& p, DeviceSpec const& d,
                   MixedSchedule const& s, MixedInstanceInfo const& inst, int k_blocks,
                   int group) {
  if (s.stream_k == 0) return;
  if (inst.producer) return plan_ws_stream_k(plan, p, d, s, inst, k_blocks);
  const int64_t tiles = plan.grid[0];
  const bool can = inst.stream_k_partial_floats > 0 && plan.splits == 1 && plan.grid[1] == 1 &&
                   !p.partials && mixed::whole_block_groups(p.bits, group, p.k) &&
                   (!p.gated || inst.gates_in_registers);
  if (s.stream_k > 0) {
    if (!can || s.stream_k < tiles || s.stream_k > tiles * k_blocks ||
        !mixed::stream_k_fits_32_bits(tiles * k_blocks, s.stream_k)) {
      refuse("schedule: stream_k=" + std::to_string(s.stream_k) + " needs INT4's 16-row wgmma "
             "tile in 128 columns with exact scales, unsplit, one M tile (M <= 16), groups of "
             "whole k blocks, no partial sums, and from the tiles (" + std::to_string(tiles) +
             ") to the tiles' k blocks (" + std::to_string(tiles * k_blocks) + ") CTAs, their "
             "product with the k blocks below 2^32, or a warp-specialized tile (tile_m >= 128); "
             "this plan runs " + plan.describe());
    }
    plan.stream_k_ctas = s.stream_k;
  } else {
    const int64_t slots = int64_t(plan.ctas_per_sm) * d.sm_count;
    const double max_fill = 1.0 - double(kStreamKCostBlocks) / k_blocks;
    if (!can || s.splits > 0 || tiles <= d.sm_count || double(tiles) > max_fill * slots ||
        !mixed::stream_k_fits_32_bits(tiles * k_blocks, int(slots)))
      return;
    plan.stream_k_ctas = int(slots);
  }
  plan.grid[0] = plan.stream_k_ctas;
  plan.workspace_bytes = size_t(mixed::stream_k_workspace_bytes(
      plan.stream_k_ctas, inst.stream_k_partial_floats, 4 * inst.warp_groups));
}

MixedPlan plan_mixed_gemm(MixedGemmProblem const& p, DeviceSpec const& d, MixedSchedule const& s) {
  check_problem(p);
  if (d.sm_count < 1 || d.smem_per_sm < 1 || d.smem_per_block_optin < 1)
    refuse("plan_mixed_gemm: device spec '" + d.name + "' lacks its SM count or shared memory");
  const int group = mixed::effective_group_size(p.group_size, int(p.k));
  const int bk = mixed::block_k(p.bits);
  const int k_blocks = int(ceil_div(p.k, bk));

  MixedKernel kernel = s.kernel;
  if (kernel == MixedKernel::kAuto) {
    if (s.tile_m > 0 || s.tile_n > 0 || s.scales != MixedSchedule::Scales::kAuto ||
        s.loads != MixedSchedule::Loads::kAuto)
      kernel = MixedKernel::kWgmma;
    else if (s.warps > 0 || s.col_warps > 0) kernel = MixedKernel::kDecode;
    else if (s.k_slices > 0) kernel = MixedKernel::kMma;
  }
  if (kernel == MixedKernel::kAuto) {
    if (p.m <= kDecodeMaxM) kernel = MixedKernel::kDecode;
    else if (d.wgmma)
      kernel = p.m <= kMmaSyncMaxM ? hopper_small_m_kernel(p, d, k_blocks, group)
                                   : MixedKernel::kWgmma;
    else kernel = p.m < kDenseFromMMmaSync ? MixedKernel::kMma : MixedKernel::kDense;
  }
  // What the schedule asks must fit the kernel it runs.
  auto only_for = [&](bool set, char const* field, MixedKernel k) {
    if (set && kernel != k)
      refuse(std::string("schedule: ") + field + " applies to the " + kernel_name(k) +
             " kernel; this plan runs " + kernel_name(kernel));
  };
  only_for(s.tile_m > 0, "tile_m", MixedKernel::kWgmma);
  only_for(s.tile_n > 0, "tile_n", MixedKernel::kWgmma);
  only_for(s.scales != MixedSchedule::Scales::kAuto, "scales", MixedKernel::kWgmma);
  only_for(s.loads != MixedSchedule::Loads::kAuto, "loads", MixedKernel::kWgmma);
  only_for(s.warps > 0, "warps", MixedKernel::kDecode);
  only_for(s.col_warps > 0, "col_warps", MixedKernel::kDecode);
  only_for(s.k_slices > 0, "k_slices", MixedKernel::kMma);
  only_for(s.raster_m > 0, "raster_m", MixedKernel::kWgmma);
  if (s.splits > 0 && kernel == MixedKernel::kDense)
    refuse("schedule: splits applies to the fused kernels; this plan runs dense");
  if (s.reduce != MixedSchedule::Reduce::kAuto && kernel == MixedKernel::kDense)
    refuse("schedule: reduce applies to the fused kernels; this plan runs dense");
  if (s.trigger != MixedSchedule::Trigger::kAuto &&
      (kernel == MixedKernel::kDense || kernel == MixedKernel::kMma))
    refuse(kTriggerScope + std::string(kernel_name(kernel)));
  if (kernel == MixedKernel::kDecode && p.m > kDecodeMaxM)
    refuse("schedule: kernel=decode runs up to M=" + std::to_string(kDecodeMaxM) + "; got M=" +
           std::to_string(p.m));
  if (kernel == MixedKernel::kWgmma && !d.wgmma)
    refuse("schedule: kernel=wgmma needs a Hopper GPU (compute capability 9.0) and a build with "
           "sm_90a code (TORCH_CUDA_ARCH_LIST with 9.0a); device '" + d.name + "' (sm_" +
           std::to_string(d.cc_major) + std::to_string(d.cc_minor) + ") has none");

  MixedPlan plan;
  plan.kernel = kernel;
  plan.gated = p.gated;
  plan.partials = p.partials;
  switch (kernel) {
    case MixedKernel::kDense: return plan;
    case MixedKernel::kDecode: plan_decode(plan, p, d, s, k_blocks, group); break;
    case MixedKernel::kWgmma: plan_wgmma(plan, p, d, s, k_blocks, group); break;
    default: plan_mma(plan, p, d, s, k_blocks, group); break;
  }
  plan.grid[0] = ceil_div(p.n, plan.tile_n);
  plan.grid[1] = ceil_div(p.m, plan.tile_m);
  plan.grid[2] = plan.splits;
  if (plan.producer) {
    plan.raster_m = s.raster_m > 0 ? s.raster_m : raster_rows(p, d, plan);
  } else if (s.raster_m > 0) {  // a wgmma tile without a producer warpgroup
    refuse("schedule: raster_m applies to the warp-specialized wgmma tiles (tile_m >= 128, and "
           "INT8's 64); this plan runs " + plan.describe());
  }
  MixedInstanceInfo const& inst = mixed_instance(plan.instance);
  const bool cluster_fits = plan.splits > 1 && plan.splits <= inst.max_cluster_splits &&
                            !p.partials && (!p.gated || inst.gates_in_registers);
  if (s.reduce == MixedSchedule::Reduce::kCluster && !cluster_fits) {
    refuse("schedule: reduce=cluster needs split-K (2.." +
           std::to_string(std::max(inst.max_cluster_splits, 2)) +
           " splits) on a wgmma tile without a producer warpgroup, no partial sums, and gated "
           "only on a tile that gates in registers; this plan runs " + plan.describe());
  }
  plan.reduce_in_cluster = cluster_fits && s.reduce != MixedSchedule::Reduce::kKernel;
  plan.via_workspace = p.partials || (plan.splits > 1 && !plan.reduce_in_cluster) ||
                       (p.gated && !inst.gates_in_registers);
  plan.workspace_bytes =
      plan.via_workspace ? size_t(plan.splits) * size_t(p.m) * size_t(p.n) * 4 : 0;
  plan_stream_k(plan, p, d, s, inst, k_blocks, group);
  plan_trigger(plan, d, s);
  return plan;
}

}  // namespace cute_gemm
