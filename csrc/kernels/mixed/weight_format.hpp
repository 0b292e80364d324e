#pragma once
// The packed weight format of the mixed-input GEMM (out = A @ dequant(W)^T), chosen for the kernel:
// each lane of a warp gets its mma.sync B fragments for several k16 steps with ONE 16-byte load,
// and the nibbles/bytes of each 32-bit word sit where the register dequantization tricks want them.
//
// W is [N, K] (nn.Linear's layout), quantized to integers q in [0, 2^bits). The packed tensor is
// int32 and walks, in this order:  n8 block nb  ->  k block kb  ->  lane (32)  ->  word (4).
//   INT4: k blocks of 128 (8 k16 steps), shape [N/8, Kp/128, 32, 4], Kp = K rounded up to 128
//   INT8: k blocks of 64  (4 k16 steps), shape [N/8, Kp/64,  32, 4], Kp = K rounded up to 64
// so a warp reads 512 contiguous bytes per (nb, kb): fully coalesced, and consecutive k blocks of
// one n8 block are adjacent (a CTA streams K for its n range).
//
// Lane l = 4 * g + t (g = l / 4, t = l % 4, the mma fragment's groupID / threadID_in_group) holds
// column n = 8 * nb + g. The mma.m16n8k16 B fragment of k16 step j is two half2 registers:
//   r0 = (W[n, k0 + 2t], W[n, k0 + 2t + 1]),  r1 = (W[n, k0 + 2t + 8], W[n, k0 + 2t + 9]),
// k0 = (k block start) + 16 j.
//
// INT4, word w (0..3) of lane l covers k16 steps j = 2w and 2w + 1. Its nibbles (bits 4i..4i+3 is
// nibble i) are ordered so that `(word >> 8s) & 0x000F000F` picks the register pair s:
//   nibble:  0        1        2        3        4        5        6        7
//   value:   r0(2w).x r1(2w).x r0(2w+1).x r1(2w+1).x r0(2w).y r1(2w).y r0(2w+1).y r1(2w+1).y
// (x = low half of the register, y = high half). Pairs (0,4), (1,5), (2,6), (3,7) are registers
// r0(2w), r1(2w), r0(2w+1), r1(2w+1): one lop3 with 0x000F000F / 0x00F000F0 and a shift by 8
// yields two registers at a time.
//
// INT8, word w (0..3) of lane l covers k16 step j = w. Bytes 0..3 are r0.x, r1.x, r0.y, r1.y, so
// a byte permute of bytes (0, 2) and (1, 3) next to 0x64 exponent bytes yields r0 and r1.
//
// Dequantization in registers, no int->float conversions: a half with exponent bits 0x6400 and a
// 10-bit mantissa m is 1024 + m, so (q | 0x6400) - (1024 + z) = q - z exactly; the kernel applies
// the scale to the fp32 products afterwards (dequant.cuh). bf16 uses 0x4300 (128 + m, 7-bit
// mantissa: exact for q < 128; INT8 in bf16 is split into two nibbles or handled with 0x4B00 on
// float). Symmetric weights use z = 2^(bits-1).
//
// Scales (and zero points for asymmetric weights) are [K / G, N] in the activation dtype, G the
// group size (32, 64, 128; per-channel: one row, G = K). Zero points hold the integer zero z of
// each group and column as a float value.
//
// This header is the format's one rulebook: the valid bit widths and group sizes, what -1 means,
// block_k, the packed shape, the K/N divisibility rules and the format itself as a static layout
// (PackedFormat). The op's checks and its CPU unpacking (csrc/ops/mixed_gemm_op.cpp), the kernels
// and, through cute_gemm._C.weight_format (csrc/bindings/format_bindings.cpp), every Python check,
// loader and the Python pack/unpack (cute_gemm/weight_format.py) read it from here.

#include <stdint.h>

#include "cute_gemm/layout.hpp"
#include "cute_gemm/layout_algebra.hpp"

namespace cute_gemm {
namespace mixed {

constexpr int kLanes = 32;
constexpr int kWordsPerLane = 4;
constexpr int kBlockN = 8;

// K per packed block: 8 k16 steps for INT4, 4 for INT8.
constexpr int block_k(int bits) { return bits == 4 ? 128 : 64; }

// ------------------------------------------------------------------------------------------------
// Valid arguments. The sets are listed once, here; the predicates read them.

constexpr int kValidBits[] = {4, 8};
constexpr char kValidBitsText[] = "4 or 8";  // for messages: "bits must be 4 or 8"

constexpr int kPerChannel = -1;  // group_size of one group per output channel, G = K
// The group sizes are powers of two (the kernels shift instead of dividing) of at most one packed
// INT8 block; per-channel is one group over all of K.
constexpr int kValidGroupSizes[] = {32, 64, 128, kPerChannel};
constexpr char kValidGroupSizesText[] = "32, 64, 128 or -1 (per-channel)";

// Per-channel weights need K % 32 == 0, which every group size implies: the kernels handle no K
// tail finer than 32 (mixed_gemm_launch.hpp's preconditions).
constexpr int kPerChannelKMultiple = 32;

CG_HOST_DEVICE constexpr bool valid_bits(int64_t bits) {
  for (int b : kValidBits) {
    if (b == bits) return true;
  }
  return false;
}

CG_HOST_DEVICE constexpr bool valid_group_size(int64_t group_size) {
  for (int g : kValidGroupSizes) {
    if (g == group_size) return true;
  }
  return false;
}

// G as the kernels index the scales: group_size, and K for per-channel (-1). Any other size that
// is not a group inside K (0, or more than K: the checks refuse those before a kernel runs) is one
// group over K as well, so a size already resolved to K maps to itself.
//   effective_group_size(128, 4096) == 128, effective_group_size(-1, 4224) == 4224
template <class Int>
CG_HOST_DEVICE constexpr Int effective_group_size(Int group_size, Int k) {
  return (group_size <= 0 || group_size > k) ? k : group_size;
}

// What K must be a multiple of: the group size, or kPerChannelKMultiple for per-channel.
CG_HOST_DEVICE constexpr int64_t k_multiple(int64_t group_size) {
  return group_size == kPerChannel ? kPerChannelKMultiple : group_size;
}

// K >= 1 and whole groups along K. @pre valid_group_size(group_size)
CG_HOST_DEVICE constexpr bool valid_k(int64_t k, int64_t group_size) {
  return k >= 1 && k % k_multiple(group_size) == 0;
}

// Whether a packed k block of K holds more than one quantization group: groups of `group` (the
// effective size, effective_group_size) shorter than block_k(bits), unless one group is all of K.
// A block's scales then change every group, not once per block, which is why the mma.sync and
// decode kernels have "fine" instances that apply the scales every 2 k16 steps (the smallest
// group, 32, is two k16 steps). A fact of the format, like block_k: the planner reads it here.
CG_HOST_DEVICE constexpr bool fine_groups_for(int bits, int64_t group, int64_t k) {
  return group < k && group < block_k(bits);
}
static_assert(fine_groups_for(4, 64, 4096) && fine_groups_for(8, 32, 4096),
              "groups shorter than the packed k block are fine");
static_assert(!fine_groups_for(8, 64, 4096) && !fine_groups_for(4, 64, 64),
              "one group per block, or one group over all of K, is not fine");

// Whether every packed k block lies within one group (`group` the effective size): groups of
// whole k blocks, or one group over all of K. The wgmma tiles with exact scales
// (mixed_wgmma_kernel's per_block loop) then scale each block's sums once, and the planner gives
// INT4's 16- and 32-row tiles exact scales by default exactly there.
CG_HOST_DEVICE constexpr bool whole_block_groups(int bits, int64_t group, int64_t k) {
  return group >= k || group % block_k(bits) == 0;
}
static_assert(whole_block_groups(4, 128, 4096) && whole_block_groups(8, 64, 4096) &&
                  whole_block_groups(4, 4160, 4160) && whole_block_groups(4, 64, 64),
              "groups of whole k blocks, or one over all of K");
static_assert(!whole_block_groups(4, 64, 4096) && !whole_block_groups(8, 32, 4096),
              "groups shorter than a k block");

// N (output channels) in whole packed blocks of kBlockN.
CG_HOST_DEVICE constexpr bool valid_n(int64_t n) { return n >= 0 && n % kBlockN == 0; }

// Packed k blocks of a K: ceil(K / block_k(bits)), in K's type.
template <class Int>
CG_HOST_DEVICE constexpr Int k_blocks(Int k, int bits) {
  return (k + block_k(bits) - 1) / block_k(bits);
}

// The packed int32 tensor of an [N, K] weight: [N/8, ceil(K/bk), 32, 4].
struct PackedShape {
  int64_t n_blocks, k_blocks, lanes, words;
};
CG_HOST_DEVICE constexpr PackedShape packed_shape(int64_t n, int64_t k, int bits) {
  return {n / kBlockN, mixed::k_blocks<int64_t>(k, bits), kLanes, kWordsPerLane};
}

// ------------------------------------------------------------------------------------------------
// The format as a layout.
//
// PackedFormat<Bits>::BlockLayout maps (n, k) within one packed (8 x block_k) block to the index
// of its bit field (INT4: nibble, INT8: byte) within the block's 512 bytes. Field f is bits
// Bits * (f % kFieldsPerWord) and up of int32 word f / kFieldsPerWord, and word 4 * l + w is word
// w of lane l: f = i + kFieldsPerWord * (w + 4 * l), l = 4 g + t. With the names above
// (e: x/y half, t: thread in the lane quad, h: register r0/r1, s: k16 step within a word,
// w: word):
//   INT4  (8,(2,4,2,2,4)):(128,(4,32,1,2,8))   n = g, k = e + 2t + 8h + 16s + 32w,
//                                               nibble i = h + 2s + 4e of word w
//   INT8  (8,(2,4,2,4)):(64,(2,16,1,4))         n = g, k = e + 2t + 8h + 16w, byte i = h + 2e
// The whole packed tensor is this block layout repeated over (k block kb, n block nb), the n
// blocks outermost: field f of block (nb, kb) sits at f + kFields * (kb + k_blocks(K, Bits) * nb).
// (No nested `detail` namespace here: kernels in namespace mixed call cute_gemm::detail's helpers
// unqualified as detail::...)
template <int Bits>
struct PackedBlock;
template <>
struct PackedBlock<4> {  // (N8,(e2,t4,h2,s2,w4)) -> nibble
  using Layout = cute_gemm::Layout<Shape<_8, Shape<_2, _4, _2, _2, _4>>,
                                   Stride<_128, Stride<_4, _32, _1, _2, _8>>>;
};
template <>
struct PackedBlock<8> {  // (N8,(e2,t4,h2,w4)) -> byte
  using Layout =
      cute_gemm::Layout<Shape<_8, Shape<_2, _4, _2, _4>>, Stride<_64, Stride<_2, _16, _1, _4>>>;
};

template <int Bits>
struct PackedFormat {
  static_assert(valid_bits(Bits), "PackedFormat: bits must be 4 or 8");
  static constexpr int kBits = Bits;
  static constexpr int kBlockK = block_k(Bits);
  static constexpr int kFieldsPerWord = 32 / Bits;
  static constexpr int kFieldsPerLane = kWordsPerLane * kFieldsPerWord;
  static constexpr int kFields = kLanes * kFieldsPerLane;  // per block: 512 bytes

  // (N8,K) -> field index in the block
  using BlockLayout = typename PackedBlock<Bits>::Layout;
  // (lane (t4,g8), value) -> field index: lane l = 4 g + t holds kFieldsPerLane consecutive
  // fields, value v = i + kFieldsPerWord * w in memory order.
  using LaneFields = Layout<Shape<Shape<_4, _8>, Int<kFieldsPerLane>>,
                            Stride<Stride<Int<kFieldsPerLane>, Int<4 * kFieldsPerLane>>, _1>>;
  // (T32,V) -> (N8,K) tile index n + 8 k: the weight each lane's value holds.
  //   INT4 ((4,8),(4,2,4)):((16,1),(64,8,256))   (t: k = 2t, g: n; nibbles (h,s), e, w)
  //   INT8 ((4,8),(2,2,4)):((16,1),(64,8,128))   (bytes h, e, then w)
  using TV = decltype(composition(right_inverse(BlockLayout{}), LaneFields{}));

  static_assert(decltype(size(BlockLayout{}))::value == kBlockN * kBlockK,
                "the block layout covers the 8 x block_k tile");
  static_assert(decltype(cosize(BlockLayout{}))::value == kFields,
                "the block layout fills the block's 512 bytes");
  static_assert(kFields * Bits == kLanes * kWordsPerLane * 32, "a block is 512 bytes");
  static_assert(decltype(size(TV{}))::value == kFields, "every field has one (lane, value)");
};

// The block layout as data, for run-time bits (the op's CPU path and the Python binding).
CG_HOST_DEVICE constexpr DynLayout packed_block_layout(int bits) {
  return bits == 4 ? to_dyn(PackedFormat<4>::BlockLayout{})
                   : to_dyn(PackedFormat<8>::BlockLayout{});
}

// Moving between q[N, Kp] (row-major, Kp = K rounded up to block_k) and the packed tensor's fields
// with one view and one permutation, read off the layout: the fields of the packed tensor are the
// layout's modes sorted by stride, outermost first (nb, kb, then the block's leaves by decreasing
// stride); q[N, Kp] is (nb, n's leaves, kb, k's leaves), each mode's leaves slowest first.
//   fields view  [nb, kb, field extents...]          (the packed int32 tensor with a last
//                                                      dimension of kFieldsPerWord fields)
//   q view       [nb, n extents..., kb, k extents...]
//   q view      == fields view permuted by q_from_fields;  fields view == q view permuted by
//   fields_from_q. nb and kb are run-time sizes: the views hold 0 there (dims 0 and 1 of the
//   fields view, dims 0 and kb_dim of the q view), for the caller to fill in. nb, the only
//   dimension that depends on N, is outermost in both views (N may be symbolic).
struct PackedViews {
  static constexpr int kMaxRank = 10;
  int rank = 0;    // dims of both views
  int kb_dim = 0;  // kb's dim in the q view
  int64_t fields[kMaxRank] = {};
  int64_t q[kMaxRank] = {};
  int q_from_fields[kMaxRank] = {};
  int fields_from_q[kMaxRank] = {};
};

CG_HOST_DEVICE constexpr PackedViews packed_views(int bits) {
  DynLayout const block = packed_block_layout(bits);
  DynLayout const n_mode = mode(block, 0), k_mode = mode(block, 1);
  int const n_leaves = leaf_count(n_mode.shape), k_leaves = leaf_count(k_mode.shape);
  int const leaves = n_leaves + k_leaves;
  CG_REQUIRE(leaves + 2 <= PackedViews::kMaxRank, "packed_views: {a} leaves", leaves, 0);
  // Leaf j of the block, j < n_leaves the n's (fastest first), then the k's (fastest first).
  int64_t extent[PackedViews::kMaxRank] = {}, stride[PackedViews::kMaxRank] = {};
  for (int j = 0; j < leaves; ++j) {
    DynLayout const& m = j < n_leaves ? n_mode : k_mode;
    int const i = j < n_leaves ? j : j - n_leaves;
    extent[j] = leaf_at(m.shape, i);
    stride[j] = leaf_at(m.stride, i);
  }
  PackedViews v;
  v.rank = leaves + 2;
  v.kb_dim = 1 + n_leaves;
  // q view dim of leaf j: n's after nb, k's after kb, each slowest first.
  int q_dim_of[PackedViews::kMaxRank] = {};
  for (int j = 0; j < leaves; ++j) {
    q_dim_of[j] = j < n_leaves ? n_leaves - j : v.kb_dim + (leaves - j);
    v.q[q_dim_of[j]] = extent[j];
  }
  // fields view: leaves by decreasing stride (a selection sort; the strides are distinct).
  bool used[PackedViews::kMaxRank] = {};
  v.q_from_fields[0] = 0;
  v.q_from_fields[v.kb_dim] = 1;
  v.fields_from_q[0] = 0;
  v.fields_from_q[1] = v.kb_dim;
  for (int d = 2; d < v.rank; ++d) {
    int best = -1;
    for (int j = 0; j < leaves; ++j) {
      if (!used[j] && (best < 0 || stride[j] > stride[best])) best = j;
    }
    used[best] = true;
    v.fields[d] = extent[best];
    v.fields_from_q[d] = q_dim_of[best];
    v.q_from_fields[q_dim_of[best]] = d;
  }
  // The sorted leaves are a compact row-major view of the block (the layout is a bijection).
  int64_t expect = 1;
  for (int d = v.rank - 1; d >= 2; --d) {
    int const j = v.fields_from_q[d] < v.kb_dim ? n_leaves - v.fields_from_q[d]
                                                : leaves - (v.fields_from_q[d] - v.kb_dim);
    CG_REQUIRE(stride[j] == expect, "packed_views: the block layout is not compact ({a}, {b})",
               stride[j], expect);
    expect *= extent[j];
  }
  return v;
}

}  // namespace mixed
}  // namespace cute_gemm
