#pragma once
// Text forms of int tuples and layouts (host only): "(8,(2,2)):(2,(1,16))", and the 2-D table
// that CuTe's print_layout draws (row i, column j holds L(i, j)).

#include <string>

#include "cute_gemm/dyn_layout.hpp"
#include "cute_gemm/swizzle.hpp"

namespace cute_gemm {

inline std::string to_string(DynTuple const& t) {
  std::string out;
  // Stack of remaining child counts of the open tuples.
  int stack[DynTuple::kCapacity] = {};
  int top = 0;
  for (int i = 0; i < t.n; ++i) {
    if (t.kind[i] >= 0) {
      out += "(";
      if (t.kind[i] == 0) {
        out += ")";
      } else {
        stack[top++] = t.kind[i];
        continue;
      }
    } else if (t.kind[i] == DynTuple::kUnderscore) {
      out += "_";
    } else {
      out += std::to_string(t.value[i]);
    }
    // A node finished: close tuples whose children are all written, else write a comma.
    while (top > 0) {
      if (--stack[top - 1] > 0) {
        out += ",";
        break;
      }
      out += ")";
      --top;
    }
  }
  return out;
}

inline std::string to_string(DynLayout const& l) {
  return to_string(l.shape) + ":" + to_string(l.stride);
}

inline std::string to_string(DynSwizzle const& s) {
  return "Sw<" + std::to_string(s.bits) + "," + std::to_string(s.base) + "," +
         std::to_string(s.shift) + ">";
}

inline std::string to_string(DynComposedLayout const& c) {
  return to_string(c.swizzle) + " o " + std::to_string(c.offset) + " o " + to_string(c.layout);
}

namespace detail {
// Rows and columns of the 2-D picture of a layout: rank 1 is one column, rank 2 its two modes.
inline void table_extents(DynLayout const& l, int64_t& rows, int64_t& cols) {
  CG_REQUIRE(rank(l) <= 2, "a 2-D table needs a layout of rank 1 or 2, got rank {a}", rank(l), 0);
  if (rank(l) <= 1 || !l.shape.is_tuple()) {  // rank 0, the empty layout (), is one cell
    rows = size(l);
    cols = 1;
  } else {
    rows = product(get(l.shape, 0));
    cols = product(get(l.shape, 1));
  }
}
}  // namespace detail

// The 2-D table of any map f(row, col) over a rows x cols grid, as print_layout draws it.
template <class F>
std::string format_table(std::string const& title, int64_t rows, int64_t cols, F&& f) {
  int width = 1;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const int w = static_cast<int>(std::to_string(f(i, j)).size());
      if (w > width) width = w;
    }
  auto pad = [](std::string s, int w) { return std::string(w - s.size(), ' ') + s; };
  std::string rule = "    +";
  for (int64_t j = 0; j < cols; ++j) rule += std::string(width + 2, '-') + "+";
  std::string out = title + "\n     ";
  for (int64_t j = 0; j < cols; ++j) out += " " + pad(std::to_string(j), width) + "  ";
  out += "\n" + rule + "\n";
  for (int64_t i = 0; i < rows; ++i) {
    out += pad(std::to_string(i), 3) + " |";
    for (int64_t j = 0; j < cols; ++j) out += " " + pad(std::to_string(f(i, j)), width) + " |";
    out += "\n" + rule + "\n";
  }
  return out;
}

// print_layout's table of a rank-1 or rank-2 layout.
inline std::string to_table(DynLayout const& l) {
  int64_t rows = 0, cols = 0;
  detail::table_extents(l, rows, cols);
  return format_table(to_string(l), rows, cols,
                      [&](int64_t i, int64_t j) { return l(i + j * rows); });
}

inline std::string to_table(DynComposedLayout const& c) {
  int64_t rows = 0, cols = 0;
  detail::table_extents(c.layout, rows, cols);
  return format_table(to_string(c), rows, cols,
                      [&](int64_t i, int64_t j) { return c(i + j * rows); });
}

}  // namespace cute_gemm
