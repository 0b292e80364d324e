// Python controls of the half-precision GEMM's configuration choice (kernels/gemm/gemm_launch.hpp),
// for tests and benchmarks that must run every instantiated kernel, not only the heuristic's picks:
//
//   cute_gemm._C._gemm_configs()            names of the configurations, in index order
//   cute_gemm._C._gemm_config_for(m, n, k)  the configuration a launch of that problem runs now
//   cute_gemm._C._gemm_set_config(i)        force configuration i for every later launch; -1 = the
//                                           heuristic (process-wide)
//   cute_gemm._C._gemm_get_config()         the current override (-1 = none)
//
// and of the mixed-input GEMM's split-K plan (kernels/mixed/mixed_gemm_launch.hpp):
//
//   cute_gemm._C._mixed_plan(m, n, k, bits, group_size, bf16)
//                                           what a launch runs now: a dict of kernel ("mma",
//                                           "wgmma" or "decode"), tile_m, m_tiles,
//                                           fine_groups, exact_scales, splits, reduce (0 none,
//                                           1 workspace, 2 cluster), warps (decode: per CTA),
//                                           col_warps (decode: per k group), warp_groups
//                                           (wgmma: per CTA)
//   cute_gemm._C._mixed_set_kernel(kernel)  force the kernel: 0 mma.sync, 1 wgmma (where usable),
//                                           2 decode (M <= 8), -1 the default; returns the
//                                           previous setting
//   cute_gemm._C._mixed_set_decode_shape(warps, col_warps)
//                                           force the decode kernel's warps per CTA and/or per
//                                           k group; -1 = the heuristic (process-wide); returns
//                                           the previous (warps, col_warps)
//   cute_gemm._C._mixed_set_wgmma_tile(tile_m)
//                                           force the wgmma kernel's token tile (32, 64, 128,
//                                           256);
//                                           -1 = the heuristic (process-wide); returns the
//                                           previous setting
//   cute_gemm._C._mixed_wgmma_usable()      whether this build and device run the wgmma kernels
//   cute_gemm._C._mixed_set_split(splits, reduce)
//                                           force the split count and/or the reduction; -1 = the
//                                           heuristic (process-wide)
//   cute_gemm._C._mixed_get_split()         the current override, (splits, reduce)
//   cute_gemm._C._mixed_set_dense_from_m(m) rows from which the CUDA op dequantizes and runs a
//                                           dense GEMM instead of the fused kernel (-1 the
//                                           default); returns the previous setting
//                                           (ops/mixed_policy.hpp)
//   cute_gemm._C._mixed_dense_from_m()      the threshold in effect now
//
// cute_gemm.ops._forced_gemm_config(i), _forced_mixed_split(splits, reduce),
// _forced_decode_shape(warps, col_warps) and _forced_wgmma_tile(tile_m) wrap set/get in context
// managers. Without CUDA (CUTE_GEMM_NO_CUDA) the kernels are not built and each function raises
// RuntimeError.
// pybind11 and the plain-CUDA launcher header only: no torch headers.

#include "bindings/gemm_bindings.hpp"

#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <tuple>

#include "ops/mixed_policy.hpp"

#ifndef CUTE_GEMM_NO_CUDA
#include "kernels/gemm/gemm_launch.hpp"
#include "kernels/mixed/mixed_gemm_launch.hpp"
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

py::dict mixed_plan(int64_t m, int64_t n, int64_t k, int64_t bits,
                                           int64_t group_size, bool bf16) {
#ifdef CUTE_GEMM_NO_CUDA
  (void)m, (void)n, (void)k, (void)bits, (void)group_size, (void)bf16;
  no_cuda("_mixed_plan");
#else
  constexpr int64_t kMax = 0x7fffffff;
  if (m < 1 || n < 1 || k < 1 || m > kMax || n > kMax || k > kMax || (bits != 4 && bits != 8)) {
    throw std::invalid_argument("_mixed_plan: need 1 <= M, N, K < 2^31 and bits 4 or 8, got M=" +
                                std::to_string(m) + ", N=" + std::to_string(n) + ", K=" +
                                std::to_string(k) + ", bits=" + std::to_string(bits));
  }
  MixedGemmParams p;
  p.m = int(m);
  p.n = int(n);
  p.k = int(k);
  p.bits = int(bits);
  p.group_size = group_size <= 0 ? int(k) : int(group_size);
  p.dtype = bf16 ? HalfType::kBFloat16 : HalfType::kFloat16;
  const MixedPlan plan = mixed_gemm_plan(p);
  py::dict d;
  d["kernel"] = plan.kernel == MixedKernel::kWgmma    ? "wgmma"
                : plan.kernel == MixedKernel::kDecode ? "decode"
                                                      : "mma";
  d["tile_m"] = plan.tile_m;
  d["m_tiles"] = plan.m_tiles;
  d["fine_groups"] = plan.fine_groups;
  d["exact_scales"] = plan.exact_scales;
  d["splits"] = plan.splits;
  d["reduce"] = int(plan.reduce);
  d["warps"] = plan.warps;
  d["col_warps"] = plan.col_warps;
  d["warp_groups"] = plan.warp_groups;
  return d;
#endif
}

int mixed_set_kernel(int64_t kernel) {
#ifdef CUTE_GEMM_NO_CUDA
  (void)kernel;
  no_cuda("_mixed_set_kernel");
#else
  const int previous = mixed_kernel_override();
  if (kernel < -1 || kernel > 2 || !mixed_set_kernel_override(int(kernel))) {
    throw std::invalid_argument("_mixed_set_kernel: kernel must be -1 (the default), 0 (mma.sync), "
                                "1 (wgmma) or 2 (decode); got " + std::to_string(kernel));
  }
  return previous;
#endif
}

bool mixed_wgmma_usable_now() {
#ifdef CUTE_GEMM_NO_CUDA
  no_cuda("_mixed_wgmma_usable");
#else
  return mixed_wgmma_usable();
#endif
}

void mixed_set_split(int64_t splits, int64_t reduce) {
#ifdef CUTE_GEMM_NO_CUDA
  (void)splits, (void)reduce;
  no_cuda("_mixed_set_split");
#else
  if (splits < -1 || splits > 64 || reduce < -1 || reduce > 2 ||
      !mixed_set_split_override(int(splits), int(reduce))) {
    throw std::invalid_argument("_mixed_set_split: splits must be -1 (the heuristic) or 1..64 and "
                                "reduce -1 (the heuristic), 1 (workspace) or 2 (cluster); got "
                                "splits=" + std::to_string(splits) + ", reduce=" +
                                std::to_string(reduce));
  }
#endif
}

std::tuple<int, int> mixed_set_decode_shape(int64_t warps, int64_t col_warps) {
#ifdef CUTE_GEMM_NO_CUDA
  (void)warps, (void)col_warps;
  no_cuda("_mixed_set_decode_shape");
#else
  int previous_warps = -1, previous_col_warps = -1;
  mixed_decode_override(previous_warps, previous_col_warps);
  if (warps < -1 || warps > 16 || col_warps < -1 || col_warps > 4 ||
      !mixed_set_decode_override(int(warps), int(col_warps))) {
    throw std::invalid_argument("_mixed_set_decode_shape: warps must be -1 (the heuristic) or "
                                "1..16 and col_warps -1 (the heuristic), 1, 2 or 4; got warps=" +
                                std::to_string(warps) + ", col_warps=" +
                                std::to_string(col_warps));
  }
  return {previous_warps, previous_col_warps};
#endif
}

int mixed_set_wgmma_tile(int64_t tile_m) {
#ifdef CUTE_GEMM_NO_CUDA
  (void)tile_m;
  no_cuda("_mixed_set_wgmma_tile");
#else
  const int previous = mixed_wgmma_override();
  if (tile_m < -1 || tile_m > 256 || !mixed_set_wgmma_override(int(tile_m))) {
    throw std::invalid_argument("_mixed_set_wgmma_tile: tile_m must be -1 (the heuristic), 32, 64, "
                                "128 or 256; got " + std::to_string(tile_m));
  }
  return previous;
#endif
}

std::tuple<int, int> mixed_get_split() {
#ifdef CUTE_GEMM_NO_CUDA
  no_cuda("_mixed_get_split");
#else
  int splits = -1, reduce = -1;
  mixed_split_override(splits, reduce);
  return {splits, reduce};
#endif
}

int mixed_set_dense_from_m(int64_t m) {
  if ((m < 1 && m != -1) || m > 0x7fffffff) {
    throw std::invalid_argument("_mixed_set_dense_from_m: m must be >= 1, or -1 for the default (" +
                                std::to_string(kDefaultDenseFromM) +
                                ", never with the wgmma kernel); got " + std::to_string(m));
  }
  return set_mixed_dense_from_m(int(m));
}

}  // namespace

void bind_gemm(py::module_& m) {
  m.def("_mixed_set_dense_from_m", &mixed_set_dense_from_m, py::arg("m"),
        "Rows of A from which the CUDA mixed_gemm dequantizes the weight and runs a dense GEMM "
        "instead of the fused kernel (process-wide; -1 the default); returns the previous "
        "setting.");
  m.def("_mixed_dense_from_m", &mixed_dense_from_m,
        "Rows of A from which the CUDA mixed_gemm takes the dense path now (the override or the "
        "default for the kernel this device runs).");
  m.def("_mixed_plan", &mixed_plan, py::arg("m"), py::arg("n"), py::arg("k"), py::arg("bits"),
        py::arg("group_size"), py::arg("bf16") = false,
        "What a mixed_gemm launch of that problem runs on the current device now: a dict of "
        "kernel ('mma', 'wgmma' or 'decode'), tile_m, m_tiles, fine_groups, exact_scales, "
        "splits, reduce (0 none, 1 workspace + second kernel, 2 cluster), warps and col_warps "
        "(the decode kernel's warps per CTA and per k group, 0 for the others), warp_groups "
        "(the wgmma kernel's warpgroups per CTA, 0 for the others).");
  m.def("_mixed_set_kernel", &mixed_set_kernel, py::arg("kernel"),
        "Forces the mixed GEMM's kernel: 0 mma.sync, 1 wgmma (where usable), 2 decode (M <= 8), "
        "-1 the default "
        "(process-wide); returns the previous setting. Prefer "
        "cute_gemm.ops._forced_mixed_kernel().");
  m.def("_mixed_wgmma_usable", &mixed_wgmma_usable_now,
        "Whether this build has the sm_90a wgmma kernels and the current device runs them.");
  m.def("_mixed_set_split", &mixed_set_split, py::arg("splits"), py::arg("reduce") = -1,
        "Forces the mixed GEMM's split count (1..64) and/or reduction (1 workspace, 2 cluster); "
        "-1 restores the heuristic. Prefer cute_gemm.ops._forced_mixed_split().");
  m.def("_mixed_set_decode_shape", &mixed_set_decode_shape, py::arg("warps"),
        py::arg("col_warps") = -1,
        "Forces the decode kernel's warps per CTA (1..16, rounded down to whole k groups that "
        "fit) and/or warps per k group (1, 2 or 4); -1 restores the heuristic. Returns the "
        "previous (warps, col_warps). Prefer cute_gemm.ops._forced_decode_shape().");
  m.def("_mixed_set_wgmma_tile", &mixed_set_wgmma_tile, py::arg("tile_m"),
        "Forces the wgmma kernel's token tile (32, 64, 128 or 256 rows of A per CTA); -1 restores "
        "the heuristic. Returns the previous setting. Prefer cute_gemm.ops._forced_wgmma_tile().");
  m.def("_mixed_get_split", &mixed_get_split, "The mixed GEMM's split override (splits, reduce).");
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
