// Python bindings of the packed weight format's rulebook: cute_gemm._C.weight_format, read by
// cute_gemm/weight_format.py (and through it by every Python check, loader, pack and unpack).
//
// Everything is read off kernels/mixed/weight_format.hpp, the header the kernels and the op are
// compiled with: the valid sets, effective_group_size, the K/N rules, block_k, the packed shape,
// the format's block and TV layouts (as cute_gemm.layout.Layout) and the views/permutation that
// pack and unpack with. Functions that take `bits` raise ValueError for a width the format lacks
// (the header's block_k would silently answer 64).
//
// Deliberately pybind11-only (no torch/extension.h), as layout_bindings.cpp.

#include "bindings/format_bindings.hpp"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cute_gemm/dyn_layout.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace py = pybind11;

namespace cute_gemm {
namespace {

int checked_bits(int64_t bits, char const* fn) {
  if (!mixed::valid_bits(bits)) {
    throw std::invalid_argument(std::string(fn) + ": bits must be " + mixed::kValidBitsText +
                                "; got bits=" + std::to_string(bits));
  }
  return int(bits);
}

template <size_t N>
py::tuple as_tuple(int const (&values)[N]) {
  py::tuple t(N);
  for (size_t i = 0; i < N; ++i) t[i] = values[i];
  return t;
}

template <class T>
py::tuple as_tuple(T const* values, int n) {
  py::tuple t(n);
  for (int i = 0; i < n; ++i) t[i] = values[i];
  return t;
}

}  // namespace

void bind_weight_format(py::module_& m) {
  m.doc() = "The packed weight format's rulebook (kernels/mixed/weight_format.hpp).";
  m.attr("VALID_BITS") = as_tuple(mixed::kValidBits);
  m.attr("VALID_BITS_TEXT") = std::string(mixed::kValidBitsText);
  m.attr("VALID_GROUP_SIZES") = as_tuple(mixed::kValidGroupSizes);
  m.attr("VALID_GROUP_SIZES_TEXT") = std::string(mixed::kValidGroupSizesText);
  m.attr("PER_CHANNEL") = mixed::kPerChannel;
  m.attr("PER_CHANNEL_K_MULTIPLE") = mixed::kPerChannelKMultiple;
  m.attr("BLOCK_N") = mixed::kBlockN;
  m.attr("LANES") = mixed::kLanes;
  m.attr("WORDS_PER_LANE") = mixed::kWordsPerLane;

  m.def("valid_bits", [](int64_t bits) { return mixed::valid_bits(bits); }, py::arg("bits"),
        "Whether the format has this bit width (VALID_BITS).");
  m.def("valid_group_size", [](int64_t g) { return mixed::valid_group_size(g); },
        py::arg("group_size"), "Whether the format has this group size (VALID_GROUP_SIZES).");
  m.def("effective_group_size",
        [](int64_t g, int64_t k) { return mixed::effective_group_size<int64_t>(g, k); },
        py::arg("group_size"), py::arg("k"),
        "G as the kernels index the scales: group_size, or K for per-channel (-1).");
  m.def("k_multiple", [](int64_t g) { return mixed::k_multiple(g); }, py::arg("group_size"),
        "What K must be a multiple of: group_size, or PER_CHANNEL_K_MULTIPLE for per-channel.");
  m.def("valid_k", [](int64_t k, int64_t g) { return mixed::valid_k(k, g); }, py::arg("k"),
        py::arg("group_size"), "K >= 1 and a multiple of k_multiple(group_size).");
  m.def("valid_n", [](int64_t n) { return mixed::valid_n(n); }, py::arg("n"),
        "N >= 0 and a multiple of BLOCK_N.");
  m.def("block_k", [](int64_t bits) { return mixed::block_k(checked_bits(bits, "block_k")); },
        py::arg("bits"), "K per packed block: 128 for INT4, 64 for INT8.");
  m.def("fields_per_word",
        [](int64_t bits) { return 32 / checked_bits(bits, "fields_per_word"); }, py::arg("bits"),
        "Bit fields (nibbles or bytes) per int32 word: 32 / bits.");
  m.def("k_blocks",
        [](int64_t k, int64_t bits) { return mixed::k_blocks(k, checked_bits(bits, "k_blocks")); },
        py::arg("k"), py::arg("bits"), "Packed k blocks of a K: ceil(K / block_k(bits)).");
  m.def("packed_shape",
        [](int64_t n, int64_t k, int64_t bits) {
          int const b = checked_bits(bits, "packed_shape");
          mixed::PackedShape const s = mixed::packed_shape(n, k, b);
          return py::make_tuple(s.n_blocks, s.k_blocks, s.lanes, s.words);
        },
        py::arg("n"), py::arg("k"), py::arg("bits"),
        "The packed int32 tensor's shape for an [n, k] weight: (n/8, ceil(k/bk), 32, 4).");
  m.def("block_layout",
        [](int64_t bits) { return mixed::packed_block_layout(checked_bits(bits, "block_layout")); },
        py::arg("bits"), R"doc(
PackedFormat<bits>::BlockLayout: (n, k) in one packed 8 x block_k block -> the index of its bit
field (nibble or byte) in the block's 512 bytes. INT4 (8,(2,4,2,2,4)):(128,(4,32,1,2,8)),
INT8 (8,(2,4,2,4)):(64,(2,16,1,4)).)doc");
  m.def("tv_layout",
        [](int64_t bits) {
          return checked_bits(bits, "tv_layout") == 4 ? to_dyn(mixed::PackedFormat<4>::TV{})
                                                       : to_dyn(mixed::PackedFormat<8>::TV{});
        },
        py::arg("bits"), R"doc(
PackedFormat<bits>::TV: (lane, value) -> n + 8 k in the 8 x block_k block; value = the lane's
fields in memory order (field + fields_per_word * word).)doc");
  m.def("packed_views",
        [](int64_t bits) {
          mixed::PackedViews const v = mixed::packed_views(checked_bits(bits, "packed_views"));
          py::dict d;
          d["fields"] = as_tuple(v.fields, v.rank);
          d["q"] = as_tuple(v.q, v.rank);
          d["kb_dim"] = v.kb_dim;
          d["q_from_fields"] = as_tuple(v.q_from_fields, v.rank);
          d["fields_from_q"] = as_tuple(v.fields_from_q, v.rank);
          return d;
        },
        py::arg("bits"), R"doc(
The views that move between q[N, Kp] and the packed fields (weight_format.hpp's PackedViews):
{'fields': [nb, kb, leaf extents by decreasing stride], 'q': [nb, n leaves, kb, k leaves] (each
slowest first), 'kb_dim': kb's dim in 'q', 'q_from_fields', 'fields_from_q': the permutations
between them}. nb and kb are 0 (run-time sizes, the caller's).)doc");
}

}  // namespace cute_gemm
