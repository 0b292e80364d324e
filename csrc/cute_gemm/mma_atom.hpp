#pragma once
// MMA atoms and tiled MMAs.
//
//   MMA_Atom<Op>      one warp-level instruction with its traits (fragment layouts)
//   TiledMMA<...>     the atom replicated over a grid of warps and repeated over a tile, with an
//                     optional permutation of the tile's rows/columns (CuTe's permutation Tile)
//   ThrMMA            one thread's view: partition_A/B/C of a tile, and register fragments
//   gemm(mma, D, A, B, k)   every atom of a thread's fragments for k-step k, D += A * B
//
// The TV layouts come from tiled_mma_tv (tv_layout.hpp), evaluated at compile time and lifted into
// static layouts, so a thread's fragment offsets are constants in the generated code.

#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/layout_algebra.hpp"
#include "cute_gemm/mma_traits_sm80.hpp"
#include "cute_gemm/tensor.hpp"
#include "cute_gemm/tv_layout.hpp"

namespace cute_gemm {

template <class Op>
struct MMA_Atom : MMA_Traits<Op> {
  using Traits = MMA_Traits<Op>;
  static constexpr int kM = decltype(size<0>(typename Traits::Shape_MNK{}))::value;
  static constexpr int kN = decltype(size<1>(typename Traits::Shape_MNK{}))::value;
  static constexpr int kK = decltype(size<2>(typename Traits::Shape_MNK{}))::value;
  static constexpr int kThreads = decltype(size(typename Traits::ThrID{}))::value;

  // D = A * B + C on one atom's fragments: tensors of kValuesA/B/C contiguous elements.
  // 16-bit operands go to the instruction as packed 32-bit registers.
  template <class TD, class TA, class TB, class TC>
  CG_DEVICE static void call(TD&& d, TA const& a, TB const& b, TC const& c) {
    uint32_t const* ra = reinterpret_cast<uint32_t const*>(&a(0));
    uint32_t const* rb = reinterpret_cast<uint32_t const*>(&b(0));
    Op::fma(d(0), d(1), d(2), d(3), ra[0], ra[1], ra[2], ra[3], rb[0], rb[1], c(0), c(1), c(2),
            c(3));
  }
};

namespace detail {
// Compile-time constant holders for the lifted TV layouts.
template <class Atom, int WarpsM, int WarpsN, class PermR, class PermS, MmaOperand Op>
struct TiledMmaTv {
  static constexpr DynLayout value = tiled_mma_tv(
      Op == MmaOperand::kA   ? to_dyn(typename Atom::ALayout{})
      : Op == MmaOperand::kB ? to_dyn(typename Atom::BLayout{})
                             : to_dyn(typename Atom::CLayout{}),
      Op == MmaOperand::kB ? Atom::kN : Atom::kM, Op == MmaOperand::kC ? Atom::kN : Atom::kK,
      WarpsM, WarpsN, to_dyn(PermR{}), to_dyn(PermS{}), Op);
};
}  // namespace detail

// TiledMMA<Atom, WarpsM, WarpsN, PermM, PermN, PermK>: WarpsM x WarpsN warps, each running `Atom`;
// the tile is size(PermM) x size(PermN) x size(PermK). PermX are layouts over the tile's rows /
// columns / depth (compact n:1 for "no permutation").
// Example: the seed's 32x32x16 tile of 2x2 warps with a 16x8x16 atom:
//   TiledMMA<MMA_Atom<SM80_16x8x16_F32F16F16F32_TN>, 2, 2, Layout<_32>,
//            Layout<Shape<_8,_2,_2>, Stride<_1,_16,_8>>, Layout<_16>>
// where the N permutation puts each warp's two n8 atoms side by side.
template <class Atom, int WarpsM, int WarpsN, class PermM, class PermN, class PermK>
struct TiledMMA {
  using AtomType = Atom;
  static constexpr int kWarpsM = WarpsM;
  static constexpr int kWarpsN = WarpsN;
  static constexpr int kThreads = Atom::kThreads * WarpsM * WarpsN;
  static constexpr int kTileM = decltype(size(PermM{}))::value;
  static constexpr int kTileN = decltype(size(PermN{}))::value;
  static constexpr int kTileK = decltype(size(PermK{}))::value;

  // (Thr, Val) -> tile index, per operand. Threads: (T_atom, WM, WN); values (V_atom, rep_r, rep_s).
  using LayoutA_TV =
      decltype(lift_layout<detail::TiledMmaTv<Atom, WarpsM, WarpsN, PermM, PermK, MmaOperand::kA>>());
  using LayoutB_TV =
      decltype(lift_layout<detail::TiledMmaTv<Atom, WarpsM, WarpsN, PermN, PermK, MmaOperand::kB>>());
  using LayoutC_TV =
      decltype(lift_layout<detail::TiledMmaTv<Atom, WarpsM, WarpsN, PermM, PermN, MmaOperand::kC>>());

  CG_HOST_DEVICE static constexpr auto get_layoutA_TV() { return LayoutA_TV{}; }
  CG_HOST_DEVICE static constexpr auto get_layoutB_TV() { return LayoutB_TV{}; }
  CG_HOST_DEVICE static constexpr auto get_layoutC_TV() { return LayoutC_TV{}; }
  CG_HOST_DEVICE static constexpr auto tile_mnk() {
    return make_shape(Int<kTileM>{}, Int<kTileN>{}, Int<kTileK>{});
  }
};

namespace detail {
// One thread's part of a tile of shape (R, S) (a multiple of the TV layout's tile (TR, TS)):
// (V_atom, (rep_r, rest_r), (rep_s, rest_s)) as a layout over the tile's own layout `l`, plus the
// thread's offset.
template <int TR, int TS, class TV, class L, class Thr>
CG_HOST_DEVICE constexpr auto partition_tv(L const& l, TV const& tv, Thr const& thr) {
  const auto tiled = zipped_divide(l, make_shape(Int<TR>{}, Int<TS>{}));  // ((TR,TS),(RR,RS))
  const auto tv_in_tile = composition(layout<0>(tiled), tv);             // ((T),(V, rr, rs))
  const auto so = slice_and_offset(make_coord(thr, _), tv_in_tile);
  const auto v = get<0>(so);
  const auto rest = layout<1>(tiled);  // (RR, RS) or (RR, RS, stages) for a staged buffer
  const auto rows = make_layout(layout<1>(v), layout<0>(rest));
  const auto cols = make_layout(layout<2>(v), layout<1>(rest));
  if constexpr (decltype(rank(rest))::value == 3) {
    return make_tuple(make_layout(layout<0>(v), rows, cols, layout<2>(rest)), get<1>(so));
  } else {
    return make_tuple(make_layout(layout<0>(v), rows, cols), get<1>(so));
  }
}
}  // namespace detail

namespace detail {
// Applies a partitioning function (layout -> (layout, offset)) to a tensor. A swizzled tensor
// (ComposedLayout) is partitioned through its inner layout: the thread's offset moves inside the
// swizzle, since swizzle(o + inner(c)) with inner(c) = off + part(y) is swizzle((o + off) + part(y)).
template <class TensorT, class F>
CG_HOST_DEVICE auto partition_tensor(TensorT const& t, F&& f) {
  const auto l = t.layout();
  if constexpr (is_composed_layout<std::decay_t<decltype(l)>>::value) {
    const auto po = f(l.layout_b());
    return make_tensor(t.data(),
                       make_composed_layout(l.layout_a(), l.offset() + get<1>(po), get<0>(po)));
  } else {
    const auto po = f(l);
    return make_tensor(t.data() + get<1>(po), get<0>(po));
  }
}
}  // namespace detail

// One thread's slice of a TiledMMA.
template <class Tiled>
struct ThrMMA {
  int thr_idx;

  // Views of this thread's elements of a (M, K) / (N, K) / (M, N) tile, shaped
  // (V_atom, MMA_rows, MMA_cols) so gemm() can walk atoms with two integers.
  template <class TensorT>
  CG_HOST_DEVICE auto partition_A(TensorT const& t) const {
    return partition<Tiled::kTileM, Tiled::kTileK>(t, typename Tiled::LayoutA_TV{});
  }
  template <class TensorT>
  CG_HOST_DEVICE auto partition_B(TensorT const& t) const {
    return partition<Tiled::kTileN, Tiled::kTileK>(t, typename Tiled::LayoutB_TV{});
  }
  template <class TensorT>
  CG_HOST_DEVICE auto partition_C(TensorT const& t) const {
    return partition<Tiled::kTileM, Tiled::kTileN>(t, typename Tiled::LayoutC_TV{});
  }

  // Tile coordinates (row + M * col of a column-major (M, N) tile) of this thread's accumulators,
  // as (layout shaped like partition_C, offset): what epilogues compare against the edges.
  template <class TileShape>
  CG_HOST_DEVICE auto partition_coords_C(TileShape const& s) const {
    return detail::partition_tv<Tiled::kTileM, Tiled::kTileN>(make_layout(s),
                                                              typename Tiled::LayoutC_TV{}, thr_idx);
  }

  // Register fragments shaped like the partitions of a tile of the given static shape.
  template <class T, class TileShape>
  CG_HOST_DEVICE static auto partition_fragment_A(TileShape const& s) {
    return fragment<T, Tiled::kTileM, Tiled::kTileK>(s, typename Tiled::LayoutA_TV{});
  }
  template <class T, class TileShape>
  CG_HOST_DEVICE static auto partition_fragment_B(TileShape const& s) {
    return fragment<T, Tiled::kTileN, Tiled::kTileK>(s, typename Tiled::LayoutB_TV{});
  }
  template <class T, class TileShape>
  CG_HOST_DEVICE static auto partition_fragment_C(TileShape const& s) {
    return fragment<T, Tiled::kTileM, Tiled::kTileN>(s, typename Tiled::LayoutC_TV{});
  }

 private:
  template <int TR, int TS, class TensorT, class TV>
  CG_HOST_DEVICE auto partition(TensorT const& t, TV const& tv) const {
    const int thr = thr_idx;
    return detail::partition_tensor(
        t, [&](auto const& l) { return detail::partition_tv<TR, TS>(l, tv, thr); });
  }
  template <class T, int TR, int TS, class TileShape, class TV>
  CG_HOST_DEVICE static auto fragment(TileShape const& s, TV const& tv) {
    // Thread 0's partition of a compact tile has the shape every thread's fragment has.
    const auto po = detail::partition_tv<TR, TS>(make_layout(s), tv, Int<0>{});
    return make_tensor<T>(make_layout(shape(get<0>(po))));
  }
};

template <class Tiled>
CG_HOST_DEVICE ThrMMA<Tiled> get_thread_slice(Tiled const&, int thr_idx) {
  return ThrMMA<Tiled>{thr_idx};
}

// D += A * B over a thread's fragments for k-step k: D (V_c, M, N); A (V_a, M, K); B (V_b, N, K).
// N serpentine so each row of atoms starts on the B fragment the previous row ended with.
template <class Tiled, class TD, class TA, class TB>
CG_DEVICE void gemm(Tiled const&, TD& d, TA const& a, TB const& b, int k) {
  using Atom = typename Tiled::AtomType;
  constexpr int M = decltype(size<1>(d))::value;
  constexpr int N = decltype(size<2>(d))::value;
  CG_PRAGMA_UNROLL
  for (int m = 0; m < M; ++m) {
    CG_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) {
      const int n = (m & 1) ? N - 1 - i : i;
      Atom::call(d(_, m, n), a(_, m, k), b(_, n, k), d(_, m, n));
    }
  }
}

}  // namespace cute_gemm
