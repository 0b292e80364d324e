// Argument checks shared by the torch ops (gemm_op.cpp, mixed_gemm_op.cpp): dtype names for
// messages and the checks whose logic is the same in every op. Each check takes the op's message
// prefix (e.g. "cute_gemm.gemm: ") so that the messages stay per-op; they throw with TORCH_CHECK
// (RuntimeError in Python).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <limits>
#include <string>

namespace cute_gemm::ops {

// 16 bytes = 8 fp16/bf16 elements: the granularity of the kernels' vector loads.
constexpr int64_t kAlignBytes = 16;
constexpr int64_t kAlignElems = 8;

// The Python name of a dtype, for messages ("torch.float16", not "Half").
inline std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    default: return std::string("torch.") + c10::toString(t);
  }
}

inline bool is_half_type(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

// t.dim() == 2; `shape` names the expected shape in the message, e.g. "[M, K]".
inline void check_2d(char const* op, at::Tensor const& t, char const* name, char const* shape) {
  TORCH_CHECK(t.dim() == 2, op, name, " must be a 2-D tensor ", shape, "; got ", t.dim(),
              "-D with shape ", t.sizes());
}

inline void check_half_dtype(char const* op, at::Tensor const& t, char const* name) {
  TORCH_CHECK(is_half_type(t.scalar_type()), op, name,
              " must have dtype torch.float16 or torch.bfloat16; got ",
              dtype_name(t.scalar_type()));
}

inline void check_same_dtype(char const* op, at::Tensor const& t, char const* name,
                             at::Tensor const& a) {
  TORCH_CHECK(t.scalar_type() == a.scalar_type(), op, name, " must have the same dtype as a (",
              dtype_name(a.scalar_type()), "); got ", dtype_name(t.scalar_type()));
}

inline void check_same_device(char const* op, at::Tensor const& t, char const* name,
                              at::Tensor const& a) {
  TORCH_CHECK(t.device() == a.device(), op, name, " must be on the same device as a (",
              a.device(), "); got ", t.device());
}

inline void check_aligned(char const* op, at::Tensor const& t, char const* name) {
  auto const addr = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  TORCH_CHECK(addr % kAlignBytes == 0, op, name, " must start at a 16-byte aligned address; ",
              "got data_ptr % 16 == ", addr % kAlignBytes,
              " (a view starting at an element offset?); pass an aligned copy, e.g. ", name,
              ".clone()");
}

inline void check_int32(char const* op, int64_t v, char const* what) {
  TORCH_CHECK(v <= std::numeric_limits<int32_t>::max(), op, what, " must fit in int32; got ", v);
}

// The row layout the kernels need of a 2-D operand [rows, K]: contiguous rows, a leading stride
// that is >= K and a multiple of 8 elements, and a 16-byte aligned start. Returns the leading
// stride to pass to the kernel.
inline int64_t check_rows(char const* op, at::Tensor const& t, char const* name) {
  int64_t const rows = t.size(0), cols = t.size(1);
  TORCH_CHECK(t.stride(1) == 1, op, name, " must have contiguous rows (", name,
              ".stride(1) == 1); got strides ", t.strides(), " for shape ", t.sizes(),
              " (a transposed view?); call ", name, ".contiguous()");
  // A single row's leading stride is never used; torch leaves it arbitrary for size-1 dims.
  int64_t const ld = rows == 1 ? cols : t.stride(0);
  TORCH_CHECK(ld >= cols && ld % kAlignElems == 0, op, name, "'s leading stride (", name,
              ".stride(0)) must be >= K and a multiple of ", kAlignElems,
              " elements (16 bytes); got ", name, ".stride(0)=", ld, " with K=", cols, "; call ",
              name, ".contiguous()");
  check_aligned(op, t, name);
  return ld;
}

// bias: a 1-D tensor [N] with a's dtype and device. `n_from` says where N comes from, for the
// message (e.g. "b.size(0)").
inline void check_bias(char const* op, at::Tensor const& bias, at::Tensor const& a, int64_t n,
                       char const* n_from) {
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == n, op, "bias must be a 1-D tensor of size N=", n,
              " (", n_from, "); got shape ", bias.sizes());
  check_same_dtype(op, bias, "bias", a);
  check_same_device(op, bias, "bias", a);
}

// The layout the kernels need of bias [N], when they run: contiguous (a single element's stride is
// never used) and 16-byte aligned.
inline void check_bias_layout(char const* op, at::Tensor const& bias, int64_t n) {
  TORCH_CHECK(bias.stride(0) == 1 || n == 1, op, "bias must be contiguous (bias.stride(0) == 1); ",
              "got bias.stride(0)=", bias.stride(0), "; call bias.contiguous()");
  check_aligned(op, bias, "bias");
}

}  // namespace cute_gemm::ops
