#pragma once
// Shared-memory matrix descriptors of wgmma.mma_async (sm_90a). Plain integer arithmetic, so host
// code (and the CPU tests) can check the encoding. The tile layout a descriptor names is
// Sw128KMajor in mma_traits_sm90.hpp.

#include <cstdint>

#include "cute_gemm/config.hpp"

namespace cute_gemm {

// Descriptor of a K-major operand tile in shared memory with the 128-byte swizzle:
//   rows of 64 16-bit elements (128 bytes), 8 rows per 1024-byte swizzle atom (the 16-byte chunk c
//   of row r sits at chunk c ^ (r % 8): Swizzle<3,4,3> on byte addresses), atoms of consecutive
//   8-row groups 1024 bytes apart (the stride byte offset). The leading byte offset is unused for
//   swizzled K-major layouts (one wgmma reads 32 bytes of a row); it is set to 1 (16 bytes).
//   Fields (PTX ISA, "matrix descriptor"): bits 0-13 start address >> 4, 16-29 leading byte
//   offset >> 4, 32-45 stride byte offset >> 4, 49-51 base offset (0: the atom starts on a
//   1024-byte boundary), 62-63 swizzle mode (1 = 128-byte).
// @pre smem_addr is the shared-memory address of row 0 of a 1024-byte aligned atom, plus the byte
//      offset of the k16 step within the row (0, 32, 64 or 96): the hardware applies the swizzle
//      to the absolute address bits, so advancing the start by 32 bytes selects the next 16 k.
// Example: a tile at 0x4400 (1024-aligned), k step 2 -> start 0x4440: desc = 0x4000004000010444.
CG_HOST_DEVICE constexpr uint64_t make_wgmma_desc_sw128(uint32_t smem_addr) {
  return uint64_t((smem_addr & 0x3FFFFu) >> 4) | (uint64_t(1) << 16) |
         (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

}  // namespace cute_gemm
