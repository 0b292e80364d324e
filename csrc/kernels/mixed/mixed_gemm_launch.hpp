#pragma once
// The contract between the torch glue (csrc/ops/mixed_gemm_op.cpp) and the mixed-input GEMM
// kernels. Plain CUDA: no torch headers.
//
//   out[M, N] = A[M, K] @ dequant(W)[N, K]^T (+ bias[N]),  fp16 or bf16 activations/output,
//   W packed as INT4 or INT8 (kernels/mixed/weight_format.hpp), fp32 accumulation.
//
// Gated (`gated`, the op's activation="silu_mul"): W's rows are a gate half and an up half
// (N = 2H), and out[M, H] = SiLU(g) * u with g = the sums of columns 0..H-1 (+ bias) and u those
// of H..2H-1, both in fp32, rounded once. The decode kernel pairs the two in registers; the
// other kernels write fp32 sums to the workspace and split_k_reduce_kernel gates them.
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
// The workspace: the plan (mixed_plan.hpp) says how many bytes a launch needs; the op passes a
// buffer of at least that many bytes (a torch uint8 tensor from the caching allocator,
// UNINITIALIZED, allocated on the launch stream; nullptr when 0 bytes). A kernel that needs it
// zeroed must clear it itself on `stream` (cudaMemsetAsync is capturable). The launcher never
// synchronizes the host, never allocates, and launches on `stream` only, so calls can be captured
// in CUDA graphs.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/gemm/gemm_launch.hpp"  // HalfType
#include "kernels/mixed/mixed_plan.hpp"

namespace cute_gemm {

struct MixedGemmParams {
  void const* a = nullptr;            // [M, K], row stride lda elements
  int32_t const* qweight = nullptr;   // packed, see weight_format.hpp
  void const* scales = nullptr;       // [K / G, N]
  void const* zeros = nullptr;        // [K / G, N] or nullptr (symmetric: z = 2^(bits-1))
  void const* bias = nullptr;         // [N] or nullptr
  void* out = nullptr;                // [M, N] ([M, N/2] gated), row stride ldo elements
  int m = 0, n = 0, k = 0;            // k: the true K (the packed K is padded)
  int lda = 0, ldo = 0;
  int bits = 4;                       // 4 or 8
  int group_size = 128;               // 32, 64, 128, or K for per-channel (never -1)
  HalfType dtype = HalfType::kFloat16;
  bool gated = false;                 // out = SiLU(gate half) * up half (N % 16 == 0)
  void* workspace = nullptr;          // plan.workspace_bytes bytes, uninitialized
  size_t workspace_bytes = 0;
  // Stream-K (MixedPlan::stream_k_ctas > 0): an id unique to this launch, which a CTA writes to
  // say its partial sums in the workspace are complete (stream_k.hpp); mixed_gemm_launch sets it.
  uint64_t stream_k_id = 0;
};

// The output's columns: N, or N/2 for a gated GEMM (a gate column and its up column make one).
__host__ __device__ inline int output_columns(MixedGemmParams const& p) {
  return p.gated ? p.n / 2 : p.n;
}

// Writes dequant(W) as a dense row-major [N, K] matrix `w` in the activation dtype (the same
// values the fused kernel uses). Only params' qweight, scales, zeros, n, k, bits, group_size and
// dtype are read. For large M the op runs a dense GEMM on it instead of the fused kernel.
cudaError_t dequantize_weight_launch(MixedGemmParams const& params, void* w, cudaStream_t stream);

// The current device as the planner sees it (cached per device): its SM count, shared memory
// and registers from cudaGetDeviceProperties; wgmma when this build has sm_90a code, the device is
// compute capability 9.0 and the driver can encode tensor maps (the warp-specialized kernels copy
// by TMA).
DeviceSpec const& current_device_spec();

// Launches `plan` (plan_mixed_gemm for this problem and the current device; not the dense path)
// on `stream`: out = A @ dequant(W)^T (+ bias), gated when params.gated (the plan must be made
// for the gated problem). When plan.workspace_bytes > 0, params.workspace must hold that many.
// Returns the launch error, if any.
cudaError_t mixed_gemm_launch(MixedGemmParams const& params, MixedPlan const& plan,
                              cudaStream_t stream);

// The CTAs per SM the current device keeps resident of the launch mixed_gemm_launch would make
// for `plan` (its instance's kernel, threads and dynamic shared memory, the kernel's shared
// memory limit raised as the launcher raises it), by cudaOccupancyMaxActiveBlocksPerMultiprocessor:
// what the planner's occupancy model (plan.ctas_per_sm) predicts, for tests to check it against.
// cudaErrorInvalidValue for the dense path, an unknown instance, or a plan whose threads, shared
// memory or decode CTA shape are not what its instance's launcher runs; otherwise the CUDA error.
// Launches nothing.
cudaError_t mixed_instance_occupancy(MixedPlan const& plan, int* ctas_per_sm);

}  // namespace cute_gemm
