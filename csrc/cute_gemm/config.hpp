#pragma once
// Build configuration shared by every header of the layout core.
//
// The core is header-only and compiles three ways: with plain g++ (host tests), with nvcc for the
// host pass, and with nvcc for the device pass. CG_HOST_DEVICE marks what must work in all three.

#include <stdint.h>

#if defined(__CUDACC__)
#define CG_HOST_DEVICE __host__ __device__ inline
#define CG_DEVICE __device__ inline
#else
#define CG_HOST_DEVICE inline
#define CG_DEVICE inline
#endif

// Loop unrolling hint for the device compiler; nothing for plain host compilers.
#if defined(__CUDACC__)
#define CG_PRAGMA_UNROLL _Pragma("unroll")
#define CG_PRAGMA_NO_UNROLL _Pragma("unroll 1")
#else
#define CG_PRAGMA_UNROLL
#define CG_PRAGMA_NO_UNROLL
#endif

#if !defined(__CUDA_ARCH__)
#include <stdexcept>
#include <string>
#endif

namespace cute_gemm {
namespace detail {

#if !defined(__CUDA_ARCH__)
// Host-side failure: a std::invalid_argument (ValueError in Python) or std::out_of_range
// (IndexError in Python) whose text names the operation and the offending values.
[[noreturn]] inline void raise_error(bool out_of_range, const char* what, long long a, long long b) {
  std::string msg(what);
  const std::string::size_type pa = msg.find("{a}");
  if (pa != std::string::npos) msg.replace(pa, 3, std::to_string(a));
  const std::string::size_type pb = msg.find("{b}");
  if (pb != std::string::npos) msg.replace(pb, 3, std::to_string(b));
  if (out_of_range) throw std::out_of_range(msg);
  throw std::invalid_argument(msg);
}
#endif

}  // namespace detail
}  // namespace cute_gemm

// CG_REQUIRE(cond, "text with {a} and {b}", a, b): a precondition of the algebra.
// - In constant evaluation (static layouts) a failure is a compile error: raise_error is not
//   constexpr, so reaching it stops the evaluation.
// - On the host at run time it throws std::invalid_argument (a ValueError through pybind11).
// - On the device it traps; kernels only use static layouts, already checked at compile time.
#if defined(__CUDA_ARCH__)
#define CG_REQUIRE(cond, what, a, b) \
  do {                                \
    if (!(cond)) __trap();            \
  } while (0)
#define CG_REQUIRE_IN_RANGE(cond, what, a, b) CG_REQUIRE(cond, what, a, b)
#else
#define CG_REQUIRE(cond, what, a, b)                                                    \
  do {                                                                                  \
    if (!(cond)) ::cute_gemm::detail::raise_error(false, what, (long long)(a), (long long)(b)); \
  } while (0)
#define CG_REQUIRE_IN_RANGE(cond, what, a, b)                                          \
  do {                                                                                 \
    if (!(cond)) ::cute_gemm::detail::raise_error(true, what, (long long)(a), (long long)(b)); \
  } while (0)
#endif
