// Chooses the kernel instance (M tile, group granularity), the split-K factor and how the splits
// are added, and launches. The kernels are instantiated one configuration per translation unit
// under generated/.

#include <atomic>

#include "kernels/device_info.hpp"
#include "kernels/mixed/generated/mixed_instances.hpp"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {

namespace {

constexpr int kMaxSplits = 64;
std::atomic<int> g_forced_splits{-1};
std::atomic<int> g_forced_reduce{-1};

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
int splits_for(int m, int n, int k_blocks, int sms, bool cluster, MixedInstance const& inst) {
  const int mt = inst.m_tiles, tile_n = inst.tile_n;
  const long long base = (long long)((n + tile_n - 1) / tile_n) * ((m + 16 * mt - 1) / (16 * mt));
  const long long wave = (long long)ctas_per_sm(inst) * sms;
  int splits = base >= wave ? 1 : int(wave / base);
  const int max_splits = k_blocks / 2 > 1 ? k_blocks / 2 : 1;
  if (splits > max_splits) splits = max_splits;
  const int cap = cluster ? kMaxClusterSplits : kMaxSplits;
  return splits > cap ? cap : splits;
}

MixedInstance const* find_instance(int m, int bits, int group_size, int k, HalfType dtype) {
  const int mt = m_tiles_for(m);
  // Groups shorter than a packed k block need the scales every 2 k16 steps.
  const bool fine = group_size > 0 && group_size < k && group_size < mixed::block_k(bits);
  for (MixedInstance const& inst : kMixedInstances) {
    if (inst.bits == bits && inst.m_tiles == mt && inst.fine_groups == fine &&
        inst.bf16 == (dtype == HalfType::kBFloat16)) {
      return &inst;
    }
  }
  return nullptr;
}

MixedPlan plan_for(MixedGemmParams const& p, MixedInstance const** inst_out) {
  MixedPlan plan;
  MixedInstance const* inst = find_instance(p.m, p.bits, p.group_size, p.k, p.dtype);
  if (inst_out != nullptr) *inst_out = inst;
  if (inst == nullptr) return plan;
  plan.m_tiles = inst->m_tiles;
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
  int splits = forced_splits > 0
                   ? forced_splits
                   : splits_for(p.m, p.n, k_blocks, current_sm_count(), cluster, *inst);
  // No empty split: each gets ceil(k_blocks / splits) blocks, the last one the rest.
  splits = splits < k_blocks ? splits : k_blocks;
  const int per_split = (k_blocks + splits - 1) / splits;
  plan.splits = (k_blocks + per_split - 1) / per_split;
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
  const MixedPlan plan = plan_for(p, &inst);
  if (inst == nullptr) return cudaErrorInvalidValue;
  if (plan.reduce == SplitReduce::kWorkspace &&
      p.workspace_bytes < size_t(plan.splits) * p.m * p.n * sizeof(float))
    return cudaErrorInvalidValue;
  return inst->launch(p, plan.splits, plan.reduce, stream);
}

}  // namespace cute_gemm
