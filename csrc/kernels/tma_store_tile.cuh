#pragma once
// The end of a TMA-store epilogue, shared by the warp-specialized kernels (the dense wgmma GEMM
// and the mixed one): an output tile staged in shared memory as 64-column slabs, (rows, 64) each
// with the 128-byte swizzle, slab b at tile + b * slab_bytes, each one box of the output's tensor
// map (kernels/tma_map.hpp's encode_k_major_sw128_map with box rows = the tile's rows).

#include "cute_gemm/arch/mma_sm90.hpp"  // fence_proxy_async_shared
#include "cute_gemm/arch/named_barrier.hpp"
#include "cute_gemm/arch/tma_sm90.hpp"

namespace cute_gemm {

// Called by all `Threads` consumer threads once each has written its part of the tile: makes the
// writes visible to the TMA, meets at named barrier 1, then thread 0 stores slab b as box
// (x0 + 64 b, y0) of `map`, skipping slabs wholly past column n (the TMA clips the rest), and
// waits until the TMA has read shared memory, so the tile stays valid until the CTA may exit.
template <int Threads, int Slabs>
CG_DEVICE void tma_store_tile_slabs(int tid, CUtensorMap const* map, char const* tile,
                                    int slab_bytes, int x0, int y0, int n) {
  fence_proxy_async_shared();  // the tile is read by the async proxy (the TMA)
  named_barrier_sync<1, Threads>();
  if (tid != 0) return;
  CG_PRAGMA_UNROLL
  for (int b = 0; b < Slabs; ++b) {
    if (x0 + 64 * b < n) tma_store_2d(map, tile + b * slab_bytes, x0 + 64 * b, y0);
  }
  tma_store_commit();
  tma_store_wait_read<0>();
}

}  // namespace cute_gemm
