// Dequantizes a packed weight into a dense [N, K] matrix in the activation dtype with the register
// tricks of dequant.cuh, rounding (q - z) * s once: the reference's values. Used for large M,
// where the product is compute-bound and a dense GEMM on the dequantized weight beats the fused
// mma.sync kernel (see mixed_gemm_op.cpp).

#include "cute_gemm/tv_coords.hpp"
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/mixed_mma_config.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// One warp per (n8 block, k block) of the packed weight (DequantWeightConfig): each lane
// dequantizes its 16 packed bytes into its B fragment values (FragTV), the warp stages them in its
// (N8, kBlockK) tile in shared memory and writes the tile back as 16-byte row segments (S2G), so
// the global stores are coalesced.
template <class T, int Bits>
__global__ void __launch_bounds__(DequantWeightConfig<Bits>::kThreads)
    dequantize_weight_kernel(MixedGemmParams p, T* w) {
  using Cfg = DequantWeightConfig<Bits>;
  using D = Dequant<T>;
  using S2G = typename Cfg::S2G;
  constexpr int BK = Cfg::kBlockK;
  __shared__ uint32_t tile[Cfg::kWarps][Cfg::kTileElems / 2];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t* my = tile[warp];  // the warp's (N8, kBlockK) tile, SmemTile
  const int k_blocks = mixed::k_blocks(p.k, Bits);
  // Item i = nb * k_blocks + kb walks the packed weight in its order (n8 block, then k block).
  const int64_t item = int64_t(blockIdx.x) * Cfg::kWarps + warp;
  const int64_t items = int64_t(p.n / 8) * k_blocks;
  if (item >= items) return;  // whole warps only: no __syncthreads below
  const int kb = int(item % k_blocks);
  const int nb = int(item / k_blocks);
  // The lane's coordinates in the m16n8k16 atom, FragTV's thread mode (T4, G8): t = lane % 4,
  // g = lane / 4. All of its values lie in row g of the tile.
  const int g = lane / 4, t = lane % 4;
  const auto thr = make_coord(t, g);
  const int n = nb * 8 + tile_row_layout<8>(typename Cfg::FragTV{})(thr, _0{});
  const GroupShape groups(p);
  const uint4 q = reinterpret_cast<uint4 const*>(p.qweight)[item * 32 + lane];
  const uint32_t words[4] = {q.x, q.y, q.z, q.w};
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
#pragma unroll
  for (int wi = 0; wi < 4; ++wi) {
    const int k_local = 16 * Cfg::kStepsPerWord * wi;  // first k of this word's first k16 step
    const int group = groups.row_of(kb * BK + k_local);
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
    // Register i of the word: r0 (values 0, 1) or r1 (values 2, 3) of k16 step
    // kStepsPerWord wi + i / 2, a pair of adjacent elements of the tile: one word.
#pragma unroll
    for (int i = 0; i < 2 * Cfg::kStepsPerWord; ++i) {
      const auto v = make_coord(make_coord(_0{}, i % 2), Cfg::kStepsPerWord * wi + i / 2);
      const auto rc = tile_coord<8>(typename Cfg::FragTV{}, thr, v);
      my[typename Cfg::SmemTilePairs{}(get<0>(rc), get<1>(rc) / 2)] =
          D::as_u32(__hmul2(D::as_t2(r[i]), s2));
    }
  }
  __syncwarp();
  // Row segments: 16 bytes per lane, lane l moving segment l + 32 j in pass j (S2G's thread mode
  // runs on into the rows below its (kTileR, kBlockK) tile). K's padding is not written.
  const int k_valid = min(BK, p.k - kb * BK);
#pragma unroll
  for (int c = lane; c < 32 * Cfg::kPasses; c += 32) {
    const auto rc = tile_coord<S2G::kTileR>(typename S2G::LayoutTV{}, c, _0{});
    const int row = get<0>(rc), col = get<1>(rc);
    if (col >= k_valid) continue;  // K % 32 == 0: segments are all in or all out
    const uint4 v =
        *reinterpret_cast<uint4 const*>(&my[typename Cfg::SmemTilePairs{}(row, col / 2)]);
    *reinterpret_cast<uint4*>(w + int64_t(nb * 8 + row) * p.k + kb * BK + col) = v;
  }
}

template <class T, int Bits>
cudaError_t launch_dequantize(MixedGemmParams const& p, void* w, cudaStream_t stream) {
  using Cfg = DequantWeightConfig<Bits>;
  const int64_t items = int64_t(p.n / 8) * mixed::k_blocks(p.k, Bits);
  dequantize_weight_kernel<T, Bits>
      <<<unsigned((items + Cfg::kWarps - 1) / Cfg::kWarps), Cfg::kThreads, 0, stream>>>(
          p, static_cast<T*>(w));
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
