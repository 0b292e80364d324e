// Compile-only check that the typed layer works in device code (nvcc -c; nothing is launched):
// static layouts and their lifted algebra, a run-time-sized global-memory tile through local_tile,
// a shared-memory tensor with a swizzled ComposedLayout, register fragments (ArrayEngine), `_`.
// nvcc -std=c++17 --expt-relaxed-constexpr -arch=sm_80 -I csrc -c tests/cpp/test_device_compile.cu

#include <cuda_fp16.h>

#include "cute_gemm/tensor.hpp"

using namespace cute_gemm;

namespace {

using BlockM = _64;
using BlockK = _32;

// The smem tile: 8x32 row-major half atoms (64-byte rows), swizzled, repeated to 64x32.
using SmemLayoutA = decltype(composition(
    Swizzle<2, 3, 3>{},
    tile_to_shape(make_layout(Shape<_8, _32>{}, LayoutRight{}), Shape<BlockM, BlockK>{})));
static_assert(is_static<SmemLayoutA>::value, "a static smem layout");
static_assert(decltype(size(SmemLayoutA{}))::value == 64 * 32, "");

// 128 threads as 32x4, each copying 1x8 halves (one 16-byte vector) per step.
using ThrLayout = Layout<Shape<_32, _4>, Stride<_4, _1>>;

__global__ void typed_layer_kernel(__half const* A, float* out, int M, int K, int lda) {
  __shared__ __half smem[64 * 32];

  // Static algebra evaluated at compile time, usable in device code.
  constexpr auto c = coalesce(Layout<Shape<_2, Shape<_1, _6>>, Stride<_1, Stride<_6, _2>>>{});
  static_assert(std::is_same<decltype(c), const Layout<_12, _1>>::value, "");
  using Z = decltype(zipped_divide(make_layout(Shape<_8, _6>{}), Shape<_2, _3>{}));
  static_assert(decltype(size<0>(Z{}))::value == 6, "");

  // The CTA's tile of a run-time (M,K):(lda,1) matrix in global memory.
  auto gA = make_tensor(make_gmem_ptr(A), make_layout(make_shape(M, K), make_stride(lda, _1{})));
  auto gA_blk = local_tile(gA, Shape<BlockM, BlockK>{}, make_coord(int(blockIdx.x), _));
  static_assert(is_gmem<decltype(gA_blk)>::value, "");
  auto sA = make_tensor(make_smem_ptr(smem), SmemLayoutA{});
  static_assert(is_smem<decltype(sA)>::value, "");

  // Thread partitions of the gmem tile (k tiles kept) and of the swizzled smem tile:
  // thread (r, c) of the 32x4 layout owns rows r + 32i and columns c + 4j of each tile.
  const int tid = int(threadIdx.x);
  auto tAgA = local_partition(gA_blk, ThrLayout{}, tid);
  auto tAsA = local_partition(sA, ThrLayout{}, tid);

  const int k_tiles = int(size<2>(gA_blk));
  float acc_sum = 0.f;
  auto frag = make_fragment_like(tAsA);  // registers: ArrayEngine<__half, 16>
  static_assert(sizeof(frag) == 16 * sizeof(__half), "a register fragment holds only its data");
  for (int kt = 0; kt < k_tiles; ++kt) {
    auto src = tAgA(_, _, kt);
    const int row0 = int(blockIdx.x) * 64;
    // Predicated copy of the ragged edge: global -> registers -> swizzled smem.
    clear(frag);
    for (int i = 0; i < int(size(frag)); ++i) {
      const auto crd = idx2crd(i, frag.shape(), compact_col_major(frag.shape()));
      const int r = row0 + get<0>(ThrLayout{}.get_hier_coord(tid)) + 32 * int(get<0>(crd));
      const int col = kt * 32 + get<1>(ThrLayout{}.get_hier_coord(tid)) + 4 * int(get<1>(crd));
      if (r < M && col < K) frag(i) = src(i);
    }
    copy(frag, tAsA);
    __syncthreads();
    // Read back through a slice of the swizzled layout (the offset folds into the swizzle).
    auto row = sA(tid % 64, _);
    for (int j = 0; j < 32; ++j) acc_sum += __half2float(row(j));
    __syncthreads();
  }

  auto acc = make_tensor<float>(Layout<Shape<_2, _2>>{});
  fill(acc, acc_sum);
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc(1, 1) + float(c(5));
  if (tid == 0 && blockIdx.x == 0 && M < 0) {
    print(sA.layout());
    print(tAgA.layout());
  }
}

}  // namespace

// A host entry point so the kernel is emitted (not launched by the tests).
void launch_typed_layer_kernel(__half const* A, float* out, int M, int K, int lda,
                               cudaStream_t stream) {
  typed_layer_kernel<<<(M + 63) / 64, 128, 0, stream>>>(A, out, M, K, lda);
}
