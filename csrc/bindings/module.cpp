// Entry point of the cute_gemm._C extension module.
#include <pybind11/pybind11.h>

#include "bindings/format_bindings.hpp"
#include "bindings/gemm_bindings.hpp"
#include "bindings/layout_bindings.hpp"
#include "bindings/mixed_occupancy_bindings.hpp"

// torch passes -DTORCH_EXTENSION_NAME=_C; the module name must match the built file name.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "cute_gemm native extension";
  pybind11::module_ layout = m.def_submodule("layout", "CuTe-style layout algebra");
  cute_gemm::bind_layout(layout);
  pybind11::module_ atoms = m.def_submodule(
      "atoms", "Layouts of the C++ atom traits and GEMM configurations");
  cute_gemm::bind_atoms(atoms);
  pybind11::module_ weight_format = m.def_submodule(
      "weight_format", "The packed weight format's rulebook (kernels/mixed/weight_format.hpp)");
  cute_gemm::bind_weight_format(weight_format);
  cute_gemm::bind_gemm(m);
  cute_gemm::bind_mixed_occupancy(m);  // after bind_gemm, which registers MixedPlan
}
