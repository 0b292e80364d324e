#pragma once

#include <pybind11/pybind11.h>

namespace cute_gemm {

// Registers the GEMM configuration controls on `m` (the `cute_gemm._C` module itself):
// _gemm_configs, _gemm_config_for, _gemm_set_config, _gemm_get_config.
void bind_gemm(pybind11::module_& m);

}  // namespace cute_gemm
