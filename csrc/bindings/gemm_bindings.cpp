// Python controls of the half-precision GEMM's configuration choice (kernels/gemm/gemm_launch.hpp),
// for tests and benchmarks that must run every instantiated kernel, not only the heuristic's picks:
//
//   cute_gemm._C._gemm_configs()            names of the configurations, in index order
//   cute_gemm._C._gemm_config_for(m, n, k)  the configuration a launch of that problem runs now
//   cute_gemm._C._gemm_set_config(i)        force configuration i for every later launch; -1 = the
//                                           heuristic (process-wide)
//   cute_gemm._C._gemm_get_config()         the current override (-1 = none)
//
// cute_gemm.ops._forced_gemm_config(i) wraps set/get in a context manager. Without CUDA
// (CUTE_GEMM_NO_CUDA) the kernels are not built and each function raises RuntimeError.
// pybind11 and the plain-CUDA launcher header only: no torch headers.

#include "bindings/gemm_bindings.hpp"

#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <vector>

#ifndef CUTE_GEMM_NO_CUDA
#include "kernels/gemm/gemm_launch.hpp"
#endif

namespace py = pybind11;

namespace cute_gemm {
namespace {

#ifdef CUTE_GEMM_NO_CUDA
[[noreturn]] void no_cuda(char const* fn) {
  throw std::runtime_error(std::string("cute_gemm._C.") + fn +
                           ": cute_gemm was built without CUDA; there are no GEMM kernels");
}
#endif

std::vector<std::string> configs() {
#ifdef CUTE_GEMM_NO_CUDA
  no_cuda("_gemm_configs");
#else
  std::vector<std::string> out;
  for (int i = 0; i < gemm_config_count(); ++i) out.emplace_back(gemm_config_name_at(i));
  return out;
#endif
}

std::string config_for(int64_t m, int64_t n, int64_t k) {
#ifdef CUTE_GEMM_NO_CUDA
  (void)m, (void)n, (void)k;
  no_cuda("_gemm_config_for");
#else
  constexpr int64_t kMax = 0x7fffffff;
  if (m < 1 || n < 1 || k < 0 || m > kMax || n > kMax || k > kMax) {
    throw std::invalid_argument("_gemm_config_for: need 1 <= M, N < 2^31 and 0 <= K < 2^31, got "
                                "M=" + std::to_string(m) + ", N=" + std::to_string(n) +
                                ", K=" + std::to_string(k));
  }
  return gemm_config_name(int(m), int(n), int(k));
#endif
}

void set_config(int64_t index) {
#ifdef CUTE_GEMM_NO_CUDA
  (void)index;
  no_cuda("_gemm_set_config");
#else
  const int count = gemm_config_count();
  if (index < -1 || index >= count || !gemm_set_config_override(int(index))) {
    throw py::index_error("_gemm_set_config: index " + std::to_string(index) +
                          " out of range: -1 (the heuristic) or 0.." + std::to_string(count - 1));
  }
#endif
}

int get_config() {
#ifdef CUTE_GEMM_NO_CUDA
  no_cuda("_gemm_get_config");
#else
  return gemm_config_override();
#endif
}

}  // namespace

void bind_gemm(py::module_& m) {
  m.def("_gemm_configs", &configs,
        "Names ('BMxBNxBK_sS_wWMxWN') of the GEMM configurations, in index order.");
  m.def("_gemm_config_for", &config_for, py::arg("m"), py::arg("n"), py::arg("k"),
        "Name of the configuration cute_gemm.gemm runs for an [M, K] x [N, K]^T problem now: the "
        "heuristic's choice (for the current device), or the forced one while an override is set.");
  m.def("_gemm_set_config", &set_config, py::arg("index"),
        "Forces configuration `index` for every later GEMM launch in the process; -1 restores "
        "the heuristic. Prefer cute_gemm.ops._forced_gemm_config(i).");
  m.def("_gemm_get_config", &get_config, "The forced configuration's index, -1 when none.");
}

}  // namespace cute_gemm
