// The GPU's side of the mixed GEMM planner's occupancy model, for tests:
//
//   cute_gemm._C._mixed_occupancy(plan)  the CTAs per SM the current CUDA device keeps resident
//                                        of the launch `plan` makes (its instance's kernel,
//                                        threads and dynamic shared memory), by
//                                        cudaOccupancyMaxActiveBlocksPerMultiprocessor; compare
//                                        plan.ctas_per_sm (a plan for the current device)
//
// ValueError for a plan that runs no mixed instance (the dense path); RuntimeError without CUDA,
// without a device, or with the CUDA error's text. pybind11 and the plain-CUDA launcher header
// only: no torch headers.

#include "bindings/mixed_occupancy_bindings.hpp"

#include <stdexcept>
#include <string>

#include "kernels/mixed/mixed_plan.hpp"

#ifndef CUTE_GEMM_NO_CUDA
#include "kernels/mixed/mixed_gemm_launch.hpp"
#endif

namespace py = pybind11;

namespace cute_gemm {
namespace {

constexpr char kFn[] = "cute_gemm._C._mixed_occupancy: ";

int mixed_occupancy(MixedPlan const& plan) {
  // Checked first, in every build, so that a wrong argument reads the same with or without a GPU.
  if (plan.kernel == MixedKernel::kDense || plan.instance < 0 ||
      plan.instance >= mixed_instance_count()) {
    throw std::invalid_argument(std::string(kFn) + "the plan runs no mixed kernel instance (" +
                                plan.describe() + ")");
  }
#ifdef CUTE_GEMM_NO_CUDA
  throw std::runtime_error(std::string(kFn) +
                           "cute_gemm was built without CUDA; there are no mixed GEMM kernels");
#else
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear it: later CUDA calls must not report this one
    throw std::runtime_error(std::string(kFn) + "no CUDA device");
  }
  int ctas = 0;
  const cudaError_t e = mixed_instance_occupancy(plan, &ctas);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::string what = std::string(kFn) + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) +
                       " (" + mixed_instance(plan.instance).name + ")";
    if (e == cudaErrorInvalidValue) {
      what += "; the plan's threads, shared memory or decode CTA shape may not be what the "
              "instance's launcher runs";
    }
    throw std::runtime_error(what);
  }
  return ctas;
#endif
}

}  // namespace

void bind_mixed_occupancy(py::module_& m) {
  m.def("_mixed_occupancy", &mixed_occupancy, py::arg("plan"),
        "CTAs per SM of a mixed GEMM plan's launch on the current CUDA device "
        "(cudaOccupancyMaxActiveBlocksPerMultiprocessor); compare plan.ctas_per_sm.");
}

}  // namespace cute_gemm
