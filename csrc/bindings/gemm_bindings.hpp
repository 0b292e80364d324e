#pragma once

#include <pybind11/pybind11.h>

namespace cute_gemm {

// Registers the GEMM configuration queries (read-only: _gemm_configs, _gemm_config_for) and the
// mixed GEMM's planner bindings on `m` (the `cute_gemm._C` module itself). The dense GEMM's
// configuration is chosen per call, by cute_gemm.gemm's `config` argument.
void bind_gemm(pybind11::module_& m);

}  // namespace cute_gemm
