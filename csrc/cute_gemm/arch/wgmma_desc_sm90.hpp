#pragma once
// Shared-memory matrix descriptors of wgmma.mma_async (sm_90a): the bit encoding only. Plain
// integer arithmetic, so host code (and the CPU tests) can check it. Which byte offsets and
// swizzle a tile needs follows from its layout: WgmmaDesc (cute_gemm/wgmma_desc.hpp) derives them
// and calls this.

#include <cstdint>

#include "cute_gemm/config.hpp"

namespace cute_gemm {

// The descriptor's swizzle modes (PTX ISA, "matrix descriptor", bits 62-63).
enum class WgmmaSwizzle : uint32_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

// The descriptor of an operand tile whose first core matrix (8 rows x 16 bytes) starts at
// smem_addr. Fields (PTX ISA): bits 0-13 start address >> 4, 16-29 leading byte offset >> 4
// (between core matrices adjacent along K), 32-45 stride byte offset >> 4 (between core matrices
// adjacent along the rows), 49-51 base offset (0: the swizzle atoms start on their own alignment,
// 1024 bytes for the 128-byte swizzle), 62-63 swizzle mode.
// @pre smem_addr, leading_bytes and stride_bytes are multiples of 16 below 256 KB; with a swizzle,
//      smem_addr is the atom's start plus the byte offset of a k step within its first row (the
//      hardware swizzles the absolute address bits, so a larger start selects later k).
// Example: start 0x4440, 16 and 1024 bytes, 128-byte swizzle -> 0x4000004000010444.
CG_HOST_DEVICE constexpr uint64_t make_wgmma_desc(uint32_t smem_addr, uint32_t leading_bytes,
                                                  uint32_t stride_bytes, WgmmaSwizzle swizzle) {
  return uint64_t((smem_addr & 0x3FFFFu) >> 4) |
         (uint64_t((leading_bytes & 0x3FFFFu) >> 4) << 16) |
         (uint64_t((stride_bytes & 0x3FFFFu) >> 4) << 32) | (uint64_t(swizzle) << 62);
}

}  // namespace cute_gemm
