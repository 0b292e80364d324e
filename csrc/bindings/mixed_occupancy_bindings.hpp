#pragma once

#include <pybind11/pybind11.h>

namespace cute_gemm {

// Registers _mixed_occupancy on `m` (the `cute_gemm._C` module itself).
void bind_mixed_occupancy(pybind11::module_& m);

}  // namespace cute_gemm
