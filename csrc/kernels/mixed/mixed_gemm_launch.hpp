#pragma once
// The contract between the torch glue (csrc/ops/mixed_gemm_op.cpp) and the mixed-input GEMM
// kernels. Plain CUDA: no torch headers.
//
//   out[M, N] = A[M, K] @ dequant(W)[N, K]^T (+ bias[N]),  fp16 or bf16 activations/output,
//   W packed as INT4 or INT8 (kernels/mixed/weight_format.hpp), fp32 accumulation.
//
// dequant(W)[n, k] = (q[n, k] - z) * scales[k / G, n], z = zeros[k / G, n] when zeros is given,
// 2^(bits-1) otherwise; the product is exact in fp32. mixed_gemm_launch computes with it exactly
// (the scales multiply fp32 sums of a * (q - z)); dequantize_weight_launch rounds it once to the
// activation dtype.
//
// Preconditions checked by the caller (csrc/ops): M, N, K >= 1; N % 8 == 0; K % G == 0 and
// K % 32 == 0; A row-major with lda % 8 == 0 (lda >= K); a, qweight, scales, zeros, bias and out
// 16-byte aligned; qweight is [N/8, ceil(K/bk), 32, 4] contiguous int32 (bk = 128 for INT4, 64 for
// INT8); scales/zeros [K/G, N] contiguous in the activation dtype; out is [M, N] with ldo = N.
// A is only defined for k < K: columns K..Kp-1 of the packed weight are padding (their q is the
// last group's zero point, so they dequantize to 0 with the last group's scale), and the kernel
// must treat A beyond K as zero.
//
// The workspace: before each launch the op asks mixed_gemm_workspace_bytes() and passes a buffer
// of at least that many bytes (a torch uint8 tensor from the caching allocator, UNINITIALIZED,
// allocated on the launch stream; nullptr when 0 bytes). A kernel that needs it zeroed must clear
// it itself on `stream` (cudaMemsetAsync is capturable). The launcher never synchronizes the host,
// never allocates, and launches on `stream` only, so calls can be captured in CUDA graphs.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/gemm/gemm_launch.hpp"  // HalfType

namespace cute_gemm {

// How the partial sums of a split-K launch meet (mixed_gemm_kernel.cuh).
enum class SplitReduce : int {
  kNone = 0,       // one split: the kernel writes out (+ bias)
  kWorkspace = 1,  // fp32 partial sums to the workspace, a second kernel adds them in split order
  kCluster = 2,    // the splits of a column tile are one cluster and add through distributed
                   // shared memory in split order (sm_90; at most kMaxClusterSplits)
};
constexpr int kMaxClusterSplits = 8;  // the portable cluster size

struct MixedGemmParams {
  void const* a = nullptr;            // [M, K], row stride lda elements
  int32_t const* qweight = nullptr;   // packed, see weight_format.hpp
  void const* scales = nullptr;       // [K / G, N]
  void const* zeros = nullptr;        // [K / G, N] or nullptr (symmetric: z = 2^(bits-1))
  void const* bias = nullptr;         // [N] or nullptr
  void* out = nullptr;                // [M, N], row stride ldo elements
  int m = 0, n = 0, k = 0;            // k: the true K (the packed K is padded)
  int lda = 0, ldo = 0;
  int bits = 4;                       // 4 or 8
  int group_size = 128;               // 32, 64, 128, or K for per-channel
  HalfType dtype = HalfType::kFloat16;
  void* workspace = nullptr;          // mixed_gemm_workspace_bytes(...) bytes, uninitialized
  size_t workspace_bytes = 0;
};

// Bytes of workspace a launch of this problem needs (split-K partial sums where the splits cannot
// meet in a cluster); 0 for none. Reads m, n, k, bits, group_size and dtype of `params`.
// The split depends on the current device's multiprocessor count (kernels/device_info.hpp).
size_t mixed_gemm_workspace_bytes(MixedGemmParams const& params);

// Writes dequant(W) as a dense row-major [N, K] matrix `w` in the activation dtype (the same
// values the fused kernel uses). Only params' qweight, scales, zeros, n, k, bits, group_size and
// dtype are read. For large M the op runs a dense GEMM on it instead of the fused kernel.
cudaError_t dequantize_weight_launch(MixedGemmParams const& params, void* w, cudaStream_t stream);

// Which kernel runs a launch: mma.sync (mixed_gemm_kernel.cuh, sm_80+), on sm_90 devices when
// the build has sm_90a code wgmma (mixed_wgmma_kernel.cuh), or up to M = 8 the decode kernel
// (mixed_decode_kernel.cuh, sm_80+).
enum class MixedKernel : int { kMma = 0, kWgmma = 1, kDecode = 2 };

// What a launch of this problem runs: the kernel, its M tile (rows of A per CTA; m_tiles =
// tile_m / 16 for the mma.sync kernel) and group granularity, whether the scales multiply exact
// per-group sums (otherwise the weight is rounded to the activation dtype first), the split-K
// factor (no split empty) and how the splits meet. Reads m, n, k, bits, group_size and dtype of
// `params`. tile_m is 0 when no instance fits.
struct MixedPlan {
  MixedKernel kernel = MixedKernel::kMma;
  int tile_m = 0;
  int m_tiles = 0;
  bool fine_groups = false;
  bool exact_scales = true;
  int splits = 1;
  SplitReduce reduce = SplitReduce::kNone;
  int warps = 0;      // decode: warps per CTA (0 otherwise)
  int col_warps = 0;  // decode: warps per k group, side by side on 32 columns each; the CTA's
                      // warps / col_warps k groups each take a slice of its k range (0 otherwise)
  int warp_groups = 0;  // wgmma: warpgroups per CTA (0 otherwise)
};
MixedPlan mixed_gemm_plan(MixedGemmParams const& params);

// Process-wide override of the split-K plan, for tests and tuning: splits > 0 forces that many
// splits (at most 64; fewer when K has fewer k blocks), reduce kWorkspace or kCluster forces that
// reduction (kCluster only where supported, with at most kMaxClusterSplits splits; otherwise
// the workspace). -1 restores the heuristic. Returns false (and changes nothing) when out of range.
bool mixed_set_split_override(int splits, int reduce);
void mixed_split_override(int& splits, int& reduce);

// Process-wide choice of the kernel, for tests and tuning: -1 the default (decode up to M = 8,
// mma.sync up to M = 16, then wgmma where usable), 0 mma.sync, 1 wgmma where usable (mma.sync
// otherwise), 2 decode up to M = 8. Returns false when out of range.
bool mixed_set_kernel_override(int kernel);
int mixed_kernel_override();

// Process-wide override of the decode kernel's CTA shape, for tests and tuning: warps 1..16 forces
// that many warps per CTA (rounded down to whole k groups that fit, at least one), col_warps 1, 2
// or 4 the warps per k group; -1 restores the heuristic for each. Returns false (and changes
// nothing) when out of range.
bool mixed_set_decode_override(int warps, int col_warps);
void mixed_decode_override(int& warps, int& col_warps);

// Process-wide override of the wgmma kernel's instance, for tests and tuning: tile_m 32, 64, 128
// or 256 forces that token tile (rows of A per CTA; its instance fixes the warpgroups), -1 restores
// the heuristic. Returns false (and changes nothing) when out of range.
bool mixed_set_wgmma_override(int tile_m);
int mixed_wgmma_override();

// Whether this build has the sm_90a wgmma kernels and the current device can run them.
bool mixed_wgmma_usable();

// Launches out = A @ dequant(W)^T (+ bias) on `stream`. Returns the launch error, if any.
cudaError_t mixed_gemm_launch(MixedGemmParams const& params, cudaStream_t stream);

}  // namespace cute_gemm
