// The shared-memory layout and descriptor encoding of the Hopper wgmma kernel's activation tiles
// (cute_gemm/mma_traits_sm90.hpp, cute_gemm/arch/wgmma_desc_sm90.hpp), checked against the PTX
// ISA's description of the 128-byte swizzle: within each 1024-byte atom of 8 rows x 128 bytes,
// the 16-byte chunk c of row r is stored at chunk c ^ (r % 8).
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cute_gemm/arch/wgmma_desc_sm90.hpp"
#include "cute_gemm/mma_traits_sm90.hpp"
#include "cute_gemm/wgmma_desc.hpp"

using namespace cute_gemm;

// The descriptor of a K-major 128-byte-swizzled tile, derived from its layout (wgmma_desc.hpp).
static constexpr uint64_t make_wgmma_desc_sw128(uint32_t addr) {
  return make_wgmma_desc(Sw128KMajor<64, 64>{}, addr);
}

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
  // Every row of every atom starts 1024-byte-atom aligned: the 8-row groups are 1024 bytes apart
  // (the descriptor's stride byte offset) and atoms along K are Rows * 128 bytes apart.
  for (int r = 0; r < Rows; r += 8) {
    CHECK(int(layout(r, 0)) * 2 == r * 128, "row group %d at %d\n", r, int(layout(r, 0)) * 2);
  }
}

int main() {
  check_tile<8, 64>();
  check_tile<8, 128>();
  check_tile<16, 128>();
  check_tile<32, 64>();
  check_tile<64, 128>();
  check_tile<128, 128>();
  static_assert(Sw128KMajor<8, 128>{}(3, 70) == 734, "the worked example in mma_traits_sm90.hpp");

  // Descriptor fields: start >> 4 in bits 0-13, leading byte offset 16 B (1) in 16-29, stride
  // byte offset 1024 B (64) in 32-45, base offset 0, swizzle mode 1 (128 B) in 62-63.
  static_assert(make_wgmma_desc_sw128(0x4440) == 0x4000004000010444ull, "the worked example");
  for (uint32_t addr = 0; addr < 228 * 1024; addr += 16) {
    const uint64_t d = make_wgmma_desc_sw128(addr);
    CHECK((d & 0x3FFF) == addr >> 4, "start of %u\n", addr);
    CHECK(((d >> 16) & 0x3FFF) == 1 && ((d >> 32) & 0x3FFF) == 64, "offsets of %u\n", addr);
    CHECK(((d >> 49) & 7) == 0 && (d >> 62) == 1, "mode of %u\n", addr);
    CHECK(((d >> 14) & 3) == 0 && ((d >> 30) & 3) == 0 && ((d >> 46) & 7) == 0,
          "unused bits of %u\n", addr);
    // Advancing the start address by k16 steps (32 bytes) adds 2 to the encoded field, as the
    // kernel's desc0 + (offset >> 4) does; it never carries out of the 14-bit field below 256 KB.
    if (addr % 1024 == 0) {
      CHECK(make_wgmma_desc_sw128(addr + 96) == d + 6, "k step advance at %u\n", addr);
    }
  }
  if (failures) std::printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
