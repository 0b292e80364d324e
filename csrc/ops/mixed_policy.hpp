#pragma once
// Which path torch.ops.cute_gemm.mixed_gemm takes on CUDA (mixed_gemm_op.cpp): from
// mixed_dense_from_m() rows of A it dequantizes the weight once and runs a dense GEMM, below
// that the fused kernel runs. Process-wide; the setter is for tests (the fused kernel at any M)
// and tuning runs. No torch headers.

namespace cute_gemm {

// The defaults: with the mma.sync kernel the dense path wins from 192 rows; with the Hopper wgmma
// kernel (where the build and device run it) the fused kernel runs up to 512 rows (two 256-token
// tiles). H200, probe_mixed.py --sweep-m, INT4 g128, us, fused vs dense, 4096^2 / 4096x28672 /
// 14336x4096 / 8192^2 / 28672x8192:
//   M=512  38.7 / 251.8 / 114.2 / 123.3 / 417.6 vs 37.0 / 254.5 / 131.3 / 146.3 / 501.9;
//   M=640  74.3 / 354.6 / 249.2 / 213.7 / 735.9 vs 41.4 / 298.9 / 146.6 / 168.5 / 586.1 (a third
//          token tile: 1.5 waves of CTAs);
//   M=1024 64.6 / 461.9 / 212.0 / 246.3 / 841.0 vs 61.4 / 432.5 / 219.9 / 250.8 / 850.7.
constexpr int kDefaultDenseFromM = 192;
constexpr int kDefaultDenseFromMWgmma = 513;

// The current threshold: the override, or the default for the kernel this device runs.
int mixed_dense_from_m();
// m >= 1 overrides, -1 restores the default; returns the previous setting (-1 = the default).
int set_mixed_dense_from_m(int m);

}  // namespace cute_gemm
