#pragma once
// Host side of the Tensor Memory Accelerator (cute_gemm/arch/tma_sm90.hpp): encodes the tensor
// map of a row-major matrix of 16-bit elements, as the kernels' 128-byte-swizzled K-major shared
// memory tiles want it. cuTensorMapEncodeTiled is a driver function; it is looked up once through
// the runtime (cudaGetDriverEntryPointByVersion), so the extension does not link libcuda.

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

// The map of matrix X [rows, cols] (row-major, row stride ld elements, fp16 or bf16) read in
// boxes of (box_rows, 64 columns): each box lands as box_rows rows of 128 bytes, 16-byte units
// XOR-swizzled by row % 8 (the 128-byte swizzle of a K-major wgmma operand). Elements past the
// matrix read as zeros.
// @pre base 16-byte aligned, ld % 8 == 0, 1 <= box_rows <= 256.
// Example: activations A [M=300, K=8192], lda 8192, 128-token tiles: box (128, 64) at
// (x = k0, y = m0) fills the (128 x 64) K-major tile of tokens m0.., k columns k0...
inline cudaError_t encode_k_major_sw128_map(CUtensorMap* map, void const* base, bool bf16,
                                            uint64_t rows, uint64_t cols, uint64_t ld,
                                            uint32_t box_rows) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {ld * 2};  // bytes between rows (the first dimension is packed)
  const cuuint32_t box[2] = {64, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r =
      encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
             const_cast<void*>(base), dims, strides, box, elem_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace cute_gemm
