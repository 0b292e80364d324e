// Read-only queries of the half-precision GEMM's configurations (kernels/gemm/gemm_configs.hpp,
// gemm_launch.hpp), for tests and benchmarks that run every compiled kernel, not only the
// heuristic's picks:
//
//   cute_gemm._C._gemm_configs()            names of the compiled configurations: the mma.sync
//                                           ones, largest tiles first, then the Hopper kernel
//                                           "wgmma_..." (every build: the list is plain C++)
//   cute_gemm._C._gemm_config_for(m, n, k)  the configuration the heuristic picks for that
//                                           problem on the current device (CUDA builds only)
//
// Choosing a configuration is an argument of the op, not state set here:
// cute_gemm.gemm(a, b, config="128x128x64_s3_w2x2") (schema `str? config=None`, checked on every
// backend and in the fake kernel). There is no process-wide override.
//
// and the mixed-input GEMM's planner (kernels/mixed/mixed_plan.hpp), which is plain C++ and works
// in every build, GPU or not:
//
//   cute_gemm._C.DeviceSpec                 a device as the planner sees it (fields settable)
//   cute_gemm._C._device_spec(name)         a built-in spec ("h100", "h200", "a100"), or the
//                                           current CUDA device's for name None
//   cute_gemm._C.MixedPlan                  what a call runs (read-only fields, describe())
//   cute_gemm._C._mixed_plan(m, n, k, bits, group_size, bf16, device, schedule, gated, partials)
//                                           the plan (cute_gemm.mixed_plan wraps it)
//   cute_gemm._C._mixed_schedule(text)      the canonical form of a schedule string (ValueError
//                                           naming the bad item)
//   cute_gemm._C._mixed_instances()         the instantiated kernels, as dicts
//
// Without CUDA (CUTE_GEMM_NO_CUDA) _gemm_config_for raises RuntimeError (there is no device to
// choose for) and only built-in device specs exist.
// pybind11 and the plain-CUDA launcher header only: no torch headers.

#include "bindings/gemm_bindings.hpp"

#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gemm/gemm_configs.hpp"
#include "kernels/mixed/mixed_plan.hpp"
#include "kernels/mixed/weight_format.hpp"

#ifndef CUTE_GEMM_NO_CUDA
#include "kernels/gemm/gemm_launch.hpp"
#include "kernels/mixed/mixed_gemm_launch.hpp"  // current_device_spec
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
  std::vector<std::string> out;
  for (int i = 0; i < kGemmNamedConfigCount; ++i) out.push_back(gemm_config_name(i));
  return out;
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
  return gemm_config_name(gemm_heuristic_config(int(m), int(n), int(k)));
#endif
}

DeviceSpec device_spec(std::optional<std::string> const& name) {
  if (name.has_value()) return builtin_device_spec(*name);  // std::invalid_argument -> ValueError
#ifdef CUTE_GEMM_NO_CUDA
  throw std::runtime_error("cute_gemm._C._device_spec: built without CUDA; name a built-in spec "
                           "('h100', 'h200', 'a100')");
#else
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw std::runtime_error("cute_gemm._C._device_spec: no CUDA device; name a built-in spec "
                             "('h100', 'h200', 'a100')");
  }
  return current_device_spec();
#endif
}

MixedPlan mixed_plan(int64_t m, int64_t n, int64_t k, int64_t bits, int64_t group_size, bool bf16,
                     DeviceSpec const& device, std::string const& schedule, bool gated,
                     bool partials) {
  if (bits < 0 || bits > 64 || group_size < -1 || group_size > 0x7fffffff) {
    throw std::invalid_argument(std::string("plan_mixed_gemm: bits must be ") +
                                mixed::kValidBitsText + " and group_size " +
                                mixed::kValidGroupSizesText + "; got bits=" +
                                std::to_string(bits) + ", group_size=" +
                                std::to_string(group_size));
  }
  return plan_mixed_gemm({m, n, k, int(bits), int(group_size), bf16, gated, partials}, device,
                         MixedSchedule::parse(schedule));
}

std::string field_value(std::string const& v) { return "'" + v + "'"; }

std::string spec_repr(DeviceSpec const& d) {
  return "DeviceSpec(name=" + field_value(d.name) + ", sm_count=" + std::to_string(d.sm_count) +
         ", cc=" + std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor) +
         ", smem_per_sm=" + std::to_string(d.smem_per_sm) + ", smem_per_block_optin=" +
         std::to_string(d.smem_per_block_optin) + ", regs_per_sm=" +
         std::to_string(d.regs_per_sm) + ", wgmma=" + (d.wgmma ? "True" : "False") + ")";
}

py::dict plan_dict(MixedPlan const& p) {
  py::dict d;
  d["kernel"] = kernel_name(p.kernel);
  d["instance"] = p.instance >= 0 ? py::object(py::str(mixed_instance(p.instance).name))
                                  : py::object(py::none());
  d["tile_m"] = p.tile_m;
  d["tile_n"] = p.tile_n;
  d["stages"] = p.stages;
  d["threads"] = p.threads;
  d["smem_bytes"] = p.smem_bytes;
  d["splits"] = p.splits;
  d["warps"] = p.warps;
  d["col_warps"] = p.col_warps;
  d["k_slices"] = p.k_slices;
  d["warp_groups"] = p.warp_groups;
  d["producer"] = p.producer;
  d["tma_loads"] = p.tma_loads;
  d["fine_groups"] = p.fine_groups;
  d["exact_scales"] = p.exact_scales;
  d["gated"] = p.gated;
  d["ctas_per_sm"] = p.ctas_per_sm;
  d["grid"] = py::make_tuple(p.grid[0], p.grid[1], p.grid[2]);
  d["raster_m"] = p.raster_m;
  d["reduce_in_cluster"] = p.reduce_in_cluster;
  d["stream_k_ctas"] = p.stream_k_ctas;
  d["via_workspace"] = p.via_workspace;
  d["workspace_bytes"] = p.workspace_bytes;
  d["partials"] = p.partials;
  d["early_dependents"] = p.early_dependents;
  d["single_row"] = p.single_row;
  return d;
}

py::list instances() {
  py::list out;
  for (int i = 0; i < mixed_instance_count(); ++i) {
    MixedInstanceInfo const& inst = mixed_instance(i);
    py::dict d;
    d["name"] = inst.name;
    d["kernel"] = kernel_name(inst.kernel);
    d["bits"] = inst.bits;
    d["bf16"] = inst.bf16;
    d["tile_m"] = inst.tile_m;
    d["tile_n"] = inst.tile_n;
    d["fine_groups"] = inst.fine_groups;
    d["exact_scales"] = inst.exact_scales;
    d["warp_groups"] = inst.warp_groups;
    d["producer"] = inst.producer;
    d["tma_loads"] = inst.tma_loads;
    d["stages"] = inst.stages;
    d["threads"] = inst.threads;
    d["smem_bytes"] = inst.smem_bytes;
    d["registers"] = inst.registers;
    d["min_ctas_per_sm"] = inst.min_ctas_per_sm;
    d["max_k_slices"] = inst.max_k_slices;
    d["sliced_smem_bytes"] = inst.sliced_smem_bytes;
    d["max_cluster_splits"] = inst.max_cluster_splits;
    d["stream_k_partial_floats"] = inst.stream_k_partial_floats;
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_gemm(py::module_& m) {
  py::class_<DeviceSpec>(m, "DeviceSpec",
                         "A GPU as the mixed GEMM's planner sees it. cute_gemm.device_spec() gives "
                         "the built-in ones and the current device's; fields are settable.")
      .def(py::init<>())
      .def_readwrite("name", &DeviceSpec::name)
      .def_readwrite("sm_count", &DeviceSpec::sm_count)
      .def_readwrite("cc_major", &DeviceSpec::cc_major)
      .def_readwrite("cc_minor", &DeviceSpec::cc_minor)
      .def_readwrite("smem_per_sm", &DeviceSpec::smem_per_sm)
      .def_readwrite("smem_per_block_optin", &DeviceSpec::smem_per_block_optin)
      .def_readwrite("smem_reserved_per_cta", &DeviceSpec::smem_reserved_per_cta)
      .def_readwrite("regs_per_sm", &DeviceSpec::regs_per_sm)
      .def_readwrite("max_threads_per_sm", &DeviceSpec::max_threads_per_sm)
      .def_readwrite("max_ctas_per_sm", &DeviceSpec::max_ctas_per_sm)
      .def_readwrite("wgmma", &DeviceSpec::wgmma)
      .def("__repr__", &spec_repr);
  py::class_<MixedPlan>(m, "MixedPlan",
                        "What a cute_gemm.mixed_gemm call runs (cute_gemm.mixed_plan). str() is "
                        "one readable line; as_dict() all fields.")
      .def_property_readonly("kernel", [](MixedPlan const& p) { return kernel_name(p.kernel); })
      .def_property_readonly("instance",
                             [](MixedPlan const& p) -> py::object {
                               if (p.instance < 0) return py::none();
                               return py::str(mixed_instance(p.instance).name);
                             })
      .def_readonly("tile_m", &MixedPlan::tile_m)
      .def_readonly("tile_n", &MixedPlan::tile_n)
      .def_readonly("stages", &MixedPlan::stages)
      .def_readonly("threads", &MixedPlan::threads)
      .def_readonly("smem_bytes", &MixedPlan::smem_bytes)
      .def_readonly("splits", &MixedPlan::splits)
      .def_readonly("warps", &MixedPlan::warps)
      .def_readonly("col_warps", &MixedPlan::col_warps)
      .def_readonly("k_slices", &MixedPlan::k_slices)
      .def_readonly("warp_groups", &MixedPlan::warp_groups)
      .def_readonly("producer", &MixedPlan::producer)
      .def_readonly("tma_loads", &MixedPlan::tma_loads)
      .def_readonly("fine_groups", &MixedPlan::fine_groups)
      .def_readonly("exact_scales", &MixedPlan::exact_scales)
      .def_readonly("gated", &MixedPlan::gated)
      .def_readonly("ctas_per_sm", &MixedPlan::ctas_per_sm)
      .def_property_readonly("grid",
                             [](MixedPlan const& p) {
                               return py::make_tuple(p.grid[0], p.grid[1], p.grid[2]);
                             })
      .def_readonly("raster_m", &MixedPlan::raster_m)
      .def_readonly("reduce_in_cluster", &MixedPlan::reduce_in_cluster)
      .def_readonly("stream_k_ctas", &MixedPlan::stream_k_ctas)
      .def_readonly("via_workspace", &MixedPlan::via_workspace)
      .def_readonly("workspace_bytes", &MixedPlan::workspace_bytes)
      .def_readonly("partials", &MixedPlan::partials)
      .def_readonly("early_dependents", &MixedPlan::early_dependents)
      .def_readonly("single_row", &MixedPlan::single_row)
      .def("describe", &MixedPlan::describe)
      .def("as_dict", &plan_dict)
      .def("__str__", &MixedPlan::describe)
      .def("__repr__", [](MixedPlan const& p) { return "<MixedPlan " + p.describe() + ">"; });
  m.def("_device_spec", &device_spec, py::arg("name") = py::none(),
        "A built-in device spec ('h100', 'h200', 'a100'), or the current CUDA device's.");
  m.def("_mixed_plan", &mixed_plan, py::arg("m"), py::arg("n"), py::arg("k"), py::arg("bits"),
        py::arg("group_size"), py::arg("bf16"), py::arg("device"), py::arg("schedule") = "",
        py::arg("gated") = false, py::arg("partials") = false,
        "The plan of a mixed_gemm call (plan_mixed_gemm). Prefer cute_gemm.mixed_plan().");
  m.def("_mixed_schedule",
        [](std::string const& text) { return MixedSchedule::parse(text).str(); },
        py::arg("text"), "The canonical form of a mixed_gemm schedule string.");
  m.def("_mixed_instances", &instances, "The mixed GEMM's instantiated kernels, as dicts.");
  m.def("_gemm_configs", &configs,
        "Names ('BMxBNxBK_sS_wWMxWN') of the compiled GEMM configurations, largest tiles first: "
        "the values cute_gemm.gemm's `config` argument accepts.");
  m.def("_gemm_config_for", &config_for, py::arg("m"), py::arg("n"), py::arg("k"),
        "Name of the configuration the heuristic picks for an [M, K] x [N, K]^T problem on the "
        "current device: what cute_gemm.gemm runs with config=None.");
}

}  // namespace cute_gemm
