// Dequantizes a packed weight into a dense [N, K] matrix in the activation dtype with the register
// tricks of dequant.cuh, rounding (q - z) * s once: the reference's values. Used for large M,
// where the product is compute-bound and a dense GEMM on the dequantized weight beats the fused
// mma.sync kernel (see mixed_gemm_op.cpp).

#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// One warp per (n8 block, k block): each lane dequantizes its 16 packed bytes into its B-fragment
// values, which sit at scattered (row, k) places of the warp's 8 x kBlockK tile; the warp stages
// the tile in shared memory and writes it back as whole row segments (16 bytes per lane, each
// row's kBlockK values contiguous), so the global stores are coalesced. (Storing the fragments'
// 4-byte pairs straight to global memory ran at about 2 TB/s of traffic on the H200.)
template <class T, int Bits>
__global__ void __launch_bounds__(256) dequantize_weight_kernel(MixedGemmParams p, T* w) {
  using D = Dequant<T>;
  constexpr int BK = block_k(Bits);
  constexpr int kStepsPerWord = Bits == 4 ? 2 : 1;
  // Row stride in 4-byte words: BK / 2 + 4, so rows g = 0..7 of a lane quad t = 0..3 fall into
  // 32 different banks on the fragment stores, and rows stay 16-byte aligned for the reads.
  constexpr int kRowWords = BK / 2 + 4;
  __shared__ uint32_t tile[8][8 * kRowWords];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t* my = tile[warp];
  const int k_blocks = (p.k + BK - 1) / BK;
  const int64_t item = int64_t(blockIdx.x) * 8 + warp;  // (nb, kb)
  const int64_t items = int64_t(p.n / 8) * k_blocks;
  if (item >= items) return;  // whole warps only: no __syncthreads below
  const int kb = int(item % k_blocks);
  const int nb = int(item / k_blocks);
  const int g = lane / 4, t = lane % 4;
  const int n = nb * 8 + g;
  const GroupShape groups(p);
  const uint4 q = reinterpret_cast<uint4 const*>(p.qweight)[item * 32 + lane];
  const uint32_t words[4] = {q.x, q.y, q.z, q.w};
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
#pragma unroll
  for (int wi = 0; wi < 4; ++wi) {
    const int k_local = 16 * kStepsPerWord * wi;  // first k of this word's first k16 step
    const int group = min(groups.of(kb * BK + k_local), groups.last);
    const float sf = HalfTraits<T>::to_float(scales[int64_t(group) * p.n + n]);
    const float zf = zeros != nullptr ? HalfTraits<T>::to_float(zeros[int64_t(group) * p.n + n])
                                      : float(1 << (Bits - 1));
    // q - z exactly, then one rounding of the exact product (q - z) * s: the reference's value.
    const auto zc = D::zero_constants(zf);
    const auto s2 = D::splat(sf);
    uint32_t r[4];
    if constexpr (Bits == 4) {
      D::int4(words[wi], zc, r);
    } else {
      uint32_t r2[2];
      D::int8(words[wi], zc, r2);
      r[0] = r2[0];
      r[1] = r2[1];
    }
    // r0 = (k + 2t, +1), r1 = (k + 2t + 8, +9) for each k16 step of the word.
#pragma unroll
    for (int i = 0; i < 2 * kStepsPerWord; ++i) {
      const int k = k_local + 16 * (i / 2) + 8 * (i % 2) + 2 * t;
      my[g * kRowWords + k / 2] = D::as_u32(__hmul2(D::as_t2(r[i]), s2));
    }
  }
  __syncwarp();
  // Row segments: 8 rows x BK values = 8 * BK / 8 chunks of 16 bytes, 32 per pass.
  constexpr int kChunksPerRow = BK / 8;
  const int k_valid = min(BK, p.k - kb * BK);  // K's padding is not written
#pragma unroll
  for (int c = lane; c < 8 * kChunksPerRow; c += 32) {
    const int row = c / kChunksPerRow, chunk = c % kChunksPerRow;
    if (8 * chunk >= k_valid) continue;  // K % 32 == 0: chunks are all in or all out
    const uint4 v = *reinterpret_cast<uint4 const*>(&my[row * kRowWords + chunk * 4]);
    *reinterpret_cast<uint4*>(w + int64_t(nb * 8 + row) * p.k + kb * BK + chunk * 8) = v;
  }
}

template <class T, int Bits>
cudaError_t launch_dequantize(MixedGemmParams const& p, void* w, cudaStream_t stream) {
  const int64_t items = int64_t(p.n / 8) * ((p.k + block_k(Bits) - 1) / block_k(Bits));
  dequantize_weight_kernel<T, Bits>
      <<<unsigned((items + 7) / 8), 256, 0, stream>>>(p, static_cast<T*>(w));
  return cudaGetLastError();
}

}  // namespace mixed

cudaError_t dequantize_weight_launch(MixedGemmParams const& p, void* w, cudaStream_t stream) {
  const bool bf16 = p.dtype == HalfType::kBFloat16;
  if (p.bits == 4)
    return bf16 ? mixed::launch_dequantize<__nv_bfloat16, 4>(p, w, stream)
                : mixed::launch_dequantize<__half, 4>(p, w, stream);
  return bf16 ? mixed::launch_dequantize<__nv_bfloat16, 8>(p, w, stream)
              : mixed::launch_dequantize<__half, 8>(p, w, stream);
}

}  // namespace cute_gemm
