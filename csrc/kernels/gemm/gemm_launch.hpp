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
};

// Picks a tile configuration for the problem and launches. Returns the launch error, if any.
cudaError_t gemm_launch(GemmParams const& params, cudaStream_t stream);

// The configuration gemm_launch would run for the problem, by name (e.g. "128x128x32_s4_w2x2"),
// for tests/benchmarks: the heuristic's choice, or the override while one is set.
char const* gemm_config_name(int m, int n, int k);

// The configurations the extension is built with (generated/gemm_instances.hpp, largest tiles
// first) and their names; @pre 0 <= index < gemm_config_count() (nullptr otherwise).
int gemm_config_count();
char const* gemm_config_name_at(int index);

// Process-wide override of the heuristic, for tests and benchmarks that must run one particular
// configuration: index in [0, gemm_config_count()) forces that configuration for every later
// gemm_launch (from any thread), -1 restores the heuristic. Returns false, changing nothing, for
// any other index. The choice is made at launch, so a CUDA graph keeps what it captured.
bool gemm_set_config_override(int index);
int gemm_config_override();

}  // namespace cute_gemm
