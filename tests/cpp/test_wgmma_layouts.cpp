// The layouts of the sm_90a wgmma instructions (cute_gemm/mma_traits_sm90.hpp), the descriptor
// derived from a shared-memory layout (cute_gemm/wgmma_desc.hpp, arch/wgmma_desc_sm90.hpp) and
// the row / column layouts of a TV map (cute_gemm/tv_coords.hpp), checked against the PTX ISA:
//   - the 128-byte swizzle: within each 1024-byte atom of 8 rows x 128 bytes, the 16-byte chunk c
//     of row r is stored at chunk c ^ (r % 8);
//   - the descriptor's fields, and its byte offsets against the layout's core matrices;
//   - the register fragments of wgmma.mma_async m64nNk16 (A from registers, f32 accumulators).
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cute_gemm/mma_traits_sm80.hpp"
#include "cute_gemm/mma_traits_sm90.hpp"
#include "cute_gemm/tv_coords.hpp"
#include "cute_gemm/wgmma_desc.hpp"

using namespace cute_gemm;

static int failures = 0;
#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      if (failures++ < 10) std::printf(__VA_ARGS__);         \
    }                                                        \
  } while (0)

// Byte offset of element (r, k) of a (rows, K) K-major tile in the 128-byte swizzle, written
// from the PTX description (not from the layout algebra).
static int sw128_byte(int rows, int r, int k) {
  const int atom = k / 64, chunk = (k % 64) / 8, within = (k % 8) * 2;
  return atom * rows * 128 + r * 128 + ((chunk ^ (r % 8)) * 16) + within;
}

template <int Rows, int K>
static void check_tile() {
  const auto layout = Sw128KMajor<Rows, K>{};
  std::vector<int> hits(Rows * K, 0);
  for (int r = 0; r < Rows; ++r) {
    for (int k = 0; k < K; ++k) {
      const int off = int(layout(r, k));
      CHECK(off * 2 == sw128_byte(Rows, r, k), "(%d, %d) of %dx%d: offset %d, want byte %d\n", r,
            k, Rows, K, off, sw128_byte(Rows, r, k));
      if (off >= 0 && off < Rows * K) ++hits[off];
    }
  }
  // A bijection onto [0, Rows * K): every element of the tile has its own slot.
  for (int i = 0; i < Rows * K; ++i) CHECK(hits[i] == 1, "slot %d hit %d times\n", i, hits[i]);
  // Every 8 rows start a 1024-byte swizzle atom, and lines along K are Rows * 128 bytes apart.
  for (int r = 0; r < Rows; r += 8) {
    CHECK(int(layout(r, 0)) * 2 == r * 128, "8-row atom %d at %d\n", r, int(layout(r, 0)) * 2);
  }
  // The descriptor's byte offsets are the layout's: before the swizzle (the inner layout), the
  // core matrix (8 rows x 16 bytes) of rows 8i.. and 16-byte unit u of line l starts at
  // i * stride bytes + u * leading bytes + the line's offset, and a k16 step j starts at
  // L(0, 16 j), the line's start plus 32 (j % 4) bytes.
  using Desc = WgmmaDesc<Sw128KMajor<Rows, K>>;
  const auto inner = layout.layout_b();
  for (int r = 0; r < Rows; ++r) {
    for (int k = 0; k < K; ++k) {
      const int line = k / 64, u = (k % 64) / 8;
      const int want = (r / 8) * int(Desc::kStrideBytes) + (r % 8) * 128 +
                       u * int(Desc::kLeadingBytes) + (k % 8) * 2 + int(inner(0, 64 * line)) * 2;
      CHECK(int(inner(r, k)) * 2 == want, "core matrix of (%d, %d) of %dx%d\n", r, k, Rows, K);
    }
  }
  for (int j = 0; j < K / 16; ++j) {
    CHECK(int(layout(0, 16 * j)) * 2 == (j / 4) * Rows * 128 + (j % 4) * 32, "k16 step %d\n", j);
  }
}

// tile_row_layout / tile_col_layout split a TV layout into the row and the column of its tile.
static void check_tile_coord() {
  using C = MMA_Traits_16x8x16_Layouts::CLayout;  // (T32, V4) -> (M16, N8)
  const auto rows = tile_row_layout<16>(C{});
  const auto cols = tile_col_layout<16>(C{});
  static_assert(std::is_same<decltype(rows), decltype(make_layout(
                    Shape<Shape<_4, _8>, Shape<_2, _2>>{},
                    Stride<Stride<_0, _1>, Stride<_0, _8>>{})) const>::value,
                "the example of tv_coords.hpp");
  for (int t = 0; t < 32; ++t) {
    for (int v = 0; v < 4; ++v) {
      const int idx = int(C{}(t, v));
      CHECK(int(rows(t, v)) == idx % 16 && int(cols(t, v)) == idx / 16, "tv_coords (%d, %d)\n",
            t, v);
      // The PTX figure: row g + 8 (v / 2), column 2 t + v % 2.
      CHECK(int(rows(t, v)) == t / 4 + 8 * (v / 2) && int(cols(t, v)) == 2 * (t % 4) + v % 2,
            "m16n8 C (%d, %d)\n", t, v);
    }
  }
}

// The wgmma fragments against the PTX ISA's figures: thread 32 w + 4 g + t, value i holds
// A: row 16 w + g + 8 (i / 2 % 2), column 2 t + i % 2 + 8 (i / 4) of (M64, K16);
// C: row 16 w + g + 8 (i / 2 % 2), column 8 (i / 4) + 2 t + i % 2 of (M64, N).
template <int N>
static void check_wgmma_fragments() {
  using L = Wgmma64xNx16Layouts<N>;
  std::vector<int> a_hits(64 * 16, 0), c_hits(64 * N, 0);
  for (int thr = 0; thr < 128; ++thr) {
    const int w = thr / 32, g = (thr % 32) / 4, t = thr % 4;
    for (int i = 0; i < 8; ++i) {
      const int idx = int(typename L::ALayout{}(thr, i));
      const int m = 16 * w + g + 8 * (i / 2 % 2), k = 2 * t + i % 2 + 8 * (i / 4);
      CHECK(idx == m + 64 * k, "A of thread %d value %d: %d\n", thr, i, idx);
      if (idx >= 0 && idx < 64 * 16) ++a_hits[idx];
    }
    for (int i = 0; i < N / 2; ++i) {
      const int idx = int(typename L::CLayout{}(thr, i));
      const int m = 16 * w + g + 8 * (i / 2 % 2), n = 8 * (i / 4) + 2 * t + i % 2;
      CHECK(idx == m + 64 * n, "C<%d> of thread %d value %d: %d\n", N, thr, i, idx);
      if (idx >= 0 && idx < 64 * N) ++c_hits[idx];
    }
  }
  for (int h : a_hits) CHECK(h == 1, "A element held %d times\n", h);
  for (int h : c_hits) CHECK(h == 1, "C<%d> element held %d times\n", N, h);
}

int main() {
  check_tile<8, 64>();
  check_tile<8, 128>();
  check_tile<16, 128>();
  check_tile<32, 64>();
  check_tile<64, 128>();
  check_tile<128, 128>();
  check_tile<256, 64>();
  static_assert(Sw128KMajor<8, 128>{}(3, 70) == 734, "the worked example in mma_traits_sm90.hpp");
  check_tile_coord();
  check_wgmma_fragments<8>();
  check_wgmma_fragments<32>();
  check_wgmma_fragments<64>();
  check_wgmma_fragments<128>();
  check_wgmma_fragments<256>();

  // Descriptor fields: start >> 4 in bits 0-13, leading byte offset 16 B (1) in 16-29, stride
  // byte offset 1024 B (64) in 32-45, base offset 0, swizzle mode 1 (128 B) in 62-63.
  using Desc = WgmmaDesc<Sw128KMajor<64, 128>>;
  static_assert(Desc::kLeadingBytes == 16 && Desc::kStrideBytes == 1024, "the layout's offsets");
  static_assert(Desc::make(0x4400) == 0x4000004000010440ull, "the worked example");
  static_assert(Desc::make(0x4400) + (64 >> 4) == 0x4000004000010444ull, "its k16 step 2");
  static_assert(make_wgmma_desc(0x4440, 16, 1024, WgmmaSwizzle::k128B) == 0x4000004000010444ull,
                "the encoding's example");
  for (uint32_t addr = 0; addr < 228 * 1024; addr += 16) {
    const uint64_t d = make_wgmma_desc(addr, 16, 1024, WgmmaSwizzle::k128B);
    CHECK((d & 0x3FFF) == addr >> 4, "start of %u\n", addr);
    CHECK(((d >> 16) & 0x3FFF) == 1 && ((d >> 32) & 0x3FFF) == 64, "offsets of %u\n", addr);
    CHECK(((d >> 49) & 7) == 0 && (d >> 62) == 1, "mode of %u\n", addr);
    CHECK(((d >> 14) & 3) == 0 && ((d >> 30) & 3) == 0 && ((d >> 46) & 7) == 0,
          "unused bits of %u\n", addr);
    // Advancing the start address by k16 steps (32 bytes) adds 2 to the encoded field, as the
    // kernels' desc0 + (offset >> 4) does; it never carries out of the 14-bit field below 256 KB.
    if (addr % 1024 == 0) {
      CHECK(Desc::make(addr) == d, "derived descriptor at %u\n", addr);
      CHECK(Desc::make(addr) + 6 == make_wgmma_desc(addr + 96, 16, 1024, WgmmaSwizzle::k128B),
            "k step advance at %u\n", addr);
    }
  }
  if (failures) std::printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
