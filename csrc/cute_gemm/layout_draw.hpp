#pragma once
// Pictures of layouts (host only): SVG for a browser or notebook, and a standalone TikZ document
// for papers (pdflatex turns it into one cropped page; the `convert` class option into a PNG).
//
//   to_svg(L) / to_latex(L)          rank-1/2 layout (or swizzled ComposedLayout): cell (i, j) of a
//                                    rows x cols grid shows L(i, j), colored by offset % 8, so
//                                    equal offsets (broadcast) and swizzle patterns stand out.
//   to_svg_tv(tv, M, N) / to_latex_tv    a thread-value layout drawn over the M x N tile it
//                                    partitions: each element shows the thread and value that
//                                    own it, colored by thread.
//
// Both renderers draw the same intermediate Picture, so SVG and TikZ always agree.
// SVG element classes: text.title, text.index (row/column numbers), rect.cell and text.cell
// (one per drawn grid cell), so tools and tests can pick the cells out.

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "cute_gemm/layout_print.hpp"
#include "cute_gemm/swizzle.hpp"

namespace cute_gemm {
namespace detail {

// Beyond this a picture is unreadable and the output would be megabytes; refuse instead.
constexpr int64_t kMaxPictureCells = int64_t(1) << 16;

// Eight light colors, dark text stays readable on all of them. Indexed by offset or thread % 8.
struct PaletteColor {
  int r, g, b;
};
constexpr PaletteColor kPalette[8] = {
    {255, 204, 204}, {204, 229, 255}, {204, 255, 204}, {255, 240, 179},
    {229, 204, 255}, {255, 217, 179}, {179, 240, 230}, {224, 224, 224},
};

inline int palette_index(int64_t v) { return static_cast<int>(((v % 8) + 8) % 8); }

struct PictureCell {
  std::string line1;   // main text (an offset, or "T{t}")
  std::string line2;   // second line ("V{v}") or empty
  int color = -1;      // palette index, -1 = blank (white)
  bool marked = false; // drawn with a heavy border: several owners (broadcast)
};

struct Picture {
  std::string title;
  int64_t rows = 0;
  int64_t cols = 0;
  bool two_lines = false;          // cells carry line2 (TV pictures)
  std::vector<PictureCell> cells;  // row-major: cells[i * cols + j]
};

inline void check_picture_size(std::string const& fn, int64_t rows, int64_t cols) {
  // rows > max / cols instead of rows * cols > max: the product of two huge extents overflows.
  if (rows > kMaxPictureCells / cols) {
    throw std::invalid_argument(fn + ": picture too large: " + std::to_string(rows) + "x" +
                                std::to_string(cols) + " cells (at most " +
                                std::to_string(kMaxPictureCells) + " can be drawn)");
  }
}

// Rows and columns of the picture of a layout: rank 1 is one column, rank 2 its two modes (each
// mode flattened, its 1-D index running down / across).
inline void picture_extents(std::string const& fn, DynLayout const& l, int64_t& rows,
                            int64_t& cols) {
  if (rank(l) > 2) {
    throw std::invalid_argument(fn + ": a picture needs a layout of rank 1 or 2, got rank " +
                                std::to_string(rank(l)) + " (" + to_string(l) + ")");
  }
  if (rank(l) <= 1 || !l.shape.is_tuple()) {
    rows = size(l);
    cols = 1;
  } else {
    rows = product(get(l.shape, 0));
    cols = product(get(l.shape, 1));
  }
  check_picture_size(fn, rows, cols);
}

// The grid of a layout-like map f(1-D index) with the given extents.
template <class F>
Picture offset_picture(std::string const& title, int64_t rows, int64_t cols, F&& f) {
  Picture p;
  p.title = title;
  p.rows = rows;
  p.cols = cols;
  p.cells.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t v = f(i + j * rows);
      PictureCell& c = p.cells[static_cast<size_t>(i * cols + j)];
      c.line1 = std::to_string(v);
      c.color = palette_index(v);
    }
  }
  return p;
}

// The M x N grid of a thread-value layout: tv(t, v) is the column-major element index m + n*M.
inline Picture tv_picture(std::string const& fn, DynLayout const& tv, int64_t tile_m,
                          int64_t tile_n) {
  if (rank(tv) != 2 || !tv.shape.is_tuple()) {
    throw std::invalid_argument(fn + ": a TV layout needs rank 2 (thread mode, value mode), got " +
                                to_string(tv));
  }
  CG_REQUIRE(tile_m >= 1 && tile_n >= 1, "TV picture: the tile must be at least 1x1, got {a}x{b}",
             tile_m, tile_n);
  check_picture_size(fn, tile_m, tile_n);
  const int64_t threads = product(get(tv.shape, 0));
  const int64_t values = product(get(tv.shape, 1));
  const int64_t elems = tile_m * tile_n;
  // Each (t, v) is visited once; a stride-0 layout can be huge while still fitting the tile.
  if (size(tv) > 64 * kMaxPictureCells) {
    throw std::invalid_argument(fn + ": TV layout too large to draw: size " +
                                std::to_string(size(tv)));
  }
  Picture p;
  p.two_lines = true;
  p.title = to_string(tv) + " on a " + std::to_string(tile_m) + "x" + std::to_string(tile_n) +
            " tile";
  p.rows = tile_m;
  p.cols = tile_n;
  p.cells.resize(static_cast<size_t>(elems));
  // Visit (t, v) in the layout's own 1-D order, so "first owner" means the smallest t + v*T.
  for (int64_t v = 0; v < values; ++v) {
    for (int64_t t = 0; t < threads; ++t) {
      const int64_t e = tv(t + v * threads);
      if (e < 0 || e >= elems) {
        throw std::invalid_argument(
            fn + ": thread " + std::to_string(t) + ", value " + std::to_string(v) +
            " maps to element " + std::to_string(e) + ", outside the " + std::to_string(tile_m) +
            "x" + std::to_string(tile_n) + " tile (elements 0.." + std::to_string(elems - 1) +
            ", column-major)");
      }
      PictureCell& c = p.cells[static_cast<size_t>((e % tile_m) * tile_n + e / tile_m)];
      if (c.color >= 0) {
        c.marked = true;
        continue;
      }
      c.line1 = "T" + std::to_string(t);
      c.line2 = "V" + std::to_string(v);
      c.color = palette_index(t);
    }
  }
  return p;
}

inline std::string xml_escape(std::string const& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Escapes LaTeX specials for text mode. Our titles only hold digits, punctuation and "Sw<...>".
inline std::string latex_escape(std::string const& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "$<$"; break;
      case '>': out += "$>$"; break;
      case '_': case '%': case '#': case '&': case '$': case '{': case '}':
        out += '\\';
        out += c;
        break;
      case '\\': out += "\\textbackslash{}"; break;
      case '^': out += "\\^{}"; break;
      case '~': out += "\\~{}"; break;
      default: out += c;
    }
  }
  return out;
}

inline std::string hex_color(int idx) {
  if (idx < 0) return "#ffffff";
  static char const* digits = "0123456789abcdef";
  std::string out = "#";
  for (int v : {kPalette[idx].r, kPalette[idx].g, kPalette[idx].b}) {
    out += digits[v / 16];
    out += digits[v % 16];
  }
  return out;
}

inline std::string render_svg(Picture const& p) {
  // Cell width from the longest text (monospace, ~7.2 px per glyph at 12 px).
  size_t longest = 1;
  for (PictureCell const& c : p.cells) {
    if (c.line1.size() > longest) longest = c.line1.size();
    if (c.line2.size() > longest) longest = c.line2.size();
  }
  const bool two_lines = p.two_lines;
  const int64_t cw = std::max<int64_t>(32, static_cast<int64_t>(longest) * 8 + 12);
  const int64_t ch = two_lines ? 36 : 24;
  const int64_t index_w = static_cast<int64_t>(std::to_string(p.rows).size()) * 8 + 16;
  const int64_t left = index_w;
  const int64_t top = 44;  // title line + column indices
  const int64_t width =
      std::max<int64_t>(left + p.cols * cw + 8,
                        static_cast<int64_t>(p.title.size()) * 8 + 16);
  const int64_t height = top + p.rows * ch + 8;
  auto num = [](int64_t v) { return std::to_string(v); };

  std::string out;
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" +
         num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
         "\" font-family=\"monospace\" font-size=\"12\">\n";
  out += "<rect x=\"0\" y=\"0\" width=\"" + num(width) + "\" height=\"" + num(height) +
         "\" fill=\"white\"/>\n";
  out += "<text class=\"title\" x=\"8\" y=\"16\">" + xml_escape(p.title) + "</text>\n";
  for (int64_t j = 0; j < p.cols; ++j) {
    out += "<text class=\"index\" x=\"" + num(left + j * cw + cw / 2) + "\" y=\"" +
           num(top - 8) + "\" text-anchor=\"middle\">" + num(j) + "</text>\n";
  }
  for (int64_t i = 0; i < p.rows; ++i) {
    out += "<text class=\"index\" x=\"" + num(left - 8) + "\" y=\"" + num(top + i * ch + ch / 2) +
           "\" text-anchor=\"end\" dominant-baseline=\"central\">" + num(i) + "</text>\n";
  }
  for (int64_t i = 0; i < p.rows; ++i) {
    for (int64_t j = 0; j < p.cols; ++j) {
      PictureCell const& c = p.cells[static_cast<size_t>(i * p.cols + j)];
      const int64_t x = left + j * cw, y = top + i * ch;
      out += "<rect class=\"cell\" x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(cw) +
             "\" height=\"" + num(ch) + "\" fill=\"" + hex_color(c.color) +
             "\" stroke=\"black\" stroke-width=\"" + (c.marked ? "2.5" : "0.5") + "\"/>\n";
      if (c.color < 0) continue;  // nobody owns this element: leave it blank
      const std::string cx = num(x + cw / 2);
      if (!two_lines) {
        out += "<text class=\"cell\" x=\"" + cx + "\" y=\"" + num(y + ch / 2) +
               "\" text-anchor=\"middle\" dominant-baseline=\"central\">" + xml_escape(c.line1) +
               "</text>\n";
      } else {
        out += "<text class=\"cell\" x=\"" + cx + "\" y=\"" + num(y + ch / 2) +
               "\" text-anchor=\"middle\"><tspan x=\"" + cx + "\" dy=\"-2\">" +
               xml_escape(c.line1) + "</tspan><tspan x=\"" + cx + "\" dy=\"13\">" +
               xml_escape(c.line2) + (c.marked ? "*" : "") + "</tspan></text>\n";
      }
    }
  }
  out += "</svg>\n";
  return out;
}

inline std::string render_latex(Picture const& p) {
  const bool two_lines = p.two_lines;
  auto num = [](int64_t v) { return std::to_string(v); };
  std::string out;
  out += "% " + p.title + "\n";
  out += "\\documentclass[convert]{standalone}\n";
  out += "\\usepackage{tikz}\n";
  for (int k = 0; k < 8; ++k) {
    out += "\\definecolor{cg" + num(k) + "}{RGB}{" + num(kPalette[k].r) + "," +
           num(kPalette[k].g) + "," + num(kPalette[k].b) + "}\n";
  }
  out += "\\begin{document}\n";
  // x runs along columns, y down the rows, one unit per cell, so node (j, i) is cell (i, j).
  out += "\\begin{tikzpicture}[x={(1cm,0cm)}, y={(0cm,-1cm)},\n";
  out += "  cell/.style={draw, minimum size=1cm, inner sep=0pt, align=center, "
         "font=\\footnotesize\\ttfamily},\n";
  out += "  index/.style={font=\\footnotesize\\ttfamily}]\n";
  out += "\\node[anchor=south west, font=\\ttfamily] at (-1, -1.2) {" + latex_escape(p.title) +
         "};\n";
  for (int64_t j = 0; j < p.cols; ++j)
    out += "\\node[index] at (" + num(j) + ", -0.8) {" + num(j) + "};\n";
  for (int64_t i = 0; i < p.rows; ++i)
    out += "\\node[index] at (-0.8, " + num(i) + ") {" + num(i) + "};\n";
  for (int64_t i = 0; i < p.rows; ++i) {
    for (int64_t j = 0; j < p.cols; ++j) {
      PictureCell const& c = p.cells[static_cast<size_t>(i * p.cols + j)];
      std::string style = "cell";
      if (c.color >= 0) style += ", fill=cg" + num(c.color);
      if (c.marked) style += ", line width=1.5pt";
      std::string text;
      if (c.color >= 0) {
        text = latex_escape(c.line1);
        if (two_lines) text += "\\\\" + latex_escape(c.line2) + (c.marked ? "*" : "");
      }
      out += "\\node[" + style + "] at (" + num(j) + ", " + num(i) + ") {" + text + "};\n";
    }
  }
  out += "\\end{tikzpicture}\n";
  out += "\\end{document}\n";
  return out;
}

}  // namespace detail

// Picture of a rank-1 or rank-2 layout: cell (i, j) shows L(i, j).
inline std::string to_svg(DynLayout const& l) {
  int64_t rows = 0, cols = 0;
  detail::picture_extents("to_svg", l, rows, cols);
  return detail::render_svg(
      detail::offset_picture(to_string(l), rows, cols, [&](int64_t i) { return l(i); }));
}

inline std::string to_latex(DynLayout const& l) {
  int64_t rows = 0, cols = 0;
  detail::picture_extents("to_latex", l, rows, cols);
  return detail::render_latex(
      detail::offset_picture(to_string(l), rows, cols, [&](int64_t i) { return l(i); }));
}

// Swizzled layouts: the grid follows the inner layout's modes, cells show the swizzled offset.
inline std::string to_svg(DynComposedLayout const& c) {
  int64_t rows = 0, cols = 0;
  detail::picture_extents("to_svg", c.layout, rows, cols);
  return detail::render_svg(
      detail::offset_picture(to_string(c), rows, cols, [&](int64_t i) { return c(i); }));
}

inline std::string to_latex(DynComposedLayout const& c) {
  int64_t rows = 0, cols = 0;
  detail::picture_extents("to_latex", c.layout, rows, cols);
  return detail::render_latex(
      detail::offset_picture(to_string(c), rows, cols, [&](int64_t i) { return c(i); }));
}

// Thread-value layout over an M x N tile: tv maps (thread, value) to the column-major element
// index m + n*M. Elements no (t, v) owns are blank; an element with several owners shows the first
// (smallest t + v*T) with its value marked '*' and a heavy border.
inline std::string to_svg_tv(DynLayout const& tv, int64_t tile_m, int64_t tile_n) {
  return detail::render_svg(detail::tv_picture("to_svg_tv", tv, tile_m, tile_n));
}

inline std::string to_latex_tv(DynLayout const& tv, int64_t tile_m, int64_t tile_n) {
  return detail::render_latex(detail::tv_picture("to_latex_tv", tv, tile_m, tile_n));
}

}  // namespace cute_gemm
