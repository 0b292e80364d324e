#pragma once

#include <pybind11/pybind11.h>

namespace cute_gemm {

// Registers the packed weight format's rulebook (kernels/mixed/weight_format.hpp) on `m` (the
// `cute_gemm._C.weight_format` submodule; cute_gemm/weight_format.py is its Python face).
void bind_weight_format(pybind11::module_& m);

}  // namespace cute_gemm
