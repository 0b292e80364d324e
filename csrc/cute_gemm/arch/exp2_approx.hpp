#pragma once
// 2^x on the special-function unit, subnormal results flushed to zero (ex2.approx.ftz.f32, every
// architecture): one MUFU.EX2. exp2f without fast math wraps the same instruction in a range
// check, a halving and a squaring to keep subnormal results; a softmax's probabilities and
// rescale factors below 2^-126 are 0 to it either way. 2^-inf = +0, 2^0 = 1.

#include <cmath>

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

CG_DEVICE float exp2_approx_ftz(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return std::exp2(x);  // the host pass: the exact value (no caller runs it there today)
#endif
}

}  // namespace cute_gemm
