#pragma once
// Host side of the Tensor Memory Accelerator (cute_gemm/arch/tma_sm90.hpp): encodes the tensor
// maps the kernels copy with. cuTensorMapEncodeTiled is a driver function; it is looked up once
// through the runtime (cudaGetDriverEntryPointByVersion), so the extension does not link libcuda.
// Encoding is host computation only (no device work, no synchronization): a launch encodes its
// maps and passes them by value, which CUDA graphs capture with the launch.

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace cute_gemm {

using TensorMapEncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                          cuuint64_t const*, cuuint64_t const*, cuuint32_t const*,
                                          cuuint32_t const*, CUtensorMapInterleave,
                                          CUtensorMapSwizzle, CUtensorMapL2promotion,
                                          CUtensorMapFloatOOBfill);

// The driver's cuTensorMapEncodeTiled (CUDA 12.0 ABI), or nullptr when the driver lacks it.
inline TensorMapEncodeTiled tensor_map_encoder() {
  static const TensorMapEncodeTiled fn = []() -> TensorMapEncodeTiled {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // clear the error
      return nullptr;
    }
    return reinterpret_cast<TensorMapEncodeTiled>(p);
  }();
  return fn;
}

// cuTensorMapEncodeTiled for a Rank-D tensor whose dimension 0 is contiguous: `dims` and `box`
// (elements) dimension 0 first, `strides` the bytes between consecutive indices of dimensions
// 1.., every element of a box copied (element strides 1), no interleave, 256-byte L2 promotion;
// elements past the tensor read as zeros (and still count in the copy's bytes).
template <int Rank>
inline cudaError_t encode_tiled_map(CUtensorMap* map, void const* base, CUtensorMapDataType type,
                                    cuuint64_t const (&dims)[Rank],
                                    cuuint64_t const (&strides)[Rank - 1],
                                    cuuint32_t const (&box)[Rank], CUtensorMapSwizzle swizzle) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  cuuint32_t elem_strides[Rank];
  for (cuuint32_t& e : elem_strides) e = 1;
  const CUresult r = encode(map, type, Rank, const_cast<void*>(base), dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// The map of a row-major matrix X [rows, cols] of `type` elements (row stride ld_bytes) read in
// boxes of (box_rows, box_cols) elements, which land in shared memory as box_rows rows of
// box_cols elements, unswizzled or with the 128-byte swizzle.
// @pre base 16-byte aligned, ld_bytes % 16 == 0, box_cols * element bytes % 16 == 0 (128 with the
// swizzle), 1 <= box_rows, box_cols <= 256.
inline cudaError_t encode_2d_map(CUtensorMap* map, void const* base, CUtensorMapDataType type,
                                 uint64_t rows, uint64_t cols, uint64_t ld_bytes,
                                 uint32_t box_rows, uint32_t box_cols, bool swizzle_128b) {
  return encode_tiled_map<2>(map, base, type, {cols, rows}, {ld_bytes}, {box_cols, box_rows},
                             swizzle_128b ? CU_TENSOR_MAP_SWIZZLE_128B
                                          : CU_TENSOR_MAP_SWIZZLE_NONE);
}

// The map of a 3-D tensor X [d2][d1][d0] of `type` elements (d0 contiguous; strides[0] and
// strides[1] the bytes between consecutive indices of d1 and of d2) read in boxes of (box[2],
// box[1], box[0]) elements, unswizzled, which land in shared memory d0 fastest.
// @pre base 16-byte aligned, strides % 16 == 0, box[0] * element bytes % 16 == 0, boxes of 1..256.
inline cudaError_t encode_3d_map(CUtensorMap* map, void const* base, CUtensorMapDataType type,
                                 cuuint64_t const (&dims)[3], cuuint64_t const (&strides)[2],
                                 cuuint32_t const (&box)[3]) {
  return encode_tiled_map<3>(map, base, type, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE);
}

// The map of matrix X [rows, cols] (row-major, row stride ld elements, fp16 or bf16) read in
// boxes of (box_rows, 64 columns): each box lands as box_rows rows of 128 bytes, 16-byte units
// XOR-swizzled by row % 8 (the 128-byte swizzle of a K-major wgmma operand).
// Example: activations A [M=300, K=8192], lda 8192, M tiles of 128 rows: box (128, 64) at
// (x = k0, y = m0) fills the (128 x 64) K-major tile of rows m0.., columns k0.. of A.
inline cudaError_t encode_k_major_sw128_map(CUtensorMap* map, void const* base, bool bf16,
                                            uint64_t rows, uint64_t cols, uint64_t ld,
                                            uint32_t box_rows) {
  return encode_2d_map(map, base,
                       bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                       rows, cols, ld * 2, box_rows, 64, true);
}

}  // namespace cute_gemm
