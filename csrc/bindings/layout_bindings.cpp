// Python bindings of the layout core: cute_gemm._C.layout (re-exported as cute_gemm.layout).
//
// Layout, Swizzle and ComposedLayout are the core's own DynLayout, DynSwizzle and
// DynComposedLayout; every function here converts Python values, calls the core and converts back,
// so Python and C++ cannot disagree about what a layout means.
//
// Python values: a shape, stride or coordinate is an int or a nested tuple/list of ints (any object
// with __index__, e.g. numpy integers; bool and float are rejected), with `_` allowed where a
// coordinate may slice. Errors: bad Python types -> TypeError naming the function and argument;
// the core's std::invalid_argument -> ValueError, std::out_of_range -> IndexError (pybind11's
// standard translation).
//
// Deliberately pybind11-only (no torch/extension.h): this file is compiled often and stays fast.

#include "bindings/layout_bindings.hpp"

#include "bindings/atom_layouts.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cute_gemm/dyn_layout.hpp"
#include "cute_gemm/dyn_layout_algebra.hpp"
#include "cute_gemm/layout_draw.hpp"
#include "cute_gemm/layout_parse.hpp"
#include "cute_gemm/layout_print.hpp"
#include "cute_gemm/swizzle.hpp"
#include "cute_gemm/tv_layout.hpp"

namespace py = pybind11;

namespace cute_gemm {
namespace {

// The slicing wildcard. One instance, exported as `_`.
struct Underscore {};

// Python lists longer than this are almost certainly a mistake (and would exhaust memory).
constexpr int64_t kMaxListLength = int64_t(1) << 28;

// "float (1.5)": the type and a short repr of an offending argument, for TypeError messages.
std::string describe(py::handle h) {
  std::string r = py::repr(h).cast<std::string>();
  if (r.size() > 40) r = r.substr(0, 37) + "...";
  return std::string(Py_TYPE(h.ptr())->tp_name) + " (" + r + ")";
}

[[noreturn]] void type_error(std::string const& fn, std::string const& arg,
                             std::string const& expected, py::handle got) {
  throw py::type_error(fn + ": " + arg + " must be " + expected + ", got " + describe(got));
}

// What the caller passes for messages: which function, which argument, whether `_` is allowed.
struct ArgInfo {
  std::string fn;
  std::string arg;
  bool allow_underscore = false;

  std::string expected() const {
    return allow_underscore ? "an int, `_` or a nested tuple of these"
                            : "an int or a nested tuple of ints";
  }
};

// Reads an int-like Python value (anything with __index__ except bool) into `out`; false when h
// is not int-like (the caller decides whether that is an error).
bool as_int64(py::handle h, ArgInfo const& info, int64_t& out) {
  if (PyBool_Check(h.ptr()) || !PyIndex_Check(h.ptr())) return false;
  py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!idx) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  if (overflow != 0) {
    throw std::invalid_argument(info.fn + ": " + info.arg + " value " +
                                py::repr(h).cast<std::string>() + " does not fit in 64 bits");
  }
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  out = v;
  return true;
}

// Appends the preorder nodes of a Python int tuple to `out`. Each tuple node is pushed before its
// children, so an over-deep or self-referential list hits the 64-node capacity (ValueError) long
// before the C stack could run out.
void append_nodes(py::handle h, DynTuple& out, ArgInfo const& info) {
  int64_t v = 0;
  if (as_int64(h, info, v)) {
    out.push_node(DynTuple::kLeaf, v);
    return;
  }
  if (info.allow_underscore && py::isinstance<Underscore>(h)) {
    out.push_node(DynTuple::kUnderscore, 0);
    return;
  }
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    const int node = out.n;
    out.push_node(0, 0);
    for (py::handle child : py::reinterpret_borrow<py::sequence>(h)) {
      append_nodes(child, out, info);
      out.kind[node] += 1;
    }
    return;
  }
  type_error(info.fn, info.arg, info.expected(), h);
}

DynTuple to_dyn_tuple(py::handle h, ArgInfo const& info) {
  DynTuple t;
  append_nodes(h, t, info);
  return t;
}

py::object underscore_object();

// The subtree at `node` as a Python int (leaf), `_`, or nested tuple.
py::object to_python(DynTuple const& t, int node = 0) {
  if (t.kind[node] == DynTuple::kLeaf) return py::int_(t.value[node]);
  if (t.kind[node] == DynTuple::kUnderscore) return underscore_object();
  py::tuple out(t.kind[node]);
  int c = node + 1;
  for (int k = 0; k < t.kind[node]; ++k) {
    out[k] = to_python(t, c);
    c = subtree_end(t, c);
  }
  return std::move(out);
}

// Sizes and offsets are int64 inside the core; refuse layouts whose size or cosize does not fit
// instead of returning wrapped-around numbers. Every Layout object passes this (or is a result of
// the core's algebra, which checks its results the same way), so evaluating one cannot overflow.
DynLayout checked_layout(DynLayout const& l) {
  const LayoutRange r = layout_range(l);
  if (r != LayoutRange::kFits) {
    throw std::invalid_argument("Layout " + to_string(l) + " is too large: its " +
                                (r == LayoutRange::kSizeOverflows ? "size" : "cosize") +
                                " exceeds 2^63 - 1");
  }
  return l;
}

// Runs a core call; when the core refuses it (std::invalid_argument: an int64 overflow, a
// non-injective layout, a divisibility condition), re-raises the ValueError with the Python
// function's name in front (unless the core's message starts with it already) and the operands
// behind, so that an overflow deep inside, say, a complement says which call it came from:
//   "logical_product: size(A) * cosize(B) = 2^33 * (2^31+1) overflows int64 for A=... and B=..."
// `operands` is formatted only on failure: printing layouts costs more than most calls.
template <class Call, class Operands>
auto with_operands(std::string const& fn, Operands const& operands, Call const& call)
    -> decltype(call()) {
  try {
    return call();
  } catch (std::invalid_argument const& e) {
    std::string msg = e.what();
    if (msg.compare(0, fn.size() + 1, fn + ":") != 0) msg = fn + ": " + msg;
    throw std::invalid_argument(msg + " for " + operands());
  }
}

std::string named(char const* name, DynLayout const& l) { return name + ("=" + to_string(l)); }

DynLayout layout_from_python(py::handle shape, py::handle stride) {
  if (py::isinstance<py::str>(shape)) {
    if (!stride.is_none()) {
      throw py::type_error(
          "Layout: stride must be None when the layout is given as a string, got " +
          describe(stride));
    }
    return checked_layout(parse_layout(shape.cast<std::string>()));
  }
  if (py::isinstance<DynLayout>(shape) && stride.is_none()) return shape.cast<DynLayout>();
  const DynTuple s = to_dyn_tuple(shape, {"Layout", "shape", false});
  if (stride.is_none()) return checked_layout(make_dyn_layout(s));
  const DynTuple d = to_dyn_tuple(stride, {"Layout", "stride", false});
  return checked_layout(make_dyn_layout(s, d));
}

// A Layout argument; with allow_int an int n stands for the layout n:1.
DynLayout layout_arg(py::handle h, std::string const& fn, std::string const& arg,
                     bool allow_int = true) {
  if (py::isinstance<DynLayout>(h)) return h.cast<DynLayout>();
  int64_t n = 0;
  if (allow_int && as_int64(h, {fn, arg, false}, n)) return make_dyn_layout(n, 1);
  type_error(fn, arg, allow_int ? "a Layout or an int" : "a Layout", h);
}

// A tiler: a single Layout (or int n = n:1), or a tuple/list of them applied mode by mode, which
// the core takes as a DynLayout whose top-level modes are the tiler's layouts.
struct Tiler {
  bool by_mode = false;
  DynLayout layout;
};

Tiler tiler_arg(py::handle h, std::string const& fn, std::string const& arg) {
  Tiler t;
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    t.by_mode = true;
    t.layout = make_dyn_layout_empty();
    for (py::handle e : py::reinterpret_borrow<py::sequence>(h)) {
      if (!py::isinstance<DynLayout>(e) && (PyBool_Check(e.ptr()) || !PyIndex_Check(e.ptr()))) {
        type_error(fn, arg + " (a by-mode tiler)", "a tuple of Layouts and ints", e);
      }
      t.layout = append(t.layout, layout_arg(e, fn, arg));
    }
    return t;
  }
  if (!py::isinstance<DynLayout>(h) && (PyBool_Check(h.ptr()) || !PyIndex_Check(h.ptr()))) {
    type_error(fn, arg, "a Layout, an int, or a tuple of these (a by-mode tiler)", h);
  }
  t.layout = layout_arg(h, fn, arg);
  return t;
}

// A tiler as the user wrote it: a layout, or "(2:1, 3:1)" for a by-mode tuple.
std::string tiler_string(Tiler const& t) {
  if (!t.by_mode) return to_string(t.layout);
  std::string r = "(";
  for (int i = 0; i < rank(t.layout); ++i) r += (i ? ", " : "") + to_string(mode(t.layout, i));
  return r + ")";
}

// A single-layout tiler as a tiler of one mode (zipped/tiled divide take by-mode tilers).
DynLayout as_one_mode(DynLayout const& l) {
  return l.shape.is_tuple() ? l : append(make_dyn_layout_empty(), l);
}

int64_t int_arg(py::handle h, std::string const& fn, std::string const& arg) {
  int64_t v = 0;
  if (!as_int64(h, {fn, arg, false}, v)) type_error(fn, arg, "an int", h);
  return v;
}

int mode_index(int64_t i, int r) {
  // Python-style negative indices; the core's range check reports the rest (IndexError).
  if (i < 0) i += r;
  if (i < 0 || i >= r) {
    throw std::out_of_range("mode index " + std::to_string(i < 0 ? i - r : i) +
                            " out of range for a layout of rank " + std::to_string(r));
  }
  return static_cast<int>(i);
}

void check_list_size(int64_t n, std::string const& fn) {
  if (n > kMaxListLength) {
    throw std::invalid_argument(fn + ": " + std::to_string(n) +
                                " offsets are too many for a Python list");
  }
}

// The coordinate of a call L(i), L(i, j, ...) or L((i, (j, k))).
DynTuple call_coordinate(py::args const& args, std::string const& fn) {
  if (args.size() == 0) {
    throw py::type_error(fn + ": expected an index or a coordinate, got no arguments");
  }
  ArgInfo info{fn, "coordinate", true};
  return args.size() == 1 ? to_dyn_tuple(args[0], info) : to_dyn_tuple(args, info);
}

void check_coordinate(DynTuple const& crd, DynLayout const& l, std::string const& fn) {
  if (crd.is_leaf() || crd.is_underscore() || weakly_congruent(crd, l.shape)) return;
  throw std::invalid_argument(fn + ": coordinate " + to_string(crd) +
                              " does not match the shape " + to_string(l.shape) +
                              " (its rank or nesting differs)");
}

// L(crd): an offset, or for a coordinate with `_` the offsets of the slice (fixed offset included)
// in the slice's own 1-D order. `map` post-processes each offset (the swizzle of a ComposedLayout).
py::object evaluate(DynLayout const& l, DynTuple const& crd, std::string const& fn,
                    std::function<int64_t(int64_t)> const& map) {
  check_coordinate(crd, l, fn);
  if (!has_underscore(crd)) return py::int_(map(crd.is_leaf() ? l(crd.leaf_value()) : l(crd)));
  const DynSlice s = slice_and_offset(crd, l);
  const int64_t n = size(s.layout);
  check_list_size(n, fn);
  py::list out(n);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = py::int_(map(checked_add(s.offset, s.layout(i),
                                      "the slice's offset overflows int64 ({a} + {b})")));
  }
  return std::move(out);
}

py::list offsets_of(std::function<int64_t(int64_t)> const& f, int64_t n, std::string const& fn) {
  check_list_size(n, fn);
  py::list out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = py::int_(f(i));
  return out;
}

std::string layout_repr(DynLayout const& l) { return "Layout('" + to_string(l) + "')"; }
std::string swizzle_repr(DynSwizzle const& s) {
  return "Swizzle(" + std::to_string(s.bits) + ", " + std::to_string(s.base) + ", " +
         std::to_string(s.shift) + ")";
}
std::string composed_repr(DynComposedLayout const& c) {
  return "ComposedLayout(" + swizzle_repr(c.swizzle) + ", " + std::to_string(c.offset) + ", " +
         layout_repr(c.layout) + ")";
}

bool same_swizzle(DynSwizzle const& a, DynSwizzle const& b) {
  return a.bits == b.bits && a.base == b.base && a.shift == b.shift;
}

// A ComposedLayout evaluates swizzle(offset + L(c)) (DynComposedLayout, swizzle.hpp): refuse one
// whose offset plus the layout's lowest or highest offset leaves int64, so no evaluation, table or
// picture of it can wrap. The extremes are the sums of the negative and of the positive
// (s-1)*d, each within cosize(L) - 1, which fits.
DynComposedLayout checked_composed(DynComposedLayout const& c, std::string const& fn) {
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < c.layout.shape.n; ++i) {
    if (c.layout.shape.kind[i] != DynTuple::kLeaf) continue;
    const int64_t reach = (c.layout.shape.value[i] - 1) * c.layout.stride.value[i];
    (reach < 0 ? lo : hi) += reach;
  }
  if (add_overflows(c.offset, lo) || add_overflows(c.offset, hi)) {
    throw std::invalid_argument(fn + ": offset " + std::to_string(c.offset) +
                                " plus the layout's offsets [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "] overflows int64 for layout=" +
                                to_string(c.layout));
  }
  return c;
}

// The one `_`. Deliberately leaked (one reference held forever): a static py::object would be
// destroyed after the interpreter is finalized.
py::handle g_underscore;
py::object underscore_object() { return py::reinterpret_borrow<py::object>(g_underscore); }

// size / rank / depth accept a Layout, a ComposedLayout (its layout's) or an int tuple.
template <class OnLayout, class OnTuple>
auto layout_or_tuple(py::handle h, char const* fn, OnLayout on_layout, OnTuple on_tuple) {
  if (py::isinstance<DynLayout>(h)) return on_layout(h.cast<DynLayout>());
  if (py::isinstance<DynComposedLayout>(h)) return on_layout(h.cast<DynComposedLayout>().layout);
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr()) ||
      (!PyBool_Check(h.ptr()) && PyIndex_Check(h.ptr()))) {
    return on_tuple(to_dyn_tuple(h, {fn, "argument", false}));
  }
  type_error(fn, "the argument", "a Layout, a ComposedLayout or an int tuple", h);
}

std::pair<int64_t, int64_t> tile_arg(py::handle h, std::string const& fn) {
  const DynTuple t = to_dyn_tuple(h, {fn, "tile", false});
  if (!(t.is_tuple() && rank(t) == 2 && depth(t) == 1)) {
    throw py::type_error(fn + ": tile must be a pair of ints (M, N), got " + describe(h));
  }
  return {leaf_at(t, 0), leaf_at(t, 1)};
}

// ---- thread-value layouts (tv_layout.hpp)

// A (thread, value) layout argument: a Layout of rank 2.
DynLayout tv_arg(py::handle h, std::string const& fn, std::string const& arg) {
  const DynLayout l = layout_arg(h, fn, arg, false);
  if (rank(l) != 2 || !l.shape.is_tuple()) {
    throw std::invalid_argument(fn + ": " + arg + " must be a (thread, value) layout of rank 2, "
                                "got " + to_string(l));
  }
  return l;
}

int64_t positive_arg(py::handle h, std::string const& fn, std::string const& arg) {
  const int64_t v = int_arg(h, fn, arg);
  if (v < 1) {
    throw std::invalid_argument(fn + ": " + arg + " must be at least 1, got " + std::to_string(v));
  }
  return v;
}

// A pair (x, y) of Python objects (tuple or list of two).
std::pair<py::object, py::object> pair_arg(py::handle h, std::string const& fn,
                                           std::string const& arg, std::string const& what) {
  if ((PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) && py::len(h) == 2) {
    py::sequence s = py::reinterpret_borrow<py::sequence>(h);
    return {s[0], s[1]};
  }
  type_error(fn, arg, what, h);
}

MmaOperand operand_arg(py::handle h, std::string const& fn) {
  if (py::isinstance<py::str>(h)) {
    const std::string s = h.cast<std::string>();
    if (s == "A" || s == "a") return MmaOperand::kA;
    if (s == "B" || s == "b") return MmaOperand::kB;
    if (s == "C" || s == "c") return MmaOperand::kC;
    throw std::invalid_argument(fn + ": operand must be 'A', 'B' or 'C', got '" + s + "'");
  }
  type_error(fn, "operand", "'A', 'B' or 'C'", h);
}

py::dict config_layouts_dict(GemmConfigLayouts const& c) {
  py::dict d;
  d["name"] = c.name;
  d["bm"] = c.bm;
  d["bn"] = c.bn;
  d["bk"] = c.bk;
  d["stages"] = c.stages;
  d["warps_m"] = c.warps_m;
  d["warps_n"] = c.warps_n;
  d["threads"] = c.threads;
  d["mma_a_tv"] = c.mma_a_tv;
  d["mma_b_tv"] = c.mma_b_tv;
  d["mma_c_tv"] = c.mma_c_tv;
  d["ldsm_a_src_tv"] = c.ldsm_a_src_tv;
  d["ldsm_b_src_tv"] = c.ldsm_b_src_tv;
  d["g2s_tv"] = c.g2s_tv;
  d["s2g_tv"] = c.s2g_tv;
  d["g2s_tile"] = py::make_tuple(c.g2s_tile_r, c.g2s_tile_s);
  d["s2g_tile"] = py::make_tuple(c.s2g_tile_r, c.s2g_tile_s);
  d["smem_a"] = c.smem_a;
  d["smem_b"] = c.smem_b;
  d["smem_c"] = c.smem_c;
  return d;
}

}  // namespace

void bind_layout(py::module_& m) {
  m.doc() = "CuTe-style layout algebra: Layout, Swizzle, ComposedLayout and the algebra on them.";

  // ---------------------------------------------------------------------------------------------
  // `_`
  py::class_<Underscore>(m, "Underscore", "The slicing wildcard; use the module's `_` object.")
      .def("__repr__", [](Underscore const&) { return "_"; })
      .def("__eq__", [](Underscore const&, py::object o) { return py::isinstance<Underscore>(o); })
      .def("__hash__", [](Underscore const&) { return 0x5f; });
  g_underscore = py::cast(Underscore{}).release();
  m.attr("_") = underscore_object();

  // ---------------------------------------------------------------------------------------------
  // Layout
  py::class_<DynLayout> layout(m, "Layout", R"doc(
A layout: a shape and a congruent stride, a function from coordinates to offsets.

Layout(shape, stride=None)   shape/stride: int or nested tuple of ints; no stride = column-major
Layout("(8,(2,2)):(2,(1,16))")   parses CuTe's text form ("shape" alone is column-major)

L(i) maps a 1-D index, L(i, j) or L((i, (j, k))) a coordinate; with `_` in the coordinate it
returns the list of offsets of the slice, e.g. L(3, _).)doc");
  layout
      .def(py::init([](py::object shape, py::object stride) {
             return layout_from_python(shape, stride);
           }),
           py::arg("shape"), py::arg("stride") = py::none())
      .def_property_readonly("shape", [](DynLayout const& l) { return to_python(l.shape); })
      .def_property_readonly("stride", [](DynLayout const& l) { return to_python(l.stride); })
      .def("size", [](DynLayout const& l) { return size(l); })
      .def("cosize", [](DynLayout const& l) { return cosize(l); })
      .def("rank", [](DynLayout const& l) { return rank(l); })
      .def("depth", [](DynLayout const& l) { return depth(l); })
      .def("__call__",
           [](DynLayout const& l, py::args args) {
             const DynTuple crd = call_coordinate(args, "Layout.__call__");
             return with_operands(
                 "Layout.__call__",
                 [&] { return named("L", l) + " at " + to_string(crd); },
                 [&] { return evaluate(l, crd, "Layout.__call__", [](int64_t x) { return x; }); });
           })
      .def("__getitem__",
           [](DynLayout const& l, py::object i) {
             return mode(l, mode_index(int_arg(i, "Layout.__getitem__", "mode index"), rank(l)));
           })
      .def("offsets",
           [](DynLayout const& l) {
             return offsets_of([&](int64_t i) { return l(i); }, size(l), "Layout.offsets");
           },
           "[L(0), L(1), ..., L(size - 1)]")
      .def("__str__", [](DynLayout const& l) { return to_string(l); })
      .def("__repr__", &layout_repr)
      .def("__eq__",
           [](DynLayout const& a, py::object b) -> py::object {
             if (!py::isinstance<DynLayout>(b)) return py::reinterpret_borrow<py::object>(
                 Py_NotImplemented);
             return py::bool_(a == b.cast<DynLayout>());
           })
      .def("__hash__", [](DynLayout const& l) { return std::hash<std::string>()(to_string(l)); })
      .def(py::pickle([](DynLayout const& l) { return py::make_tuple(to_string(l)); },
                      [](py::tuple t) {
                        return checked_layout(parse_layout(t[0].cast<std::string>()));
                      }));
  // A Layout has both a size and a rank; iterating it would have to pick one, so it does not.
  layout.attr("__iter__") = py::none();

  // ---------------------------------------------------------------------------------------------
  // Swizzle, ComposedLayout
  py::class_<DynSwizzle>(m, "Swizzle", R"doc(
Swizzle(bits, base, shift): x -> x ^ ((x & yyy) >> shift), yyy = bits [base+shift, base+shift+bits).
Swizzle(3, 3, 3) over half-precision offsets keeps 8-element (16-byte) units together and XORs
the row phase into the unit index, spreading an ldmatrix's 8 rows over 8 bank groups.)doc")
      .def(py::init([](py::object b, py::object mm, py::object s) {
             const int64_t bb = int_arg(b, "Swizzle", "bits");
             const int64_t mb = int_arg(mm, "Swizzle", "base");
             const int64_t sb = int_arg(s, "Swizzle", "shift");
             CG_REQUIRE(bb >= -64 && bb <= 64 && mb >= -64 && mb <= 64 && sb >= -64 && sb <= 64,
                        "Swizzle: parameters out of range ({a}, {b}, ...)", bb, mb);
             return make_dyn_swizzle(int(bb), int(mb), int(sb));
           }),
           py::arg("bits"), py::arg("base"), py::arg("shift"))
      .def_readonly("bits", &DynSwizzle::bits)
      .def_readonly("base", &DynSwizzle::base)
      .def_readonly("shift", &DynSwizzle::shift)
      .def("__call__",
           [](DynSwizzle const& s, py::object x) { return s(int_arg(x, "Swizzle", "offset")); })
      .def("__str__", [](DynSwizzle const& s) { return to_string(s); })
      .def("__repr__", &swizzle_repr)
      .def("__eq__",
           [](DynSwizzle const& a, py::object b) -> py::object {
             if (!py::isinstance<DynSwizzle>(b)) return py::reinterpret_borrow<py::object>(
                 Py_NotImplemented);
             return py::bool_(same_swizzle(a, b.cast<DynSwizzle>()));
           })
      .def("__hash__", [](DynSwizzle const& s) {
        return std::hash<std::string>()(to_string(s));
      });

  py::class_<DynComposedLayout>(m, "ComposedLayout", R"doc(
swizzle o (offset + layout): what composition(Swizzle, Layout) returns (a swizzled smem layout).
Callable like a Layout (index, coordinate, or a coordinate with `_`); offsets() lists all.)doc")
      .def(py::init([](DynSwizzle const& s, py::object offset, DynLayout const& l) {
             return checked_composed(
                 DynComposedLayout{s, int_arg(offset, "ComposedLayout", "offset"), l},
                 "ComposedLayout");
           }),
           py::arg("swizzle"), py::arg("offset"), py::arg("layout"))
      .def_readonly("swizzle", &DynComposedLayout::swizzle)
      .def_readonly("offset", &DynComposedLayout::offset)
      .def_readonly("layout", &DynComposedLayout::layout)
      .def_property_readonly("shape",
                             [](DynComposedLayout const& c) { return to_python(c.layout.shape); })
      .def("size", [](DynComposedLayout const& c) { return size(c.layout); })
      .def("rank", [](DynComposedLayout const& c) { return rank(c.layout); })
      .def("depth", [](DynComposedLayout const& c) { return depth(c.layout); })
      .def("__call__",
           [](DynComposedLayout const& c, py::args args) {
             const DynTuple crd = call_coordinate(args, "ComposedLayout.__call__");
             return with_operands(
                 "ComposedLayout.__call__",
                 [&] { return "CL=" + to_string(c) + " at " + to_string(crd); },
                 [&] {
                   return evaluate(c.layout, crd, "ComposedLayout.__call__", [&](int64_t x) {
                     return c.swizzle(checked_add(c.offset, x, "offset {a} + {b} overflows int64"));
                   });
                 });
           })
      .def("offsets",
           [](DynComposedLayout const& c) {
             return offsets_of(
                 [&](int64_t i) {
                   return c.swizzle(checked_add(c.offset, c.layout(i),
                                                "ComposedLayout.offsets: offset {a} + {b} "
                                                "overflows int64"));
                 },
                 size(c.layout), "ComposedLayout.offsets");
           })
      .def("__str__", [](DynComposedLayout const& c) { return to_string(c); })
      .def("__repr__", &composed_repr)
      .def("__eq__",
           [](DynComposedLayout const& a, py::object o) -> py::object {
             if (!py::isinstance<DynComposedLayout>(o)) return py::reinterpret_borrow<py::object>(
                 Py_NotImplemented);
             const DynComposedLayout b = o.cast<DynComposedLayout>();
             return py::bool_(same_swizzle(a.swizzle, b.swizzle) && a.offset == b.offset &&
                              a.layout == b.layout);
           })
      .def("__hash__", [](DynComposedLayout const& c) {
        return std::hash<std::string>()(to_string(c));
      });
  // Same reason as Layout: size or rank would both be plausible meanings of iteration.
  m.attr("ComposedLayout").attr("__iter__") = py::none();

  // ---------------------------------------------------------------------------------------------
  // Queries and construction
  m.def("size",
        [](py::object x) {
          return layout_or_tuple(x, "size", [](DynLayout const& l) { return size(l); },
                                 [](DynTuple const& t) {
                                   return with_operands(
                                       "size", [&] { return "shape=" + to_string(t); },
                                       [&] { return product(t); });
                                 });
        },
        "Number of elements of a layout's domain (or the product of an int tuple).");
  m.def("rank",
        [](py::object x) {
          return layout_or_tuple(x, "rank", [](DynLayout const& l) { return rank(l); },
                                 [](DynTuple const& t) { return rank(t); });
        },
        "Number of top-level modes.");
  m.def("depth",
        [](py::object x) {
          return layout_or_tuple(x, "depth", [](DynLayout const& l) { return depth(l); },
                                 [](DynTuple const& t) { return depth(t); });
        },
        "Nesting depth: 0 for an integral shape.");
  m.def("cosize",
        [](py::object l) { return cosize(layout_arg(l, "cosize", "the argument", false)); },
        "One past the largest offset: 1 + sum (s - 1) * |d|.");
  m.def("mode",
        [](py::object l, py::object i) {
          const DynLayout a = layout_arg(l, "mode", "layout", false);
          return mode(a, mode_index(int_arg(i, "mode", "i"), rank(a)));
        },
        py::arg("layout"), py::arg("i"), "Mode i of a layout, as a Layout.");
  m.def("make_layout",
        [](py::args args) {
          bool all_layouts = true, any_layout = false;
          for (py::handle a : args) {
            const bool is = py::isinstance<DynLayout>(a);
            all_layouts = all_layouts && is;
            any_layout = any_layout || is;
          }
          if (all_layouts && args.size() > 0) {
            if (args.size() == 1) return args[0].cast<DynLayout>();
            DynLayout r = make_dyn_layout_empty();
            for (py::handle a : args) r = append(r, a.cast<DynLayout>());
            return checked_layout(r);
          }
          if (!any_layout && (args.size() == 1 || args.size() == 2)) {
            const py::object stride = args.size() == 2 ? py::object(args[1]) : py::none();
            return layout_from_python(args[0], stride);
          }
          throw py::type_error(
              "make_layout: expected Layouts (concatenated as modes) or (shape[, stride]), got " +
              describe(args));
        },
        "make_layout(L0, L1, ...) concatenates layouts as modes; make_layout(shape[, stride]) is "
        "Layout(shape, stride).");
  m.def("idx2crd",
        [](py::object i, py::object shape) {
          const DynTuple s = to_dyn_tuple(shape, {"idx2crd", "shape", false});
          const int64_t idx = int_arg(i, "idx2crd", "index");
          return to_python(with_operands(
              "idx2crd",
              [&] { return "index=" + std::to_string(idx) + " and shape=" + to_string(s); },
              [&] { return idx2crd(idx, s); }));
        },
        py::arg("index"), py::arg("shape"),
        "The colexicographic coordinate of a 1-D index: idx2crd(17, (8,(2,2))) == (1,(0,1)).");
  m.def("crd2idx",
        [](py::object crd, py::object shape, py::object stride) {
          const DynLayout l = layout_from_python(shape, stride);
          const DynTuple c = to_dyn_tuple(crd, {"crd2idx", "coordinate", false});
          check_coordinate(c, l, "crd2idx");
          return with_operands(
              "crd2idx", [&] { return "crd=" + to_string(c) + " and layout=" + to_string(l); },
              [&] { return crd2idx(c, l.shape, l.stride); });
        },
        py::arg("crd"), py::arg("shape"), py::arg("stride") = py::none(),
        "Inner product of a coordinate with the strides (default: column-major of shape).");
  m.def("slice",
        [](py::object l, py::object crd) {
          const DynLayout a = layout_arg(l, "slice", "layout", false);
          const DynTuple c = to_dyn_tuple(crd, {"slice", "coordinate", true});
          check_coordinate(c, a, "slice");
          return slice_and_offset(c, a).layout;
        },
        py::arg("layout"), py::arg("crd"),
        "The sub-layout of the modes under `_` (without the fixed offset).");
  m.def("slice_and_offset",
        [](py::object l, py::object crd) {
          const DynLayout a = layout_arg(l, "slice_and_offset", "layout", false);
          const DynTuple c = to_dyn_tuple(crd, {"slice_and_offset", "coordinate", true});
          check_coordinate(c, a, "slice_and_offset");
          const DynSlice s = slice_and_offset(c, a);
          return py::make_tuple(s.layout, s.offset);
        },
        py::arg("layout"), py::arg("crd"), "(slice(L, crd), offset of the fixed coordinates).");

  // ---------------------------------------------------------------------------------------------
  // Algebra
  // Each call runs inside with_operands: a refusal of the core (an int64 overflow, a
  // non-injective layout, a divisibility condition) is a ValueError naming the function and the
  // operands.
  auto unary = [&m](char const* fn, DynLayout (*op)(DynLayout const&), char const* doc) {
    m.def(fn,
          [fn, op](py::object l) {
            const DynLayout a = layout_arg(l, fn, "layout");
            return with_operands(fn, [&] { return named("L", a); }, [&] { return op(a); });
          },
          py::arg("layout"), doc);
  };
  unary("coalesce", &coalesce,
        "Same function of the 1-D index with the fewest modes (depth <= 1).");
  unary("coalesce_by_mode", &coalesce_by_mode,
        "coalesce applied to each top-level mode (rank kept).");
  unary("filter", &filter, "Drops stride-0 and size-1 modes and coalesces.");
  m.def("composition",
        [](py::object a, py::object b) -> py::object {
          if (py::isinstance<DynSwizzle>(a)) {
            const DynLayout lb = layout_arg(b, "composition", "B");
            return py::cast(DynComposedLayout{a.cast<DynSwizzle>(), 0, lb});
          }
          const Tiler t = tiler_arg(b, "composition", "B");
          auto compose = [&t](DynLayout const& la) {
            return t.by_mode ? composition_by_mode(la, t.layout) : composition(la, t.layout);
          };
          if (py::isinstance<DynComposedLayout>(a)) {
            DynComposedLayout c = a.cast<DynComposedLayout>();
            c.layout = with_operands(
                "composition", [&] { return "A=" + to_string(c) + " and B=" + tiler_string(t); },
                [&] { return compose(c.layout); });
            // B may reach past the inner layout's offsets: the offset must still fit with them.
            return py::cast(checked_composed(c, "composition"));
          }
          const DynLayout la = layout_arg(a, "composition", "A", false);
          return py::cast(with_operands(
              "composition", [&] { return named("A", la) + " and B=" + tiler_string(t); },
              [&] { return compose(la); }));
        },
        py::arg("A"), py::arg("B"),
        "R(c) = A(B(c)). B: a Layout, an int n (n:1) or a tuple of these (by mode). A may be a "
        "Swizzle (-> ComposedLayout) or a ComposedLayout.");
  m.def("complement",
        [](py::object l, py::object cotarget) {
          const DynLayout a = layout_arg(l, "complement", "layout");
          if (cotarget.is_none()) {
            return with_operands("complement", [&] { return named("layout", a); },
                                 [&] { return complement(a); });
          }
          const DynTuple m = to_dyn_tuple(cotarget, {"complement", "cotarget", false});
          return with_operands(
              "complement",
              [&] { return named("layout", a) + " and cotarget=" + to_string(m); },
              [&] { return complement(a, product(m)); });
        },
        py::arg("layout"), py::arg("cotarget") = py::none(),
        "The ordered layout of the offsets in [0, cotarget) that the layout leaves out.");
  unary("right_inverse", &right_inverse,
        "R with L(R(i)) == i for i < size(R) (defined for every layout; R may be 1:0).");
  unary("left_inverse", &left_inverse,
        "R with R(L(i)) == i for i < size(L). ValueError unless L is injective with non-negative "
        "strides and has a complement.");
  // The divides and products: (A, B) -> a layout, each a core function of two layouts.
  auto binary = [&m](char const* fn, char const* b_name, auto op, char const* doc) {
    m.def(fn,
          [fn, b_name, op](py::object a, py::object b) {
            const DynLayout la = layout_arg(a, fn, "A", false);
            const Tiler t = tiler_arg(b, fn, b_name);
            return with_operands(
                fn,
                [&] { return named("A", la) + " and " + b_name + "=" + tiler_string(t); },
                [&] { return op(la, t); });
          },
          py::arg("A"), py::arg(b_name), doc);
  };
  binary("logical_divide", "B",
         [](DynLayout const& a, Tiler const& t) {
           return t.by_mode ? logical_divide_by_mode(a, t.layout) : logical_divide(a, t.layout);
         },
         "A o (B, complement(B, size(A))), or mode by mode.");
  binary("zipped_divide", "tiler",
         [](DynLayout const& a, Tiler const& t) {
           return zipped_divide_by_mode(a, t.by_mode ? t.layout : as_one_mode(t.layout));
         },
         "((tile modes), (rest modes)).");
  binary("tiled_divide", "tiler",
         [](DynLayout const& a, Tiler const& t) {
           return tiled_divide_by_mode(a, t.by_mode ? t.layout : as_one_mode(t.layout));
         },
         "((tile modes), rest0, rest1, ...).");
  // The products take B as one layout (no by-mode tiler).
  auto product_of = [&m](char const* fn, DynLayout (*op)(DynLayout const&, DynLayout const&),
                         char const* doc) {
    m.def(fn,
          [fn, op](py::object a, py::object b) {
            const DynLayout la = layout_arg(a, fn, "A", false);
            const DynLayout lb = layout_arg(b, fn, "B");
            return with_operands(fn, [&] { return named("A", la) + " and " + named("B", lb); },
                                 [&] { return op(la, lb); });
          },
          py::arg("A"), py::arg("B"), doc);
  };
  product_of("logical_product", &logical_product, "(A, complement(A, size(A)*cosize(B)) o B).");
  product_of("blocked_product", &blocked_product,
             "Mode i = (A_i, B'_i): contiguous copies of A laid out by B.");
  product_of("raked_product", &raked_product,
             "Mode i = (B'_i, A_i): copies of A interleaved across B.");
  m.def("tile_to_shape",
        [](py::object block, py::object shape) {
          const DynLayout b = layout_arg(block, "tile_to_shape", "block", false);
          const DynTuple s = to_dyn_tuple(shape, {"tile_to_shape", "shape", false});
          return with_operands(
              "tile_to_shape", [&] { return named("block", b) + " and shape=" + to_string(s); },
              [&] { return tile_to_shape(b, s); });
        },
        py::arg("block"), py::arg("shape"), "Copies of block arranged to cover shape.");

  // ---------------------------------------------------------------------------------------------
  // Thread-value layouts of tiled MMAs and tiled copies (tv_layout.hpp)
  m.def("tiled_mma_tv",
        [](py::object atom_tv, py::object atom_shape, py::object warps, py::object perm,
           py::object operand) {
          const char* fn = "tiled_mma_tv";
          const DynLayout atom = tv_arg(atom_tv, fn, "atom_tv");
          const auto rs = pair_arg(atom_shape, fn, "atom_shape", "a pair of ints (rows, cols)");
          const auto w = pair_arg(warps, fn, "warps", "a pair of ints (warps_m, warps_n)");
          const auto p = pair_arg(perm, fn, "perm", "a pair (perm_rows, perm_cols) of Layouts "
                                                    "or ints");
          const int64_t ar = positive_arg(rs.first, fn, "atom_shape[0]");
          const int64_t as = positive_arg(rs.second, fn, "atom_shape[1]");
          const int64_t wm = positive_arg(w.first, fn, "warps[0]");
          const int64_t wn = positive_arg(w.second, fn, "warps[1]");
          const DynLayout pr = layout_arg(p.first, fn, "perm[0]");
          const DynLayout ps = layout_arg(p.second, fn, "perm[1]");
          const MmaOperand op = operand_arg(operand, fn);
          return with_operands(
              fn,
              [&] {
                return named("atom_tv", atom) + ", atom_shape=(" + std::to_string(ar) + ", " +
                       std::to_string(as) + "), warps=(" + std::to_string(wm) + ", " +
                       std::to_string(wn) + ") and perm=(" + to_string(pr) + ", " +
                       to_string(ps) + ")";
              },
              [&] {
                // tiled_mma_tv multiplies these before the checked algebra sees them: the
                // largest products it forms are bounded by the three below.
                char const* what = "tiled_mma_tv: {a} * {b} overflows int64";
                checked_mul(checked_mul(ar, wm, what), wn, what);
                checked_mul(checked_mul(as, wn, what), size(pr), what);
                checked_mul(size(pr), cosize(ps), what);
                return tiled_mma_tv(atom, ar, as, wm, wn, pr, ps, op);
              });
        },
        py::arg("atom_tv"), py::arg("atom_shape"), py::arg("warps"), py::arg("perm"),
        py::arg("operand"), R"doc(
TV layout of one operand of a tiled MMA: (thread, value) -> r + R*s over the operand's (R, S) tile.

atom_tv: the atom's (T, V) -> (AR, AS) layout; atom_shape: (AR, AS) (A: (M, K), B: (N, K),
C: (M, N)); warps: (warps_m, warps_n); perm: (perm_rows, perm_cols), Layouts or ints (n = n:1, no
permutation), whose sizes are the tile's; operand: 'A', 'B' or 'C'. Threads (T_atom, WM, WN),
values (V_atom, rep_r, rep_s); for A (B) the WN (WM) mode has stride 0.)doc");
  m.def("tiled_copy_tv",
        [](py::object thr, py::object val) {
          const DynLayout t = layout_arg(thr, "tiled_copy_tv", "thr", false);
          const DynLayout v = layout_arg(val, "tiled_copy_tv", "val", false);
          return with_operands(
              "tiled_copy_tv", [&] { return named("thr", t) + " and " + named("val", v); },
              [&] { return tiled_copy_tv(t, v); });
        },
        py::arg("thr"), py::arg("val"), R"doc(
TV layout of a tiled copy: thr (TR, TS) -> thread id and val (VR, VS) -> value id over the tile's
(rows, cols); the result maps (thread, value) -> r + R*s of the (TR*VR, TS*VS) tile.)doc");
  m.def("tiled_copy_tile",
        [](py::object thr, py::object val) {
          const DynLayout t = layout_arg(thr, "tiled_copy_tile", "thr", false);
          const DynLayout v = layout_arg(val, "tiled_copy_tile", "val", false);
          return to_python(with_operands(
              "tiled_copy_tile", [&] { return named("thr", t) + " and " + named("val", v); },
              [&] {
                // Each tile extent is a mode size of thr times one of val.
                checked_mul(size(t), size(v), "tiled_copy_tile: {a} * {b} overflows int64");
                return tiled_copy_tile(t, v);
              }));
        },
        py::arg("thr"), py::arg("val"), "(rows, cols) of the tile tiled_copy_tv(thr, val) covers.");
  m.def("copy_ref_to_src",
        [](py::object ref, py::object src) {
          const DynLayout r = tv_arg(ref, "copy_ref_to_src", "ref");
          const DynLayout sr = tv_arg(src, "copy_ref_to_src", "src");
          return with_operands(
              "copy_ref_to_src", [&] { return named("ref", r) + " and " + named("src", sr); },
              [&] { return copy_ref_to_src(r, sr); });
        },
        py::arg("ref"), py::arg("src"),
        "right_inverse(ref) o src: a copy atom's source (t, v) -> its reference t + T*v.");
  m.def("tiled_mma_copy_src_tv",
        [](py::object mma_tv, py::object atom_threads, py::object atom_values,
           py::object ref2src) {
          const char* fn = "tiled_mma_copy_src_tv";
          const DynLayout tv = tv_arg(mma_tv, fn, "mma_tv");
          if (rank(mode(tv, 0)) != 3 || rank(mode(tv, 1)) != 3) {
            throw std::invalid_argument(std::string(fn) + ": mma_tv must come from tiled_mma_tv "
                                        "(threads (T_atom, WM, WN), values (V_atom, rep_r, "
                                        "rep_s)), got " + to_string(tv));
          }
          const int64_t at = positive_arg(atom_threads, fn, "atom_threads");
          const int64_t av = positive_arg(atom_values, fn, "atom_values");
          const DynLayout r2s = tv_arg(ref2src, fn, "ref2src");
          return with_operands(
              fn,
              [&] {
                return named("mma_tv", tv) + ", atom_threads=" + std::to_string(at) +
                       ", atom_values=" + std::to_string(av) + " and " + named("ref2src", r2s);
              },
              [&] {
                // Its largest stride, threads * atom_values * rep_r / f, is below this product.
                checked_mul(size(tv), av, "tiled_mma_copy_src_tv: {a} * {b} overflows int64");
                return tiled_mma_copy_src_tv(tv, at, av, r2s);
              });
        },
        py::arg("mma_tv"), py::arg("atom_threads"), py::arg("atom_values"), py::arg("ref2src"),
        R"doc(
Source-side TV layout of a copy that fills a tiled MMA's A or B fragments (ldmatrix): mma_tv from
tiled_mma_tv, the copy atom's threads and values per thread, and copy_ref_to_src(ref, src) of the
atom. Same tile as mma_tv; values (atom_values, rep_r / f, rep_s), f = atom_values / V_atom.)doc");

  // ---------------------------------------------------------------------------------------------
  // Text and pictures
  auto table_of = [](py::object x, char const* fn) {
    if (py::isinstance<DynComposedLayout>(x)) return to_table(x.cast<DynComposedLayout>());
    return to_table(layout_arg(x, fn, "layout", false));
  };
  m.def("to_table", [table_of](py::object x) { return table_of(x, "to_table"); },
        "print_layout's 2-D table (rank 1 or 2) as a string.");
  m.def("print_layout",
        [table_of](py::object x) { py::print(table_of(x, "print_layout"), py::arg("end") = ""); },
        "Prints the 2-D table of a rank-1/2 Layout or ComposedLayout.");
  m.def("to_svg",
        [](py::object x) {
          if (py::isinstance<DynComposedLayout>(x)) return to_svg(x.cast<DynComposedLayout>());
          return to_svg(layout_arg(x, "to_svg", "layout", false));
        },
        "SVG picture of a rank-1/2 Layout or ComposedLayout: cell (i, j) shows L(i, j).");
  m.def("to_latex",
        [](py::object x) {
          if (py::isinstance<DynComposedLayout>(x)) return to_latex(x.cast<DynComposedLayout>());
          return to_latex(layout_arg(x, "to_latex", "layout", false));
        },
        "Standalone TikZ document of the same picture as to_svg.");
  m.def("to_svg_tv",
        [](py::object tv, py::object tile) {
          const auto mn = tile_arg(tile, "to_svg_tv");
          return to_svg_tv(layout_arg(tv, "to_svg_tv", "tv", false), mn.first, mn.second);
        },
        py::arg("tv"), py::arg("tile"),
        "SVG of a (thread, value) -> m + n*M layout over an (M, N) tile, colored by thread.");
  m.def("to_latex_tv",
        [](py::object tv, py::object tile) {
          const auto mn = tile_arg(tile, "to_latex_tv");
          return to_latex_tv(layout_arg(tv, "to_latex_tv", "tv", false), mn.first, mn.second);
        },
        py::arg("tv"), py::arg("tile"), "Standalone TikZ document of to_svg_tv's picture.");
  m.def("parse_int_tuple", [](std::string const& s) { return to_python(parse_int_tuple(s)); },
        "Parses '(8,(2,_))' into nested Python tuples (`_` becomes the module's `_`).");
}

void bind_atoms(py::module_& m) {
  m.doc() = "Layouts of the C++ atom traits and GEMM configurations (to_dyn of the static ones).";
  m.def("mma_atom_names", &mma_atom_names, "Names mma_atom_layouts accepts.");
  m.def("mma_atom_layouts",
        [](std::string const& name) {
          const MmaAtomLayouts a = mma_atom_layouts(name);
          py::dict d;
          d["A"] = a.a;
          d["B"] = a.b;
          d["C"] = a.c;
          d["MNK"] = py::make_tuple(a.m, a.n, a.k);
          d["threads"] = a.threads;
          return d;
        },
        py::arg("name"), R"doc(
{'A', 'B', 'C': the atom's (T, V) -> operand-tile layouts (A (M, K), B (N, K), C (M, N), column-
major), 'MNK': (M, N, K), 'threads'} from MMA_Traits, e.g. mma_atom_layouts('m16n8k16').)doc");
  m.def("ldmatrix_layouts",
        [](std::string const& operand) {
          const CopyAtomLayouts a = ldmatrix_layouts(operand);
          return py::make_tuple(a.src, a.ref);
        },
        py::arg("operand"), R"doc(
(src, ref) of the ldmatrix.x4 atom filling m16n8k16 'A' (16x16, M x K) or 'B' (16x16, N x K)
fragments: (T32, V8) -> tile index; src is what each lane addresses, ref the registers'
fragment.)doc");
  m.def("gemm_config_maps",
        []() {
          py::list out;
          for (GemmConfigLayouts const& c : gemm_config_layouts()) {
            out.append(config_layouts_dict(c));
          }
          return out;
        },
        R"doc(
For each GEMM configuration compiled into the extension (generated/gemm_configs.inc, in order):
a dict of the kernel config's own layouts -- name, bm, bn, bk, stages, warps_m, warps_n, threads,
mma_a_tv/mma_b_tv/mma_c_tv (Mma::LayoutX_TV), ldsm_a_src_tv/ldsm_b_src_tv (CopyA/B::LayoutSrcTV),
g2s_tv/s2g_tv and g2s_tile/s2g_tile (G2S/S2G), smem_a/smem_b/smem_c (ComposedLayouts).)doc");
}

}  // namespace cute_gemm
