#pragma once
// Tiled copies: a copy instruction replicated over the threads of a CTA.
//
//   TiledCopy<Atom, ThrLayout, ValLayout>   threads and values arranged over a (rows, cols) tile,
//                                           CuTe's make_tiled_copy: the TV layout inverts the
//                                           raked product of the two arrangements
//   TiledMmaCopy<Atom, TiledMMA, Operand>   a copy that fills a TiledMMA's A or B fragments
//                                           (CuTe's make_tiled_copy_A/B with ldmatrix)
//   ThrCopy                                 one thread's view: partition_S / partition_D
//   copy(atom, src, dst[, pred])            run the instructions of a partition
//
// All TV layouts are computed by the algebra at compile time (tv_layout.hpp) and lifted.

#include "cute_gemm/copy_traits.hpp"
#include "cute_gemm/layout_algebra.hpp"
#include "cute_gemm/mma_atom.hpp"
#include "cute_gemm/tensor.hpp"
#include "cute_gemm/tv_layout.hpp"

namespace cute_gemm {

namespace detail {
template <class Thr, class Val>
struct TiledCopyTv {
  static constexpr DynLayout value = tiled_copy_tv(to_dyn(Thr{}), to_dyn(Val{}));
};
template <class Atom, class Mma, MmaOperand Op>
struct TiledMmaCopySrcTv {
  using MmaTv = std::conditional_t<
      Op == MmaOperand::kA, typename Mma::LayoutA_TV,
      std::conditional_t<Op == MmaOperand::kB, typename Mma::LayoutB_TV, typename Mma::LayoutC_TV>>;
  static constexpr DynLayout value = tiled_mma_copy_src_tv(
      to_dyn(MmaTv{}), Atom::kThreads, Atom::kValues,
      copy_ref_to_src(to_dyn(typename Atom::RefLayout{}), to_dyn(typename Atom::SrcLayout{})));
};

// A thread's part of a tile laid out by `l`: the tile is divided into (TR, TS) blocks and the
// thread's values of one block come from `tv`; result (V, rest_r, rest_s) plus offset.
template <int TR, int TS, class TV, class L, class Thr>
CG_HOST_DEVICE constexpr auto partition_block_tv(L const& l, TV const& tv, Thr const& thr) {
  const auto tiled = zipped_divide(l, make_shape(Int<TR>{}, Int<TS>{}));  // ((TR,TS),(RR,RS))
  const auto tv_in_tile = composition(layout<0>(tiled), tv);             // ((T),(V))
  const auto so = slice_and_offset(make_coord(thr, _), tv_in_tile);
  const auto rest = layout<1>(tiled);  // (RR, RS) or (RR, RS, stages) for a staged buffer
  if constexpr (decltype(rank(rest))::value == 3) {
    return make_tuple(make_layout(get<0>(so), layout<0>(rest), layout<1>(rest), layout<2>(rest)),
                      get<1>(so));
  } else {
    return make_tuple(make_layout(get<0>(so), layout<0>(rest), layout<1>(rest)), get<1>(so));
  }
}
}  // namespace detail

// TiledCopy<Atom, ThrLayout, ValLayout>: thread ids and value ids over the tile's (rows, cols).
// Example (the G2S copy of a 128-thread CTA, K-major 16-bit rows of 32):
//   TiledCopy<CpAsync16, Layout<Shape<_32,_4>, Stride<_4,_1>>, Layout<Shape<_1,_8>>>
// covers a 32x32 tile; thread t copies row t/4, columns 8*(t%4) .. +7.
template <class Atom, class ThrLayout, class ValLayout>
struct TiledCopy {
  using AtomType = Atom;
  static_assert(decltype(size(ValLayout{}))::value == Atom::kValues,
                "TiledCopy: each thread's values must be exactly one instruction's");
  static constexpr int kThreads = decltype(size(ThrLayout{}))::value;
  static constexpr int kTileR = decltype(size<0>(ThrLayout{}))::value *
                                decltype(size<0>(ValLayout{}))::value;
  static constexpr int kTileS = decltype(size<1>(ThrLayout{}))::value *
                                decltype(size<1>(ValLayout{}))::value;
  // (T, V) -> tile index
  using LayoutTV = decltype(lift_layout<detail::TiledCopyTv<ThrLayout, ValLayout>>());

  // (V, rest_r, rest_s): one instruction per (rest_r, rest_s).
  template <class L, class Thr>
  CG_HOST_DEVICE static constexpr auto partition_layout(L const& l, Thr const& thr) {
    return detail::partition_block_tv<kTileR, kTileS>(l, LayoutTV{}, thr);
  }
};

// TiledMmaCopy<Atom, TiledMMA, Operand>: instructions that move TiledMMA fragments, CuTe's
// make_tiled_copy_A/B/C. For A and B (shared -> registers) the partition is the source,
// (V_instr, MMA_rows / f, MMA_cols), and the destination is the MMA fragment regrouped by
// retile_D(); for C (registers -> shared) the fragment, regrouped by retile_S(), is the source and
// the partition the destination.
template <class Atom, class Mma, MmaOperand Op>
struct TiledMmaCopy {
  using AtomType = Atom;
  static constexpr int kThreads = Mma::kThreads;
  static constexpr int kTileR = Op == MmaOperand::kB ? Mma::kTileN : Mma::kTileM;
  static constexpr int kTileS = Op == MmaOperand::kC ? Mma::kTileN : Mma::kTileK;
  using LayoutSrcTV = decltype(lift_layout<detail::TiledMmaCopySrcTv<Atom, Mma, Op>>());

  template <class L, class Thr>
  CG_HOST_DEVICE static constexpr auto partition_layout(L const& l, Thr const& thr) {
    return detail::partition_tv<kTileR, kTileS>(l, LayoutSrcTV{}, thr);
  }

  // An MMA fragment (V_atom, rows, cols) viewed as (V_instr, rows / f, cols), f = V_instr/V_atom.
  template <class Frag>
  CG_HOST_DEVICE static auto retile(Frag&& frag) {
    constexpr int v_atom = decltype(size<0>(frag))::value;
    constexpr int f = Atom::kValues / v_atom;
    constexpr int rows = decltype(size<1>(frag))::value;
    constexpr int cols = decltype(size<2>(frag))::value;
    static_assert(rows % f == 0, "retile: fragment rows not a multiple of the copy's atoms");
    // The fragment is compact column-major, so the first f atoms of a row block are adjacent.
    return make_tensor(frag.data(), make_layout(make_shape(Int<v_atom * f>{}, Int<rows / f>{},
                                                           Int<cols>{})));
  }
  // CuTe's names: the fragment as the destination (A, B) or the source (C) of the copy.
  template <class Frag>
  CG_HOST_DEVICE static auto retile_D(Frag&& frag) {
    return retile(frag);
  }
  template <class Frag>
  CG_HOST_DEVICE static auto retile_S(Frag&& frag) {
    return retile(frag);
  }
};

template <class Atom, class Mma>
using TiledCopyA = TiledMmaCopy<Atom, Mma, MmaOperand::kA>;  // make_tiled_copy_A
template <class Atom, class Mma>
using TiledCopyB = TiledMmaCopy<Atom, Mma, MmaOperand::kB>;  // make_tiled_copy_B
template <class Atom, class Mma>
using TiledCopyC = TiledMmaCopy<Atom, Mma, MmaOperand::kC>;  // make_tiled_copy_C

// One thread's slice of a tiled copy.
template <class Tiled>
struct ThrCopy {
  int thr_idx;

  template <class TensorT>
  CG_HOST_DEVICE auto partition_S(TensorT const& t) const {
    const int thr = thr_idx;
    return detail::partition_tensor(
        t, [&](auto const& l) { return Tiled::partition_layout(l, thr); });
  }
  template <class TensorT>
  CG_HOST_DEVICE auto partition_D(TensorT const& t) const {
    return partition_S(t);
  }
  // The tile coordinates (row + R * col of a column-major (R, S) tile) of this thread's values, as
  // a layout shaped like its partitions: what predicates compare against the problem's edges.
  template <class TileShape>
  CG_HOST_DEVICE auto partition_coords(TileShape const& s) const {
    const auto po = Tiled::partition_layout(make_layout(s), thr_idx);
    return make_tuple(get<0>(po), get<1>(po));
  }
};

template <class Tiled>
CG_HOST_DEVICE ThrCopy<Tiled> get_thread_copy(Tiled const&, int thr_idx) {
  return ThrCopy<Tiled>{thr_idx};
}

// ------------------------------------------------------------------------------------------------
// Running the instructions. Each (i, j) of the partitions is one instruction; its V values are
// contiguous in the source (16 bytes), which is what the 16-byte atoms require.

// cp.async with zero-fill predication: pred(i, j) says whether instruction (i, j) reads memory.
template <class Atom, class TS, class TD, class Pred, class... Extra>
CG_DEVICE void copy_if(Atom const&, Pred const& pred, TS const& src, TD& dst, Extra... extra) {
  constexpr int R = decltype(size<1>(src))::value;
  constexpr int S = decltype(size<2>(src))::value;
  CG_PRAGMA_UNROLL
  for (int i = 0; i < R; ++i) {
    CG_PRAGMA_UNROLL
    for (int j = 0; j < S; ++j) {
      Atom::Op::copy(*reinterpret_cast<uint128_t const*>(&src(0, i, j)),
                     *reinterpret_cast<uint128_t*>(&dst(0, i, j)), pred(i, j), extra...);
    }
  }
}

// ldmatrix into MMA fragments: src from a TiledMmaCopy partition, dst its retile() of the
// fragment; only column block j (a k-step) when j >= 0, all of them otherwise.
template <class Atom, class TS, class TD>
CG_DEVICE void copy_ldsm(Atom const&, TS const& src, TD&& dst, int j) {
  constexpr int R = decltype(size<1>(src))::value;
  CG_PRAGMA_UNROLL
  for (int i = 0; i < R; ++i) {
    uint32_t* d = reinterpret_cast<uint32_t*>(&dst(0, i, j));
    Atom::Op::copy(*reinterpret_cast<uint128_t const*>(&src(0, i, j)), d[0], d[1], d[2], d[3]);
  }
}

// Registers -> shared memory for MMA accumulators: src a retile_S()'d fragment (V, rows, cols),
// dst the TiledCopyC partition of the buffer. Each instruction stores its pairs of values.
template <class Atom, class TS, class TD>
CG_HOST_DEVICE void copy_r2s(Atom const&, TS const& src, TD&& dst) {
  constexpr int R = decltype(size<1>(src))::value;
  constexpr int S = decltype(size<2>(src))::value;
  CG_PRAGMA_UNROLL
  for (int i = 0; i < R; ++i) {
    CG_PRAGMA_UNROLL
    for (int j = 0; j < S; ++j) Atom::Op::copy(&src(0, i, j), &dst(0, i, j), &dst(2, i, j));
  }
}

}  // namespace cute_gemm
