// Chooses the M tile and the split-K factor of the mixed-input GEMM and launches it. The kernels
// are instantiated one configuration per translation unit under generated/.

#include "kernels/device_info.hpp"
#include "kernels/mixed/generated/mixed_instances.hpp"
#include "kernels/mixed/mixed_gemm_launch.hpp"

namespace cute_gemm {

namespace {

int m_tiles_for(int m) { return m <= 16 ? 1 : (m <= 32 ? 2 : 4); }

// Columns per CTA (MixedConfig::kTileN).
constexpr int kTileN = 128;

// Enough CTAs for ~4 per SM (4 warps each: the weight stream needs many bytes in flight), with at
// least 2 k blocks per split so the register pipeline has something to overlap.
int splits_for(int m, int n, int k, int bits, int sms) {
  const int block_k = bits == 4 ? 128 : 64;
  const int k_blocks = (k + block_k - 1) / block_k;
  const int mt = m_tiles_for(m);
  const long long base = (long long)((n + kTileN - 1) / kTileN) * ((m + 16 * mt - 1) / (16 * mt));
  const long long want = 4LL * sms;
  int splits = base >= want ? 1 : int((want + base - 1) / base);
  const int max_splits = k_blocks / 2 > 1 ? k_blocks / 2 : 1;
  if (splits > max_splits) splits = max_splits;
  if (splits > 64) splits = 64;
  return splits;
}

}  // namespace

size_t mixed_gemm_workspace_bytes(int m, int n, int k, int bits, int group_size, int sm_count) {
  (void)group_size;
  const int splits = splits_for(m, n, k, bits, sm_count > 0 ? sm_count : current_sm_count());
  return splits > 1 ? size_t(splits) * size_t(m) * size_t(n) * sizeof(float) : 0;
}

cudaError_t mixed_gemm_launch(MixedGemmParams const& p, cudaStream_t stream) {
  const int splits = splits_for(p.m, p.n, p.k, p.bits, current_sm_count());
  if (splits > 1 && p.workspace_bytes < size_t(splits) * p.m * p.n * sizeof(float))
    return cudaErrorInvalidValue;
  const int mt = m_tiles_for(p.m);
  for (MixedInstance const& inst : kMixedInstances) {
    if (inst.bits == p.bits && inst.m_tiles == mt &&
        inst.bf16 == (p.dtype == HalfType::kBFloat16)) {
      return inst.launch(p, splits, stream);
    }
  }
  return cudaErrorInvalidValue;
}

}  // namespace cute_gemm
