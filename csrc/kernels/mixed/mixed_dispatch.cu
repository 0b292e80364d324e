// Chooses the kernel (the decode kernel at small M; then mma.sync up to M = 16; above, wgmma on
// sm_90 when the build has sm_90a code, mma.sync otherwise), its instance (M tile, group
// granularity), the split-K factor and how the splits are added, and launches. The kernels are
// instantiated one configuration per translation unit under generated/.

#include <algorithm>
#include <atomic>

#include "kernels/device_info.hpp"
#include "kernels/mixed/generated/mixed_decode_instances.hpp"
#include "kernels/mixed/generated/mixed_instances.hpp"
#include "kernels/mixed/generated/mixed_wgmma_instances.hpp"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"
#include "kernels/tma_map.hpp"

namespace cute_gemm {

namespace {

constexpr int kMaxSplits = 64;
std::atomic<int> g_forced_splits{-1};
std::atomic<int> g_forced_reduce{-1};
std::atomic<int> g_forced_kernel{-1};
std::atomic<int> g_forced_decode_warps{-1};
std::atomic<int> g_forced_col_warps{-1};
std::atomic<int> g_forced_wgmma_tile_m{-1};

int wave_splits(long long base, int ctas_per_sm, int k_blocks, int cap);
int non_empty_splits(int splits, int k_blocks);

constexpr int kDecodeMaxM = 8;   // the decode kernel's largest M (one 8-row token tile)
constexpr int kMmaSyncMaxM = 16;  // the default kernel up to here is mma.sync, wgmma above
// The decode kernel is the default up to this M. Measured on the H200 (probe_mixed.py --kernels,
// g128 INT4 / per-channel INT8, fp16, us, decode vs mma.sync; 4096^2, 4096x28672, 14336x4096,
// 8192^2, 28672x8192):
//   INT4 M=1: 5.0 vs 6.5, 19.6 vs 23.4, 11.2 vs 13.7, 12.2 vs 14.7, 33.4 vs 38.2;
//        M=4: 5.4 vs 6.8, 23.7 vs 23.8, 12.0 vs 13.8, 12.0 vs 14.9, 36.5 vs 39.9 (k groups of 1).
//   INT8 M=1: 7.2 vs 7.3, 32.2 vs 33.5, 16.4 vs 19.4, 18.7 vs 20.5, 62.7 vs 61.3.
// With k groups of 1, 2 and 4 warps (probe_mixed.py --decode-shapes, the best k group):
//   INT4 M=5: 5.4 vs 6.9, 22.4 vs 23.7, 12.3 vs 13.7, 13.2 vs 14.8, 39.9 vs 42.5;
//        M=8: 5.8 vs 6.8, 22.5 vs 23.9, 13.6 vs 13.7, 13.6 vs 14.8, 41.2 vs 43.2;
//   INT8 M=5: 7.3 vs 8.2, 34.3 vs 34.7, 16.5 vs 19.7, 18.6 vs 20.7, 62.0 vs 64.3;
//        M=8: 7.1 vs 8.3, 34.4 vs 35.8, 17.6 vs 19.7, 18.8 vs 20.6, 64.4 vs 63.1.
constexpr int kDecodeDefaultMaxM = 8;

int m_tiles_for(int m) { return m <= 16 ? 1 : (m <= 32 ? 2 : 4); }

// CTAs resident per SM at once (MixedConfig::kMinCtasPerSm): at M <= 16 (4 warps) 4 for INT4
// (56 KB of shared memory, <= 128 registers), 5 for INT8 (42 KB, <= 102 registers); 1 for the
// 8-warp instances of taller M tiles (up to 255 registers). The grid aims at one full wave.
int ctas_per_sm(MixedInstance const& inst) {
  return inst.m_tiles == 1 ? (inst.bits == 8 ? 5 : 4) : 1;
}

// As many splits as fill one wave (ctas_per_sm per SM), at least 2 k blocks per split. Measured on
// the H200 (INT4 g128, M = 1 and 16): one wave beat both fewer CTAs and a second partial wave,
// e.g. 8 splits of 8192x8192 (512 CTAs) 15.3 us vs 6: 15.8, 12: 17.4; 4096x28672 (224 column
// tiles) 2 splits 24.3 us vs 3-4: 23.2-27. At most kMaxClusterSplits for the cluster reduction.
int splits_for(int m, int n, int k_blocks, bool cluster, MixedInstance const& inst) {
  const int mt = inst.m_tiles, tile_n = inst.tile_n;
  const long long base = (long long)((n + tile_n - 1) / tile_n) * ((m + 16 * mt - 1) / (16 * mt));
  return wave_splits(base, ctas_per_sm(inst), k_blocks, cluster ? kMaxClusterSplits : kMaxSplits);
}

// Groups shorter than a packed k block need the scales every 2 k16 steps (the "fine" instances of
// the mma.sync and decode kernels).
bool fine_groups_for(int bits, int group_size, int k) {
  return group_size > 0 && group_size < k && group_size < mixed::block_k(bits);
}

MixedInstance const* find_instance(int m, int bits, int group_size, int k, HalfType dtype) {
  const int mt = m_tiles_for(m);
  const bool fine = fine_groups_for(bits, group_size, k);
  for (MixedInstance const& inst : kMixedInstances) {
    if (inst.bits == bits && inst.m_tiles == mt && inst.fine_groups == fine &&
        inst.bf16 == (dtype == HalfType::kBFloat16)) {
      return &inst;
    }
  }
  return nullptr;
}

// The token tile for M rows: the smallest that holds M (32, 64, 128), then 256-row tiles. Those
// cost less per row than 128-row tiles (each dequantized weight feeds twice the tokens) even with
// the last tile padded, and keep the grid to one wave longer (choose_wgmma_instance makes one
// exception, for grids that split K into short slices). Measured on the H200
// (probe_mixed.py --wgmma-tiles and --sweep-m, INT4 g128, us, 256 vs 128 tiles; 4096^2,
// 4096x28672, 14336x4096, 8192^2, 28672x8192): M=256 23.3 / 23.5, 129.8 / 152.8, 60.8 / 68.7,
// 69.1 / 75.0, 226.1 / 258.2; M=512 38.6 / 38.4, 256.4 / 285.6, 114.1 / 128.3, 127.5 / 151.0,
// 434.3 / 533.9; M=384 (8192^2) 128-row tiles 142.0 vs 123.3 for the 256-row tiles of M=512.
int default_wgmma_tile_m(int m) { return m <= 32 ? 32 : (m <= 64 ? 64 : (m <= 128 ? 128 : 256)); }

// The instance with token tile tile_m.
MixedWgmmaInstance const* find_wgmma_instance(int tile_m, int bits, HalfType dtype) {
  for (MixedWgmmaInstance const& inst : kMixedWgmmaInstances) {
    if (inst.bits == bits && inst.tile_m == tile_m && inst.bf16 == (dtype == HalfType::kBFloat16))
      return &inst;
  }
  return nullptr;
}

// wgmma from M = 17 where usable, mma.sync below (decode), unless overridden. Measured on the H200
// (probe_mixed.py --kernels, INT4 g128, us, mma.sync vs wgmma): 8192x8192 M=1 14.5 vs 15.0 (8-row
// token tiles), M=16 15.1 vs 16.8, M=32 21.4 vs 19.6, M=64 32.9 vs 27.8, M=128 61.6 vs 47.5,
// M=256 106.7 vs 85.9; 28672x8192 M=256 361.9 vs 293.8. At M=32 the two are within 10% either way
// (4096^2 9.1 vs 9.7, 28672x8192 62.6 vs 58.2).
bool use_wgmma(int m) {
  const int forced = g_forced_kernel.load(std::memory_order_relaxed);
  if (forced == int(MixedKernel::kMma) || !mixed_wgmma_usable()) return false;
  return forced == int(MixedKernel::kWgmma) || m > kMmaSyncMaxM;
}

// The decode kernel (mixed_decode_kernel.cuh, any sm_80+ GPU): forced, up to kDecodeMaxM rows; by
// default up to kDecodeDefaultMaxM.
bool use_decode(int m) {
  const int forced = g_forced_kernel.load(std::memory_order_relaxed);
  if (forced == int(MixedKernel::kDecode)) return m <= kDecodeMaxM;
  return forced == -1 && m <= kDecodeDefaultMaxM;
}

MixedDecodeInstance const* find_decode_instance(int m, int bits, int group_size, int k,
                                                HalfType dtype) {
  const int tile_m = 8 * ((m + 7) / 8);
  const bool fine = fine_groups_for(bits, group_size, k);
  for (MixedDecodeInstance const& inst : kMixedDecodeInstances) {
    if (inst.bits == bits && inst.tile_m == tile_m && inst.fine_groups == fine &&
        inst.bf16 == (dtype == HalfType::kBFloat16)) {
      return &inst;
    }
  }
  return nullptr;
}

// Splits for `base` CTAs per split: as many as fill one wave of `ctas_per_sm` per SM, at least 2
// k blocks per split, at most `cap`.
int wave_splits(long long base, int ctas_per_sm, int k_blocks, int cap) {
  const long long wave = (long long)ctas_per_sm * current_sm_count();
  int splits = base >= wave ? 1 : int(wave / base);
  const int max_splits = k_blocks / 2 > 1 ? k_blocks / 2 : 1;
  if (splits > max_splits) splits = max_splits;
  return splits > cap ? cap : splits;
}

// The plan's split count with no empty split: each gets ceil(k_blocks / splits) k blocks.
int non_empty_splits(int splits, int k_blocks) {
  splits = splits < k_blocks ? splits : k_blocks;
  const int per_split = (k_blocks + splits - 1) / splits;
  return (k_blocks + per_split - 1) / per_split;
}

MixedPlan wgmma_plan_for(MixedGemmParams const& p, MixedWgmmaInstance const* inst) {
  MixedPlan plan;
  plan.kernel = MixedKernel::kWgmma;
  plan.tile_m = inst->tile_m;
  plan.m_tiles = 0;
  plan.warp_groups = inst->warp_groups;
  plan.fine_groups = false;  // the wgmma kernel handles every group size in one instance
  plan.exact_scales = inst->exact_scales;
  const int k_blocks = (p.k + mixed::block_k(p.bits) - 1) / mixed::block_k(p.bits);
  const long long base = (long long)((p.n + inst->tile_n - 1) / inst->tile_n) *
                         ((p.m + inst->tile_m - 1) / inst->tile_m);
  const int forced_splits = g_forced_splits.load(std::memory_order_relaxed);
  const int splits = forced_splits > 0
                         ? forced_splits
                         : wave_splits(base, inst->ctas_per_sm(), k_blocks, kMaxSplits);
  plan.splits = non_empty_splits(splits, k_blocks);
  // The splits always meet through the workspace (no cluster reduction in this kernel).
  plan.reduce = plan.splits == 1 ? SplitReduce::kNone : SplitReduce::kWorkspace;
  return plan;
}

// The wgmma instance for p: the forced token tile (mixed_set_wgmma_override), else
// default_wgmma_tile_m, except that 256-row tiles whose grid must split K into slices of at most
// kWgmmaShortSplitK give way to 128-row tiles (twice the CTAs, so fewer splits; each split's
// pipeline fills and drains, and its partial sums go through the workspace). Measured on the H200
// (probe_mixed.py --wgmma-tiles, us, 128 vs 256 rows): 4096^2 M=256 INT4 18.8 vs 20.0 (256-row
// tiles in 4 splits of 1024), INT8 21.1 vs 21.9, M=512 INT4 30.0 vs 32.4 (2 splits of 2048);
// 14336x4096 M=256 53.6 vs 50.8 (4 splits of 3584: 256 rows stay).
constexpr int kWgmmaShortSplitK = 2048;
MixedWgmmaInstance const* choose_wgmma_instance(MixedGemmParams const& p) {
  const int forced_tile_m = g_forced_wgmma_tile_m.load(std::memory_order_relaxed);
  if (forced_tile_m > 0) return find_wgmma_instance(forced_tile_m, p.bits, p.dtype);
  MixedWgmmaInstance const* inst = find_wgmma_instance(default_wgmma_tile_m(p.m), p.bits, p.dtype);
  if (inst == nullptr || inst->tile_m != 256) return inst;
  const int bk = mixed::block_k(p.bits);
  const int k_blocks = (p.k + bk - 1) / bk;
  const int splits = wgmma_plan_for(p, inst).splits;
  if ((k_blocks + splits - 1) / splits * bk > kWgmmaShortSplitK) return inst;
  MixedWgmmaInstance const* rows_128 = find_wgmma_instance(128, p.bits, p.dtype);
  return rows_128 != nullptr ? rows_128 : inst;
}

// The decode kernel's CTAs are k groups of col_warps warps (32 columns each, sharing the
// activations), each k group a slice of the CTA's k range, summed in shared memory, so that one
// wave fills the GPU without a second kernel where it can. Candidates: col_warps 1, 2, 4, k groups
// per CTA (each at least 2 k blocks) whose CTAs fit in one wave, no split or the splits that fill
// the wave. The plan takes, in order: a split-K grid only where it is cheap (below), the most warps
// busy in the wave (shared memory bounds the CTAs per SM at larger M), the fewest splits, the
// preferred col_warps (decode_col_warps_rank; only 1 below kDecodeSharedFromM). Forced splits get
// as many k groups as the split has k blocks; forced warps are rounded down to whole k groups.
//
// The split-K grid (workspace + second kernel, a few us) pays where no unsplit grid has CTAs for
// half the SMs, and otherwise only where each split keeps at least kDecodeMinSplitK of K. Measured
// on the H200 (INT4, M = 5): 28672x8192 in 2 splits of 4-warp k groups 39.9 us vs 43.2 unsplit in
// 2-warp k groups, but 8192^2 15.2 vs 13.2 and 4096^2 (4 splits) 7.0 vs 5.4 unsplit in 1-warp k
// groups; INT8 14336x4096 (2 splits of 7168) 18.1 vs 16.5.
constexpr int kColWarpChoices[] = {1, 2, 4};
constexpr int kDecodeMinSplitK = 8192;

// The order in which col_warps win a tie: the widest first (from M = 5; below, only 1 is tried).
int decode_col_warps_rank(int col_warps) { return col_warps == 4 ? 0 : (col_warps == 2 ? 1 : 2); }

// Up to M = 4 the activations are a small part of a k block's bytes and k groups of 1 warp need
// no barrier: the plan tries only those (unless forced). Measured on the H200 at M = 4 (INT4 g128):
// 8192^2 12.3 us in 6-warp CTAs of 1-warp k groups vs 13.2 in 16-warp CTAs of 2-warp k groups,
// which keep more warps busy.
constexpr int kDecodeSharedFromM = 5;

MixedPlan decode_plan_for(MixedGemmParams const& p, MixedDecodeInstance const* inst) {
  MixedPlan plan;
  plan.kernel = MixedKernel::kDecode;
  plan.tile_m = inst->tile_m;
  plan.m_tiles = 0;
  plan.fine_groups = inst->fine_groups;
  plan.exact_scales = true;
  const int k_blocks = (p.k + mixed::block_k(p.bits) - 1) / mixed::block_k(p.bits);
  const long long m_tiles = (p.m + inst->tile_m - 1) / inst->tile_m;
  const long long sms = current_sm_count();
  const int forced_splits = g_forced_splits.load(std::memory_order_relaxed);
  const int forced_warps = g_forced_decode_warps.load(std::memory_order_relaxed);
  const int forced_cw = g_forced_col_warps.load(std::memory_order_relaxed);
  // The k group widths the plan may take: the forced one, else 1 and from kDecodeSharedFromM also
  // 2 and 4; each only where one k group fits in shared memory.
  auto tried = [&](int cw) {
    if (forced_cw > 0 ? cw != forced_cw : (cw > 1 && p.m < kDecodeSharedFromM)) return false;
    return inst->max_warps(p.m, cw) >= cw;
  };
  // Whether some unsplit grid has CTAs for half the SMs (the one of 32-column k groups has most).
  bool unsplit_fills = false;
  for (int cw : kColWarpChoices) {
    if (!tried(cw)) continue;
    unsplit_fills |= 2 * ((p.n + 32 * cw - 1) / (32 * cw)) * m_tiles >= sms;
  }
  // The best candidate's key: (cheap split, busy warps, -splits, -rank), compared in order.
  bool best_cheap = false;
  long long best_busy = -1;
  int best_rank = 0;
  for (int cw : kColWarpChoices) {
    if (!tried(cw)) continue;
    int max_groups = inst->max_warps(p.m, cw) / cw;
    if (k_blocks / 2 < max_groups) max_groups = k_blocks / 2 > 1 ? k_blocks / 2 : 1;
    const long long base = (long long)((p.n + 32 * cw - 1) / (32 * cw)) * m_tiles;
    const int rank = decode_col_warps_rank(cw);
    int lo = 1, hi = max_groups;
    if (forced_splits > 0) {
      const int per_split = (k_blocks + forced_splits - 1) / forced_splits;
      lo = hi = std::max(1, std::min(per_split, max_groups));
    }
    if (forced_warps > 0) lo = hi = std::max(1, std::min(forced_warps / cw, max_groups));
    for (int groups = lo; groups <= hi; ++groups) {
      const int w = groups * cw;
      const int per_sm = inst->ctas_per_sm(p.m, w, cw);
      const long long resident = per_sm * sms;
      if (groups > lo && base > resident) continue;  // more than one wave
      const int filling =
          non_empty_splits(wave_splits(base, per_sm, k_blocks / groups, kMaxSplits), k_blocks);
      // No split, or the wave-filling splits; forced splits: no cost model, the ranked col_warps
      // decide.
      const int options[2] = {1, forced_splits > 0 ? non_empty_splits(forced_splits, k_blocks)
                                                   : filling};
      for (int i = forced_splits > 0 ? 1 : 0; i < 2; ++i) {
        const int splits = options[i];
        const long long ctas = base * splits;
        const bool cheap = forced_splits > 0 || splits == 1 || !unsplit_fills ||
                           (long long)p.k >= (long long)kDecodeMinSplitK * splits;
        const long long busy = forced_splits > 0 ? 0 : (ctas < resident ? ctas : resident) * w;
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
        }
      }
    }
  }
  plan.reduce = plan.splits == 1 ? SplitReduce::kNone : SplitReduce::kWorkspace;
  return plan;
}

MixedPlan plan_for(MixedGemmParams const& p, MixedInstance const** inst_out,
                   MixedWgmmaInstance const** wgmma_out = nullptr,
                   MixedDecodeInstance const** decode_out = nullptr) {
  if (use_decode(p.m)) {
    MixedDecodeInstance const* d = find_decode_instance(p.m, p.bits, p.group_size, p.k, p.dtype);
    if (d != nullptr) {
      if (decode_out != nullptr) *decode_out = d;
      if (inst_out != nullptr) *inst_out = nullptr;
      return decode_plan_for(p, d);
    }
  }
  if (use_wgmma(p.m)) {
    MixedWgmmaInstance const* w = choose_wgmma_instance(p);
    if (w != nullptr) {
      if (wgmma_out != nullptr) *wgmma_out = w;
      if (inst_out != nullptr) *inst_out = nullptr;
      return wgmma_plan_for(p, w);
    }
  }
  MixedPlan plan;
  MixedInstance const* inst = find_instance(p.m, p.bits, p.group_size, p.k, p.dtype);
  if (inst_out != nullptr) *inst_out = inst;
  if (inst == nullptr) return plan;
  plan.m_tiles = inst->m_tiles;
  plan.tile_m = 16 * inst->m_tiles;
  plan.fine_groups = inst->fine_groups;
  const int forced_reduce = g_forced_reduce.load(std::memory_order_relaxed);
  // The splits add through the workspace and a second kernel unless the cluster reduction is
  // asked for: on the H200 the 8-CTA clusters ran slower in every measured case (a cluster must be
  // co-resident on one GPC: 64 clusters of 8192x8192 did not fit in one wave, max 62 active),
  // e.g. 8192x8192 M=1 17.6 us vs 15.3 us, 28672x8192 48.5 us vs 38.3 us.
  const bool cluster = forced_reduce == int(SplitReduce::kCluster) &&
                       current_cc_major() >= 9 && inst->cluster_supported();
  const int k_blocks = (p.k + mixed::block_k(p.bits) - 1) / mixed::block_k(p.bits);
  const int forced_splits = g_forced_splits.load(std::memory_order_relaxed);
  const int splits =
      forced_splits > 0 ? forced_splits : splits_for(p.m, p.n, k_blocks, cluster, *inst);
  plan.splits = non_empty_splits(splits, k_blocks);
  plan.reduce = plan.splits == 1                                   ? SplitReduce::kNone
                : cluster && plan.splits <= kMaxClusterSplits ? SplitReduce::kCluster
                                                                   : SplitReduce::kWorkspace;
  return plan;
}

}  // namespace

MixedPlan mixed_gemm_plan(MixedGemmParams const& p) { return plan_for(p, nullptr); }

bool mixed_set_split_override(int splits, int reduce) {
  if (splits == 0 || splits < -1 || splits > kMaxSplits) return false;
  if (reduce != -1 && reduce != int(SplitReduce::kWorkspace) &&
      reduce != int(SplitReduce::kCluster))
    return false;
  g_forced_splits.store(splits, std::memory_order_relaxed);
  g_forced_reduce.store(reduce, std::memory_order_relaxed);
  return true;
}

bool mixed_set_kernel_override(int kernel) {
  if (kernel < -1 || kernel > int(MixedKernel::kDecode)) return false;
  g_forced_kernel.store(kernel, std::memory_order_relaxed);
  return true;
}

int mixed_kernel_override() { return g_forced_kernel.load(std::memory_order_relaxed); }

bool mixed_set_decode_override(int warps, int col_warps) {
  if (warps == 0 || warps < -1 || warps > 16) return false;
  if (col_warps != -1 && col_warps != 1 && col_warps != 2 && col_warps != 4) return false;
  g_forced_decode_warps.store(warps, std::memory_order_relaxed);
  g_forced_col_warps.store(col_warps, std::memory_order_relaxed);
  return true;
}

bool mixed_set_wgmma_override(int tile_m) {
  if (tile_m != -1 && tile_m != 32 && tile_m != 64 && tile_m != 128 && tile_m != 256) return false;
  g_forced_wgmma_tile_m.store(tile_m, std::memory_order_relaxed);
  return true;
}

int mixed_wgmma_override() { return g_forced_wgmma_tile_m.load(std::memory_order_relaxed); }

void mixed_decode_override(int& warps, int& col_warps) {
  warps = g_forced_decode_warps.load(std::memory_order_relaxed);
  col_warps = g_forced_col_warps.load(std::memory_order_relaxed);
}

// The wgmma instances exist in every build, but their kernels have bodies only in sm_90a code,
// which setup.py builds (and announces with CUTE_GEMM_WITH_SM90A) when TORCH_CUDA_ARCH_LIST names
// 9.0a; sm_90a code runs on compute capability 9.0 only.
bool mixed_wgmma_usable() {
#if defined(CUTE_GEMM_WITH_SM90A)
  // The warp-specialized instances copy by TMA, from tensor maps the driver encodes.
  return current_cc_major() == 9 && current_cc_minor() == 0 && tensor_map_encoder() != nullptr;
#else
  return false;
#endif
}

void mixed_split_override(int& splits, int& reduce) {
  splits = g_forced_splits.load(std::memory_order_relaxed);
  reduce = g_forced_reduce.load(std::memory_order_relaxed);
}

size_t mixed_gemm_workspace_bytes(MixedGemmParams const& p) {
  const MixedPlan plan = mixed_gemm_plan(p);
  return plan.reduce == SplitReduce::kWorkspace
             ? size_t(plan.splits) * size_t(p.m) * size_t(p.n) * sizeof(float)
             : 0;
}

cudaError_t mixed_gemm_launch(MixedGemmParams const& p, cudaStream_t stream) {
  MixedInstance const* inst = nullptr;
  MixedWgmmaInstance const* wgmma = nullptr;
  MixedDecodeInstance const* decode = nullptr;
  const MixedPlan plan = plan_for(p, &inst, &wgmma, &decode);
  if (inst == nullptr && wgmma == nullptr && decode == nullptr) return cudaErrorInvalidValue;
  if (plan.reduce == SplitReduce::kWorkspace &&
      p.workspace_bytes < size_t(plan.splits) * p.m * p.n * sizeof(float))
    return cudaErrorInvalidValue;
  if (decode != nullptr) {
    if (plan.warps < 1) return cudaErrorInvalidValue;  // no k group fits in shared memory
    return decode->launch(p, plan.splits, plan.warps, plan.col_warps, stream);
  }
  if (wgmma != nullptr) return wgmma->launch(p, plan.splits, stream);
  return inst->launch(p, plan.splits, plan.reduce, stream);
}

}  // namespace cute_gemm
