// Host checks of the row and column layouts of TV layouts (cute_gemm/tv_coords.hpp), the one
// helper the kernels use to find the tile element of a (thread, value):
//   - for every (t, v) of the A, B and C layouts of each MMA's traits (m16n8k16, wgmma m64nNk16)
//     and of the tiled MMAs and copies the mixed kernels index through, tile_row_layout and
//     tile_col_layout are the TV index divided by the tile's rows (remainder and quotient), at a
//     flat (t, v) and at the layout's hierarchical coordinate, and tile_coord is the pair;
//   - they keep the TV layout's shape and agree with composing the projections (R, S):(1, 0) and
//     (R, S):(0, 1) with the TV layout (the form the mma.sync and dequantize kernels used before):
//     the very same types, so the same code, but for the unused strides of size-1 leaves;
//   - the run-time form refuses a stride that moves both the row and the column, and row leaves
//     that reach past the tile.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cute_gemm/mma_atom.hpp"
#include "cute_gemm/mma_traits_sm90.hpp"
#include "cute_gemm/tv_coords.hpp"
#include "host_check.hpp"
#include "kernels/mixed/mixed_decode_config.hpp"
#include "kernels/mixed/mixed_mma_config.hpp"

using namespace cute_gemm;

// The projection of an (R, S) tile's column-major index onto its row (Col = false) or column.
template <int R, int S, bool Col>
using Projection =
    Layout<Shape<Int<R>, Int<S>>, std::conditional_t<Col, Stride<_0, _1>, Stride<_1, _0>>>;

// Whether a static layout has a leaf of size 1, whose stride composition sets to 0 where
// tile_coord_layout keeps d % R or d / R (never used: its coordinate is always 0).
template <class L>
constexpr bool has_unit_leaf() {
  const DynLayout d = to_dyn(L{});
  for (int i = 0; i < d.shape.n; ++i)
    if (d.shape.kind[i] == DynTuple::kLeaf && d.shape.value[i] == 1) return true;
  return false;
}

// TV over an (R, S) tile: the checks above at every (t, v); returns the number of values checked.
template <int R, int S, class TV>
long check_tv(char const* name) {
  using Rows = decltype(tile_row_layout<R>(TV{}));
  using Cols = decltype(tile_col_layout<R>(TV{}));
  using ProjRows = decltype(composition(Projection<R, S, false>{}, TV{}));
  using ProjCols = decltype(composition(Projection<R, S, true>{}, TV{}));
  static_assert(has_unit_leaf<TV>() || std::is_same<Rows, ProjRows>::value,
                "tile_row_layout is the row projection composed with the TV layout");
  static_assert(has_unit_leaf<TV>() || std::is_same<Cols, ProjCols>::value,
                "tile_col_layout is the column projection composed with the TV layout");
  static_assert(std::is_same<decltype(shape(Rows{})), decltype(shape(TV{}))>::value &&
                    std::is_same<decltype(shape(Cols{})), decltype(shape(TV{}))>::value,
                "the row and column layouts keep the TV layout's shape");
  const auto tv = TV{};
  const int threads = int(size<0>(tv)), values = int(size<1>(tv));
  long checked = 0;
  for (int t = 0; t < threads; ++t) {
    const auto thr = idx2crd(t, shape<0>(tv));
    for (int v = 0; v < values; ++v) {
      const long idx = long(tv(t, v));
      const long row = long(Rows{}(t, v)), col = long(Cols{}(t, v));
      CHECK(idx >= 0 && idx < long(R) * S, "%s: (%d, %d) -> %ld outside the tile", name, t, v,
            idx);
      CHECK(row == idx % R && col == idx / R, "%s: (%d, %d) -> %ld is not (%ld, %ld)", name, t, v,
            idx, row, col);
      CHECK(long(ProjRows{}(t, v)) == row && long(ProjCols{}(t, v)) == col,
            "%s: (%d, %d) differs from the projections", name, t, v);
      const auto val = idx2crd(v, shape<1>(tv));
      const auto rc = tile_coord<R>(tv, thr, val);
      CHECK(long(get<0>(rc)) == row && long(get<1>(rc)) == col,
            "%s: tile_coord at the hierarchical coordinate of (%d, %d)", name, t, v);
      ++checked;
    }
  }
  return checked;
}

template <int N>
void check_wgmma() {
  using L = Wgmma64xNx16Layouts<N>;
  check_tv<64, 16, typename L::ALayout>("wgmma A");
  check_tv<64, N, typename L::CLayout>("wgmma C");
}

template <class Cfg>
void check_mixed_mma() {
  using Mma = typename Cfg::Mma;
  check_tv<Cfg::kTileM, Cfg::kBlockK, typename Mma::LayoutA_TV>("mma.sync kernel A");
  check_tv<Cfg::kTileN, Cfg::kBlockK, typename Mma::LayoutB_TV>("mma.sync kernel B");
  check_tv<Cfg::kTileM, Cfg::kTileN, typename Mma::LayoutC_TV>("mma.sync kernel C");
  check_tv<32, Cfg::kBlocksPerCta, typename Cfg::WeightTV>("mma.sync kernel weights");
  check_tv<Cfg::kMaxGroups, Cfg::kTileN, typename Cfg::G2SScale::LayoutTV>("scale copy");
  // The config's names for them are these layouts.
  static_assert(
      std::is_same<typename Cfg::AccRows,
                   decltype(tile_row_layout<Cfg::kTileM>(typename Mma::LayoutC_TV{}))>::value &&
          std::is_same<typename Cfg::AccCols,
                       decltype(tile_col_layout<Cfg::kTileM>(typename Mma::LayoutC_TV{}))>::value &&
          std::is_same<typename Cfg::BCols,
                       decltype(tile_row_layout<Cfg::kTileN>(typename Mma::LayoutB_TV{}))>::value,
      "AccRows, AccCols, BCols");
}

template <int Bits>
void check_dequant() {
  using Cfg = mixed::DequantWeightConfig<Bits>;
  using S2G = typename Cfg::S2G;
  check_tv<8, Cfg::kBlockK, typename Cfg::FragTV>("dequantize fragments");
  check_tv<S2G::kTileR, Cfg::kBlockK, typename S2G::LayoutTV>("dequantize write-back");
}

template <class Cfg>
void check_decode() {
  check_tv<Cfg::kWarpN, Cfg::kBlockK, typename Cfg::LayoutA_TV>("decode A");
  check_tv<Cfg::kTileM, Cfg::kBlockK, typename Cfg::LayoutB_TV>("decode B");
  check_tv<Cfg::kWarpN, Cfg::kTileM, typename Cfg::LayoutC_TV>("decode C");
  check_tv<Cfg::kTileM, 32, typename Cfg::CopyB::SrcLayout>("decode ldmatrix source");
}

bool throws_invalid(DynLayout const& tv, int64_t rows, bool col, char const* word) {
  try {
    (void)tile_coord_layout(tv, rows, col);
  } catch (std::invalid_argument const& e) {
    return std::string(e.what()).find(word) != std::string::npos;
  }
  return false;
}

int main() {
  using Sm80 = MMA_Traits_16x8x16_Layouts;
  long n = 0;
  n += check_tv<16, 16, Sm80::ALayout>("m16n8k16 A");
  n += check_tv<8, 16, Sm80::BLayout>("m16n8k16 B");
  n += check_tv<16, 8, Sm80::CLayout>("m16n8k16 C");
  check_wgmma<8>();
  check_wgmma<64>();
  check_wgmma<128>();
  check_wgmma<256>();
  // The header's example: C value 3 of lane 4 g + t = 9 (t = 1, g = 2) is row g + 8 = 10, column
  // 2 t + 1 = 3.
  static_assert(get<0>(tile_coord<16>(Sm80::CLayout{}, make_coord(1, 2), 3)) == 10 &&
                    get<1>(tile_coord<16>(Sm80::CLayout{}, make_coord(1, 2), 3)) == 3,
                "the example of tv_coords.hpp");

  using F16 = SM80_16x8x16_F32F16F16F32_TN;
  using Bf16 = SM80_16x8x16_F32BF16BF16F32_TN;
  check_mixed_mma<mixed::MixedConfig<uint16_t, F16, 4, 1, false>>();
  check_mixed_mma<mixed::MixedConfig<uint16_t, F16, 4, 2, true>>();
  check_mixed_mma<mixed::MixedConfig<uint16_t, Bf16, 8, 4, false>>();
  check_mixed_mma<mixed::MixedConfig<uint16_t, Bf16, 8, 1, true>>();
  check_dequant<4>();
  check_dequant<8>();
  check_decode<mixed::MixedDecodeConfig<uint16_t, F16, 4, false>>();
  check_decode<mixed::MixedDecodeConfig<uint16_t, Bf16, 8, true>>();

  // Run time: (4,2):(1,6) over 4 rows moves row and column together in its second leaf; (4,2):(1,2)
  // reaches row 1 * 3 + 2 = 5 of 4.
  const DynLayout both = make_dyn_layout(make_dyn_pair(make_dyn_int(4), make_dyn_int(2)),
                                         make_dyn_pair(make_dyn_int(1), make_dyn_int(6)));
  const DynLayout over = make_dyn_layout(make_dyn_pair(make_dyn_int(4), make_dyn_int(2)),
                                         make_dyn_pair(make_dyn_int(1), make_dyn_int(2)));
  CHECK(throws_invalid(both, 4, false, "moves both"), "a stride moving row and column");
  CHECK(throws_invalid(over, 4, true, "reach"), "row leaves past the tile");
  const DynLayout ok = make_dyn_layout(make_dyn_pair(make_dyn_int(4), make_dyn_int(2)),
                                       make_dyn_pair(make_dyn_int(1), make_dyn_int(8)));
  CHECK(tile_coord_layout(ok, 4, true) ==
            make_dyn_layout(make_dyn_pair(make_dyn_int(4), make_dyn_int(2)),
                            make_dyn_pair(make_dyn_int(0), make_dyn_int(2))),
        "(4,2):(1,8) over 4 rows: columns (4,2):(0,2)");

  if (failures) {
    std::printf("%d failures\n", failures);
    return 1;
  }
  std::printf("tv_coords: %ld MMA atom values and every kernel TV layout checked\n", n);
  return 0;
}
