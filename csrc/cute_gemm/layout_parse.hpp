#pragma once
// Parsing the text forms that layout_print.hpp writes (host only), so that a layout printed in a
// log or a test failure can be pasted back in:
//
//   parse_int_tuple("(8,(2,_))")          -> the DynTuple (8,(2,_))
//   parse_layout("(8,(2,2)):(2,(1,16))")  -> shape:stride
//   parse_layout("(2,3)")                 -> (2,3):(1,2), compact column-major like CuTe's default
//
// Grammar (whitespace allowed between tokens):
//   layout := tuple [ ':' tuple ]
//   tuple  := integer | '_' | '(' [ tuple { ',' tuple } ] ')'
//   integer:= [ '-' ] digit { digit }
// Errors are std::invalid_argument (ValueError in Python) naming the 0-based position, what was
// expected there and the whole input, because the inputs are short and typed by people.

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cute_gemm/dyn_layout.hpp"

namespace cute_gemm {
namespace detail {

class IntTupleParser {
 public:
  explicit IntTupleParser(std::string const& text) : text_(text) {}

  // Parses one tuple starting at the current position and appends its nodes to `out`.
  void parse_tuple(DynTuple& out) {
    skip_space();
    if (at_end()) fail("an integer, '_' or '('");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      // The child count is only known at ')': patch the tuple node when it closes.
      const int node = out.n;
      out.push_node(0, 0);
      skip_space();
      if (peek() == ')') {
        ++pos_;
        return;
      }
      for (;;) {
        parse_tuple(out);
        out.kind[node] += 1;
        skip_space();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        if (peek() == ')') {
          ++pos_;
          return;
        }
        fail("',' or ')'");
      }
    }
    if (c == '_') {
      ++pos_;
      out.push_node(DynTuple::kUnderscore, 0);
      return;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      out.push_node(DynTuple::kLeaf, parse_integer());
      return;
    }
    fail("an integer, '_' or '('");
  }

  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                         text_[pos_] == '\r'))
      ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  size_t pos() const { return pos_; }
  void advance() { ++pos_; }

  [[noreturn]] void fail(std::string const& expected) const {
    std::string got = at_end() ? std::string("end of input")
                               : std::string("'") + text_[pos_] + "'";
    throw std::invalid_argument("expected " + expected + " at position " + std::to_string(pos_) +
                                " in '" + text_ + "', got " + got);
  }

 private:
  int64_t parse_integer() {
    const size_t start = pos_;
    bool negative = false;
    if (peek() == '-') {
      negative = true;
      ++pos_;
    }
    if (!(peek() >= '0' && peek() <= '9')) fail("a digit");
    // Accumulate negatively so that INT64_MIN itself parses; reject anything beyond int64.
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      const int d = peek() - '0';
      if (v < (INT64_MIN + d) / 10) {
        throw std::invalid_argument("integer at position " + std::to_string(start) + " in '" +
                                    text_ + "' does not fit in 64 bits");
      }
      v = v * 10 - d;
      ++pos_;
    }
    if (!negative) {
      if (v == INT64_MIN) {
        throw std::invalid_argument("integer at position " + std::to_string(start) + " in '" +
                                    text_ + "' does not fit in 64 bits");
      }
      v = -v;
    }
    return v;
  }

  std::string const& text_;
  size_t pos_ = 0;
};

}  // namespace detail

// parse_int_tuple("(8,(2,_))"): ints (negative allowed), nested parentheses, `_`, whitespace.
inline DynTuple parse_int_tuple(std::string const& text) {
  detail::IntTupleParser p(text);
  DynTuple t;
  p.parse_tuple(t);
  p.skip_space();
  if (!p.at_end()) p.fail("end of input");
  return t;
}

// parse_layout("shape:stride") or parse_layout("shape") (compact column-major strides).
// The layout itself is validated by make_dyn_layout (congruence, positive shape, no `_`).
inline DynLayout parse_layout(std::string const& text) {
  detail::IntTupleParser p(text);
  DynTuple shape;
  p.parse_tuple(shape);
  p.skip_space();
  if (p.at_end()) return make_dyn_layout(shape);
  if (p.peek() != ':') p.fail("':' or end of input");
  p.advance();
  DynTuple stride;
  p.parse_tuple(stride);
  p.skip_space();
  if (!p.at_end()) p.fail("end of input");
  return make_dyn_layout(shape, stride);
}

}  // namespace cute_gemm
