// Host checks of the packed weight format's rulebook (kernels/mixed/weight_format.hpp):
//   - the valid sets, their message texts and the predicates agree;
//   - effective_group_size, k_multiple, valid_k, valid_n, packed_shape on examples;
//   - each PackedFormat's block layout is a bijection onto the block's fields and matches the
//     format's prose definition (lane, word, nibble/byte of each (n, k), written out here with
//     plain index math);
//   - the TV layout inverts the block layout (lane, value) -> (n, k);
//   - packed_views: permuting the fields view by q_from_fields gives q's row-major order over a
//     whole multi-block tensor, and fields_from_q is its inverse.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "host_check.hpp"
#include "kernels/mixed/weight_format.hpp"

using namespace cute_gemm;
using namespace cute_gemm::mixed;

// Compile-time: the rules on examples.
static_assert(valid_bits(4) && valid_bits(8) && !valid_bits(2) && !valid_bits(16), "bits");
static_assert(valid_bits(int64_t{4}) && !valid_bits((int64_t{1} << 32) + 4), "no truncation");
static_assert(valid_group_size(32) && valid_group_size(-1) && !valid_group_size(0) &&
                  !valid_group_size(256) && !valid_group_size(16),
              "group sizes");
static_assert(effective_group_size(-1, 4224) == 4224 && effective_group_size(128, 4096) == 128,
              "-1 -> K");
static_assert(effective_group_size(4224, 4224) == 4224, "a resolved size maps to itself");
static_assert(effective_group_size(int64_t{-1}, int64_t{1} << 40) == int64_t{1} << 40, "int64");
static_assert(k_multiple(-1) == 32 && k_multiple(64) == 64, "K multiples");
static_assert(valid_k(96, -1) && !valid_k(100, -1) && valid_k(256, 128) && !valid_k(192, 128) &&
                  !valid_k(0, 32),
              "K rules");
static_assert(valid_n(0) && valid_n(24) && !valid_n(12) && !valid_n(-8), "N rule");
static_assert(packed_shape(24, 200, 4).n_blocks == 3 && packed_shape(24, 200, 4).k_blocks == 2 &&
                  packed_shape(24, 200, 8).k_blocks == 4 && packed_shape(8, 1, 8).k_blocks == 1,
              "packed shape");
static_assert(packed_views(4).rank == 8 && packed_views(8).rank == 7, "one dim per leaf + 2");

// The sets' message texts list the sets.
void check_texts() {
  std::string bits;
  for (size_t i = 0; i < sizeof(kValidBits) / sizeof(int); ++i) {
    if (i > 0) bits += i + 1 == sizeof(kValidBits) / sizeof(int) ? " or " : ", ";
    bits += std::to_string(kValidBits[i]);
  }
  CHECK(bits == kValidBitsText, "bits text '%s' vs '%s'", bits.c_str(), kValidBitsText);
  std::string groups;
  size_t const ng = sizeof(kValidGroupSizes) / sizeof(int);
  for (size_t i = 0; i < ng; ++i) {
    if (i > 0) groups += i + 1 == ng ? " or " : ", ";
    groups += std::to_string(kValidGroupSizes[i]);
  }
  groups += " (per-channel)";
  CHECK(groups == kValidGroupSizesText, "group text '%s' vs '%s'", groups.c_str(),
        kValidGroupSizesText);
  CHECK(kValidGroupSizes[ng - 1] == kPerChannel, "per-channel is listed last");
  // The predicates accept exactly the listed values.
  int nb = 0, ngs = 0;
  for (int v = -1000; v <= 1000; ++v) {
    nb += valid_bits(v);
    ngs += valid_group_size(v);
  }
  CHECK(nb == int(sizeof(kValidBits) / sizeof(int)) && ngs == int(ng), "predicates vs sets");
}

// The field index of weight (n, k) in its block, from the format's prose: lane l = 4 g + t,
// g = n; INT4 word w covers k16 steps 2w and 2w+1, nibble i = h + 2 s + 4 e; INT8 word w is
// step w, byte i = h + 2 e; k = 16 * step + 2 t + 8 h + e.
int spec_field(int bits, int n, int k) {
  int const step = k / 16, r = k % 16;
  int const t = (r % 8) / 2, h = r / 8, e = r % 2;
  int const lane = 4 * n + t;
  int w, i;
  if (bits == 4) {
    w = step / 2;
    i = h + 2 * (step % 2) + 4 * e;
  } else {
    w = step;
    i = h + 2 * e;
  }
  int const per_word = 32 / bits;
  return i + per_word * (w + kWordsPerLane * lane);
}

template <int Bits>
void check_format() {
  using F = PackedFormat<Bits>;
  typename F::BlockLayout const block{};
  typename F::TV const tv{};
  constexpr int bk = F::kBlockK;
  CHECK(bk == block_k(Bits), "kBlockK");
  std::vector<int> hits(F::kFields, 0);
  for (int n = 0; n < kBlockN; ++n) {
    for (int k = 0; k < bk; ++k) {
      int const f = int(block(n, k));
      CHECK(f >= 0 && f < F::kFields, "INT%d (%d, %d) -> %d out of the block", Bits, n, k, f);
      if (f < 0 || f >= F::kFields) continue;
      ++hits[f];
      CHECK(f == spec_field(Bits, n, k), "INT%d (%d, %d) -> %d, the prose says %d", Bits, n, k, f,
            spec_field(Bits, n, k));
    }
  }
  for (int f = 0; f < F::kFields; ++f) {
    CHECK(hits[f] == 1, "INT%d field %d hit %d times", Bits, f, hits[f]);
  }
  // The same layout as data.
  CHECK(to_dyn(block) == packed_block_layout(Bits), "INT%d packed_block_layout", Bits);
  // TV: lane l's value v is field l * kFieldsPerLane + v, at tile index n + 8 k.
  for (int l = 0; l < kLanes; ++l) {
    for (int v = 0; v < F::kFieldsPerLane; ++v) {
      int const pos = int(tv(l, v));
      int const n = pos % kBlockN, k = pos / kBlockN;
      CHECK(k < bk && int(block(n, k)) == l * F::kFieldsPerLane + v,
            "INT%d TV (%d, %d) -> (%d, %d)", Bits, l, v, n, k);
      CHECK(n == l / 4, "INT%d lane %d holds row %d, not its group %d", Bits, l, n, l / 4);
    }
  }
  std::printf("INT%d block %s, TV %s\n", Bits, to_string(block).c_str(), to_string(tv).c_str());
}

// Row-major strides of a view.
std::vector<int64_t> row_major(std::vector<int64_t> const& ext) {
  std::vector<int64_t> s(ext.size(), 1);
  for (int d = int(ext.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * ext[d + 1];
  return s;
}

// packed_views over a [nb * 8, kb * bk] tensor: the element of the q view at every coordinate
// equals, through the permutation, the field of the packed tensor at (nb, kb, f) with f from the
// block layout.
template <int Bits>
void check_views(int nb, int kb) {
  using F = PackedFormat<Bits>;
  typename F::BlockLayout const block{};
  PackedViews const v = packed_views(Bits);
  std::vector<int64_t> fields(v.fields, v.fields + v.rank), q(v.q, v.q + v.rank);
  CHECK(fields[0] == 0 && fields[1] == 0 && q[0] == 0 && q[v.kb_dim] == 0, "placeholders");
  fields[0] = nb, fields[1] = kb, q[0] = nb, q[v.kb_dim] = kb;
  int64_t fprod = 1, qprod = 1;
  for (int d = 0; d < v.rank; ++d) fprod *= fields[d], qprod *= q[d];
  int64_t const total = int64_t(nb) * kb * F::kFields;
  CHECK(fprod == total && qprod == total, "INT%d view sizes %lld %lld", Bits, (long long)fprod,
        (long long)qprod);
  for (int d = 0; d < v.rank; ++d) {
    CHECK(v.fields_from_q[v.q_from_fields[d]] == d, "INT%d permutations are not inverse", Bits);
    CHECK(q[d] == fields[v.q_from_fields[d]], "INT%d q dim %d extent", Bits, d);
  }
  std::vector<int64_t> const fstride = row_major(fields);
  // Every q element (n, k) in row-major order: decompose its linear index over the q view, move
  // each coordinate to its fields-view dim, and compare with the block layout.
  std::vector<int64_t> crd(v.rank);
  for (int64_t idx = 0; idx < total; ++idx) {
    int64_t rest = idx;
    for (int d = v.rank - 1; d >= 0; --d) crd[d] = rest % q[d], rest /= q[d];
    int64_t offset = 0;
    for (int d = 0; d < v.rank; ++d) offset += crd[d] * fstride[v.q_from_fields[d]];
    int64_t const kp = int64_t(kb) * F::kBlockK;
    int64_t const n = idx / kp, k = idx % kp;
    int64_t const want = F::kFields * (kb * (n / kBlockN) + k / F::kBlockK) +
                         block(int(n % kBlockN), int(k % F::kBlockK));
    if (offset != want) {
      CHECK(false, "INT%d views: q[%lld, %lld] -> field %lld, want %lld", Bits, (long long)n,
            (long long)k, (long long)offset, (long long)want);
      return;
    }
  }
}

int main() {
  check_texts();
  check_format<4>();
  check_format<8>();
  for (int nb : {1, 3}) {
    for (int kb : {1, 2, 5}) {
      check_views<4>(nb, kb);
      check_views<8>(nb, kb);
    }
  }
  if (failures) {
    std::printf("%d failure(s)\n", failures);
    return 1;
  }
  std::printf("weight format OK\n");
  return 0;
}
