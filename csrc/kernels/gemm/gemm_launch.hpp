#pragma once
// The contract between the torch glue (csrc/ops/) and the half-precision GEMM kernels.
// Plain CUDA: no torch headers, so kernel translation units stay quick to compile.
//
//   C[M, N] = A[M, K] @ B[N, K]^T (+ bias[N]),  fp16 or bf16 in and out, fp32 accumulation.
//
// A and B are row-major with leading dimensions lda, ldb (elements); C row-major with ldc.
// Preconditions checked by the caller (csrc/ops): K % 8 == 0, lda/ldb % 8 == 0, all pointers
// 16-byte aligned, M, N, K >= 1. Any ldc >= N: rows of C are stored as 16-byte vectors where
// ldc % 8 == 0, element by element otherwise. The launcher never synchronizes the host and launches
// on `stream` only.

#include <cuda_runtime.h>

namespace cute_gemm {

enum class HalfType { kFloat16 = 0, kBFloat16 = 1 };

struct GemmParams {
  void const* a = nullptr;
  void const* b = nullptr;
  void const* bias = nullptr;  // optional, [N]
  void* c = nullptr;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  HalfType dtype = HalfType::kFloat16;
  // fp32 partial sums of a split-K launch (the Hopper kernel on a grid of few tiles), at least
  // gemm_workspace_bytes(); unused otherwise.
  void* workspace = nullptr;
};

// Launches configuration `config` (an index into kGemmConfigs, or kGemmWgmmaFirst + i for the
// Hopper kernel's tile i: gemm_configs.hpp), or the heuristic's choice for the problem when config
// is -1.
// Any other index returns cudaErrorInvalidValue, and the Hopper kernel where it cannot run
// (gemm_wgmma_usable() false) cudaErrorNoKernelImageForDevice; neither launches anything: a
// configuration the caller asked for is never silently replaced. Every configuration is
// instantiated for both dtypes and runs every problem the preconditions above allow (partial
// tiles in M, N and K). Returns the launch error, if any. The choice is an argument, not process
// state: a CUDA graph keeps what it captured.
cudaError_t gemm_launch(GemmParams const& params, cudaStream_t stream, int config = -1);

// Whether the Hopper kernel runs on the current device: an sm_90a build, a compute capability 9.0
// device and a driver that encodes tensor maps.
bool gemm_wgmma_usable();

// The workspace gemm_launch(params, stream, config) needs, in bytes: splits * M * N * 4 where the
// launch splits K (the Hopper kernel, when its tiles would leave more than half the SMs idle), 0
// otherwise. The caller allocates it and sets params.workspace; a launch that needs it and has
// none returns cudaErrorInvalidValue.
size_t gemm_workspace_bytes(GemmParams const& params, int config = -1);

// The index of the configuration the heuristic picks for an [M, K] x [N, K]^T problem on the
// current device (its SM count), for tests and benchmarks; gemm_configs.hpp names it.
int gemm_heuristic_config(int m, int n, int k);

}  // namespace cute_gemm
