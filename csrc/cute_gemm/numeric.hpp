#pragma once
// Fixed-width storage types the copy atoms move: a 16-byte vector is what one LDG.128/STS.128,
// one cp.async and one ldmatrix row move.

#include "cute_gemm/config.hpp"

namespace cute_gemm {

struct alignas(16) uint128_t {
  uint64_t lo;
  uint64_t hi;
};

}  // namespace cute_gemm
