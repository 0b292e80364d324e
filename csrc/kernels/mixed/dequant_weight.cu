// Dequantizes a packed weight into a dense [N, K] matrix in the activation dtype with the register
// tricks of dequant.cuh, rounding (q - z) * s once: the reference's values. Used for large M, where the product is compute-bound and a dense GEMM on the
// dequantized weight beats the fused mma.sync kernel (see mixed_gemm_op.cpp).
//
// One thread per (n8 block, k block, lane): it reads its 16 packed bytes and writes the values of
// its B fragments, two adjacent k at a time (4-byte stores), to rows n = 8 * nb + lane / 4.

#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

template <class T, int Bits>
__global__ void dequantize_weight_kernel(MixedGemmParams p, T* w) {
  using D = Dequant<T>;
  constexpr int BK = block_k(Bits);
  const int k_blocks = (p.k + BK - 1) / BK;
  const int64_t item = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // (nb, kb, lane)
  const int lane = int(item % 32);
  const int64_t block = item / 32;
  const int kb = int(block % k_blocks);
  const int nb = int(block / k_blocks);
  if (nb * 8 >= p.n) return;
  const int n = nb * 8 + lane / 4, t = lane % 4;
  const int group_size = (p.group_size <= 0 || p.group_size > p.k) ? p.k : p.group_size;
  const int last_group = (p.k + group_size - 1) / group_size - 1;
  const uint4 q = reinterpret_cast<uint4 const*>(p.qweight)[block * 32 + lane];
  const uint32_t words[4] = {q.x, q.y, q.z, q.w};
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
  T* row = w + int64_t(n) * p.k;
  constexpr int kStepsPerWord = Bits == 4 ? 2 : 1;
#pragma unroll
  for (int wi = 0; wi < 4; ++wi) {
    const int k0 = kb * BK + 16 * kStepsPerWord * wi;  // first k16 step of this word
    if (k0 >= p.k) break;                                // K's padding
    const int group = min(k0 / group_size, last_group);
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
#pragma unroll
    for (int i = 0; i < 2 * kStepsPerWord; ++i) r[i] = D::as_u32(__hmul2(D::as_t2(r[i]), s2));
    // r0 = (k0 + 2t, +1), r1 = (k0 + 2t + 8, +9) for each k16 step of the word.
#pragma unroll
    for (int s = 0; s < kStepsPerWord; ++s) {
      const int ks = k0 + 16 * s;
      if (ks >= p.k) break;
      *reinterpret_cast<uint32_t*>(row + ks + 2 * t) = r[2 * s];
      *reinterpret_cast<uint32_t*>(row + ks + 2 * t + 8) = r[2 * s + 1];
    }
  }
}

template <class T, int Bits>
cudaError_t launch_dequantize(MixedGemmParams const& p, void* w, cudaStream_t stream) {
  const int64_t items = int64_t(p.n / 8) * ((p.k + block_k(Bits) - 1) / block_k(Bits)) * 32;
  dequantize_weight_kernel<T, Bits>
      <<<unsigned((items + 255) / 256), 256, 0, stream>>>(p, static_cast<T*>(w));
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
