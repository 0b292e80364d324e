#pragma once

#include <pybind11/pybind11.h>

namespace cute_gemm {

// Registers the layout-algebra API on `m` (the `cute_gemm._C.layout` submodule).
void bind_layout(pybind11::module_& m);

// Registers the atom-trait and GEMM-configuration layouts on `m` (`cute_gemm._C.atoms`).
void bind_atoms(pybind11::module_& m);

}  // namespace cute_gemm
