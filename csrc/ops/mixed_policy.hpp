#pragma once
// Which path torch.ops.cute_gemm.mixed_gemm takes on CUDA (mixed_gemm_op.cpp): from
// mixed_dense_from_m() rows of A it dequantizes the weight once and runs a dense GEMM, below
// that the fused kernel runs. Process-wide; the setter is for tests (the fused kernel at any M)
// and tuning runs. No torch headers.

namespace cute_gemm {

constexpr int kDefaultDenseFromM = 192;

int mixed_dense_from_m();
// m >= 1; returns the previous value.
int set_mixed_dense_from_m(int m);

}  // namespace cute_gemm
