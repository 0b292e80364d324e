#pragma once
// Which path torch.ops.cute_gemm.mixed_gemm takes on CUDA (mixed_gemm_op.cpp): from
// mixed_dense_from_m() rows of A it dequantizes the weight once and runs a dense GEMM, below
// that the fused kernel runs. Process-wide; the setter is for tests (the fused kernel at any M)
// and tuning runs. No torch headers.

namespace cute_gemm {

// The defaults: with the mma.sync kernel the dense path wins from 192 rows. With the Hopper wgmma
// kernel (where the build and device run it) the fused kernel runs at every M: its warp-specialized
// 256-token tiles keep up with cuBLAS fp16, which the dense path also pays a dequantization pass
// on top of. H200, probe_mixed.py --sweep-m, INT4 g128, us, fused vs dense (4096^2, 4096x28672,
// 14336x4096, 8192^2, 28672x8192):
//   M=512  33.5 / 214.1 / 97.1 / 102.5 / 344.8 vs 38.8 / 260.0 / 130.9 / 148.6 / 498.4;
//   M=1024 53.8 / 396.0 / 177.3 / 208.2 / 697.8 vs 63.8 / 438.3 / 217.2 / 249.3 / 877.9;
//   M=4096 221.8 / 1588.9 / 714.8 / 843.8 / 2811.3 vs 221.4 / 1552.7 / 776.4 / 892.9 / 3089.5;
//   M=8192 446.2 / 3122.7 / 1429.8 / 1686.3 / 5634.0 vs 428.1 / 3117.7 / 1520.8 / 1786.7 / 6173.8
// (INT8 per-channel alike, within 10% either way from M=4096).
constexpr int kDefaultDenseFromM = 192;
constexpr int kDefaultDenseFromMWgmma = 0x7fffffff;  // never

// The current threshold: the override, or the default for the kernel this device runs.
int mixed_dense_from_m();
// m >= 1 overrides, -1 restores the default; returns the previous setting (-1 = the default).
int set_mixed_dense_from_m(int m);

}  // namespace cute_gemm
