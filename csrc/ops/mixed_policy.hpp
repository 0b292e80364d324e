#pragma once
// Which path torch.ops.cute_gemm.mixed_gemm takes on CUDA (mixed_gemm_op.cpp): from
// mixed_dense_from_m() rows of A it dequantizes the weight once and runs a dense GEMM, below
// that the fused kernel runs. Process-wide; the setter is for tests (the fused kernel at any M)
// and tuning runs. No torch headers.

namespace cute_gemm {

// The defaults: with the mma.sync kernel the dense path wins from 192 rows; with the Hopper wgmma
// kernel (where the build and device run it) from 384 (H200, probe_mixed.py --kernels, INT4 g128:
// at M=256 wgmma 86 / 294 us vs dense 100 / 349 us on 8192^2 / 28672x8192, at M=512 wgmma 172 /
// 610 vs dense 148 / 505).
constexpr int kDefaultDenseFromM = 192;
constexpr int kDefaultDenseFromMWgmma = 384;

// The current threshold: the override, or the default for the kernel this device runs.
int mixed_dense_from_m();
// m >= 1 overrides, -1 restores the default; returns the previous setting (-1 = the default).
int set_mixed_dense_from_m(int m);

}  // namespace cute_gemm
