// Host checks of the decode attention kernel's layouts, lane maps and split rule
// (kernels/attention/decode_attention_config.hpp), for each head-dim class (64, 128, 256):
//   - the swizzled 16-row block (SmemRows) is a bijection onto [0, 16 * D) that keeps each 16-byte
//     chunk contiguous, and the lanes' cp.async chunks cover a tile once;
//   - ldmatrix, simulated on that block from the kernel's lane maps, hands every lane exactly the
//     mma.sync m16n8k16 operand elements the atom's traits say it holds: Q as A, K as B (plain),
//     V as B (.trans), and no ldmatrix phase has a bank conflict;
//   - P's A fragment is S's accumulators in the kernel's register order;
//   - the mask lanes cover 16 rows x 16 heads once, the warps' tiles cover a split once, the
//     partial outputs fit the rings;
//   - the split rule's shares of positions cover [0, L) once, none is empty, there are no more
//     splits than kMinSplitRows pieces of L, a cluster never exceeds kMaxSplits, and no split is
//     made where the grid already fills the SMs.
#include <cstdio>
#include <vector>

#include "host_check.hpp"
#include "kernels/attention/decode_attention_config.hpp"

using namespace cute_gemm;
using namespace cute_gemm::attention;
using Cfg = DecodeAttentionConfig;
using Traits = MMA_Traits_16x8x16_Layouts;

// An element's identity in the simulated block: its (row, d).
static long id_of(int row, int d) { return long(row) * 1000 + d; }

// ldmatrix.x4 on a block holding id_of(row, d) at SmemRows(row, d): lanes 8m .. 8m + 7 give the
// rows of matrix m (the element offsets in addr); lane L receives, for register m, two elements:
// plain, row L / 4 of matrix m at columns 2 (L % 4), + 1; .trans, column L / 4 at rows 2 (L % 4),
// + 1. Returns [lane][register][half].
template <int kDim>
std::vector<long> ldmatrix(std::vector<long> const& block, std::vector<long> const& addr,
                           bool trans) {
  std::vector<long> regs(32 * 4 * 2);
  for (int lane = 0; lane < 32; ++lane) {
    for (int m = 0; m < 4; ++m) {
      for (int e = 0; e < 2; ++e) {
        const long at = trans ? addr[8 * m + 2 * (lane % 4) + e] + lane / 4
                              : addr[8 * m + lane / 4] + 2 * (lane % 4) + e;
        regs[(lane * 4 + m) * 2 + e] = block[at];
      }
    }
  }
  return regs;
}

template <int kDim>
void check_tile(char const* name) {
  using Tile = DecodeAttentionTile<kDim>;
  const typename Tile::SmemRows rows{};
  const int R = Cfg::kTileRows;

  // The block: a bijection, chunks contiguous.
  std::vector<long> offsets, block(R * kDim, -1);
  bool chunks_whole = true;
  for (int r = 0; r < R; ++r) {
    for (int d = 0; d < kDim; ++d) {
      const long o = long(rows(r, d));
      offsets.push_back(o);
      if (o >= 0 && o < R * kDim) block[o] = id_of(r, d);
      if (d % Cfg::kVec != 0) chunks_whole &= o == long(rows(r, d - d % Cfg::kVec)) + d % 8;
    }
  }
  CHECK(bijective(offsets, R * kDim), "%s: SmemRows is not a bijection onto the block", name);
  CHECK(chunks_whole, "%s: a 16-byte chunk is not contiguous in SmemRows", name);
  CHECK(Tile::kSmemBytes <= 227 * 1024, "%s: %d bytes of shared memory", name, Tile::kSmemBytes);

  // cp.async: (lane, c) -> (copy_row, copy_d) covers the tile's chunks once.
  std::vector<long> copied;
  for (int lane = 0; lane < 32; ++lane)
    for (int c = 0; c < Tile::kCopiesPerLane; ++c) {
      const int row = Tile::copy_row(lane, c), d = Tile::copy_d(lane);
      CHECK(row < R && d % Cfg::kVec == 0 && d < kDim, "%s: copy (%d, %d) outside the tile", name,
            lane, c);
      copied.push_back(long(row) * Tile::kChunks + d / Cfg::kVec);
    }
  CHECK(bijective(copied, R * Tile::kChunks), "%s: the copies do not cover a tile once", name);

  for (int ks = 0; ks < Tile::kKSteps; ++ks) {
    std::vector<long> q_addr(32), k_addr(32);
    for (int lane = 0; lane < 32; ++lane) {
      q_addr[lane] = long(rows(Cfg::ldsm_rows_first_row(lane),
                               (2 * ks + Cfg::ldsm_rows_first_chunk(lane)) * 8));
      k_addr[lane] = long(rows(Cfg::ldsm_chunks_first_row(lane),
                               (2 * ks + Cfg::ldsm_chunks_first_chunk(lane)) * 8));
    }
    std::vector<long> q_bytes, k_bytes;
    for (int lane = 0; lane < 32; ++lane) {
      q_bytes.push_back(2 * q_addr[lane]);
      k_bytes.push_back(2 * k_addr[lane]);
    }
    CHECK(conflict_free_16B(q_bytes), "%s ks=%d: bank conflict in the rows-first ldmatrix", name,
          ks);
    CHECK(conflict_free_16B(k_bytes), "%s ks=%d: bank conflict in the chunks-first ldmatrix",
          name, ks);

    // Q as A: register m, half e is A value 2m + e: (head, d) = (idx % 16, 16 ks + idx / 16).
    const std::vector<long> qa = ldmatrix<kDim>(block, q_addr, false);
    // K as B of S = Q K^T: n8 tile n gets registers 2n, 2n + 1; B value v = 2 (m % 2) + e is
    // (position n8 index idx % 8, d = idx / 8) of that tile.
    const std::vector<long> kb = ldmatrix<kDim>(block, k_addr, false);
    // V as B of O = P V (.trans, rows-first map, the kernel's column block j = ks): d tile n gets
    // registers 2n, 2n + 1; B value v is (d = 16 ks + 8 n + idx % 8, position idx / 8).
    const std::vector<long> vb = ldmatrix<kDim>(block, q_addr, true);
    for (int lane = 0; lane < 32; ++lane) {
      for (int m = 0; m < 4; ++m) {
        for (int e = 0; e < 2; ++e) {
          const long a_idx = long(Traits::ALayout{}(lane, 2 * m + e));
          CHECK(qa[(lane * 4 + m) * 2 + e] == id_of(a_idx % 16, 16 * ks + a_idx / 16),
                "%s ks=%d lane %d: Q register %d.%d", name, ks, lane, m, e);
          const int n = m / 2, v = 2 * (m % 2) + e;
          const long b_idx = long(Traits::BLayout{}(lane, v));
          CHECK(kb[(lane * 4 + m) * 2 + e] == id_of(8 * n + b_idx % 8, 16 * ks + b_idx / 8),
                "%s ks=%d lane %d: K register %d.%d", name, ks, lane, m, e);
          CHECK(vb[(lane * 4 + m) * 2 + e] == id_of(b_idx / 8, 16 * ks + 8 * n + b_idx % 8),
                "%s ks=%d lane %d: V register %d.%d", name, ks, lane, m, e);
        }
      }
    }
  }

  // The partial outputs: one float per (warp, head, d < D), inside the rings.
  std::vector<long> partial;
  for (int w = 0; w < Cfg::kWarps; ++w)
    for (int h = 0; h < Cfg::kMaxHeads; ++h)
      for (int d = 0; d < kDim; ++d) partial.push_back(Tile::partial_index(w, h, d));
  std::vector<int> hit(Tile::kRingBytes / 4, 0);
  bool inside = true, once = true;
  for (long x : partial) {
    inside &= x >= 0 && x < long(hit.size());
    if (x >= 0 && x < long(hit.size())) once &= hit[x]++ == 0;
  }
  CHECK(inside && once, "%s: the partial outputs overlap or leave the rings", name);

  // The splits' combine, for every head count, head dim of the class and split count: each
  // element pushed by a split lands in its owner's slot once, inside the space past the partial
  // outputs; the owners' elements partition the outputs, and each owner expects as many bytes as
  // it is sent. (The splits' (max, sum) of every head lie inside the queries' place: the tile's
  // static_assert.)
  for (int heads = 1; heads <= Cfg::kMaxHeads; ++heads) {
    for (int dim = kDim / 2 + 8; dim <= kDim; dim += 8) {
      const int total = heads * dim;
      for (int splits = 2; splits <= Cfg::kMaxSplits; ++splits) {
        const int slots = Cfg::combine_slots(total, splits);
        const int room = (Tile::kSmemBytes - Tile::kCombineOutOffset) / 4;
        // slot_hits[owner][index]: what lands in each owner's buffer.
        std::vector<std::vector<int>> slot_hits(splits, std::vector<int>(room, 0));
        std::vector<int> owned(splits, 0);
        bool fits = true, single = true;
        for (int s = 0; s < splits; ++s) {
          for (int k = 0; k * Cfg::kThreads < total; ++k) {  // what split s pushes, block k
            for (int t = 0; t < Cfg::kThreads && k * Cfg::kThreads + t < total; ++t) {
              const int owner = k % splits, at = Cfg::combine_out_index(s, k / splits, t, slots);
              const bool inside = k / splits < slots && at >= 0 && at < room;
              fits &= inside;
              if (inside) single &= slot_hits[owner][at]++ == 0;
              if (s == 0) ++owned[owner];
            }
          }
        }
        // What the owner reads: slot j, thread t of rank r is element (j splits + r) kThreads + t.
        for (int r = 0; r < splits; ++r) {
          int reads = 0;
          for (int j = 0; j < slots; ++j)
            for (int t = 0; t < Cfg::kThreads; ++t)
              reads += (j * splits + r) * Cfg::kThreads + t < total;
          CHECK(reads == owned[r] && owned[r] == Cfg::combine_owned(total, splits, r),
                "%s heads=%d D=%d splits=%d: rank %d owns %d, reads %d, expects %d", name, heads,
                dim, splits, r, owned[r], reads, Cfg::combine_owned(total, splits, r));
        }
        CHECK(fits && single, "%s heads=%d D=%d splits=%d: combine slots overlap or overflow",
              name, heads, dim, splits);
      }
    }
  }
}

int main() {
  check_tile<64>("D64");
  check_tile<128>("D128");
  check_tile<256>("D256");

  for (int d = 8; d <= Cfg::kMaxHeadDim; d += 8) {
    const int c = Cfg::head_dim_class(d);
    CHECK(c >= d && (c == 64 || c / 2 < d), "D=%d: class %d", d, c);
  }

  // The mask instance: per head only where a mask is given and its head stride is not 0 (a mask
  // broadcast over the heads, e.g. a static cache's [B, 1, 1, L], takes the common instance).
  {
    DecodeAttentionParams p;
    CHECK(!mask_per_head(p), "no mask: the per-head instance");
    p.mask_stride[1] = 229;  // a stride without a mask is never read
    CHECK(!mask_per_head(p), "no mask with a head stride: the per-head instance");
    for (MaskKind kind : {MaskKind::kBool, MaskKind::kFloat16, MaskKind::kBFloat16,
                          MaskKind::kFloat32}) {
      p.mask_kind = kind;
      p.mask_stride[1] = 0;
      CHECK(!mask_per_head(p), "mask kind %d broadcast over the heads: per head", int(kind));
      p.mask_stride[1] = 229;
      CHECK(mask_per_head(p), "mask kind %d per head: the common instance", int(kind));
    }
  }

  // P = S's accumulators as the A operand: A value v of a lane is S value (n8 tile v / 4,
  // register v % 4) of the same lane, at (head, position) = (AccHead, 8 n + AccCol).
  for (int lane = 0; lane < 32; ++lane) {
    for (int v = 0; v < 8; ++v) {
      const long a_idx = long(Traits::ALayout{}(lane, v));
      const int c = v % 4, n = v / 4;
      CHECK(a_idx % 16 == long(AccHeadTV{}(lane, c)) &&
                a_idx / 16 == 8 * n + long(AccColTV{}(lane, c)),
            "lane %d: P's A value %d is not S's accumulator", lane, v);
    }
    // The lane's two heads: registers 0, 1 share one, 2, 3 the one 8 below.
    CHECK(AccHeadTV{}(lane, 1) == AccHeadTV{}(lane, 0) &&
              AccHeadTV{}(lane, 2) == AccHeadTV{}(lane, 0) + 8 &&
              AccHeadTV{}(lane, 3) == AccHeadTV{}(lane, 2),
          "lane %d: accumulator heads", lane);
    CHECK(AccColTV{}(lane, 1) == AccColTV{}(lane, 0) + 1, "lane %d: accumulator pairs", lane);
  }

  // Mask lanes: (row, head) over 16 x 16 once.
  std::vector<long> bias_cells;
  for (int lane = 0; lane < 32; ++lane)
    for (int h = 0; h < Cfg::kBiasHeadsPerLane; ++h)
      bias_cells.push_back(long(Cfg::bias_head(lane, h)) * Cfg::kTileRows + Cfg::bias_row(lane));
  CHECK(bijective(bias_cells, Cfg::kMaxHeads * Cfg::kTileRows), "mask lanes: not a bijection");

  // The warps' tiles cover the split's rows once.
  for (int n = 0; n <= 300; ++n) {
    std::vector<int> hits(n, 0);
    for (int w = 0; w < Cfg::kWarps; ++w)
      for (int t = 0; t < Cfg::warp_tiles(n, w); ++t)
        for (int r = 0; r < Cfg::kTileRows; ++r) {
          const int row = (w + t * Cfg::kWarps) * Cfg::kTileRows + r;
          if (row < n) hits[row]++;
          CHECK(row < n + Cfg::kTileRows - 1, "rows=%d: warp %d tile %d starts past the end", n,
                w, t);
        }
    bool once = true;
    for (int h : hits) once = once && h == 1;
    CHECK(once, "rows=%d: the warps' tiles do not cover the rows once", n);
  }

  CHECK(Cfg::head_chunks(1) == 1 && Cfg::head_chunks(16) == 1 && Cfg::head_chunks(17) == 2 &&
            Cfg::head_chunks(32) == 2 && Cfg::head_chunks(33) == 3,
        "head chunks of a group");

  const int lengths[] = {1, 2, 63, 64, 65, 127, 128, 129, 229, 511, 512, 513, 4096, 100000};
  const long ctas_list[] = {1, 2, 8, 16, 33, 128, 132, 133, 1000};
  for (int length : lengths) {
    for (long ctas : ctas_list) {
      for (int clusters = 0; clusters < 2; ++clusters) {
        const int splits = decode_attention_splits(ctas, length, 132, clusters == 1);
        CHECK(splits >= 1 && splits <= Cfg::kMaxSplits, "L=%d ctas=%ld: %d splits", length,
              ctas, splits);
        CHECK(clusters || splits == 1, "L=%d ctas=%ld: split without clusters", length, ctas);
        CHECK(ctas < 132 || splits == 1, "L=%d ctas=%ld: split of a full grid", length, ctas);
        CHECK(splits <= (length + Cfg::kMinSplitRows - 1) / Cfg::kMinSplitRows,
              "L=%d ctas=%ld: %d splits of %d rows", length, ctas, splits,
              Cfg::split_rows(length, splits));
        if (clusters && length >= Cfg::kMaxSplits * Cfg::kMinSplitRows && ctas <= 16) {
          CHECK(Cfg::warp_depth(length, splits) == Cfg::warp_depth(length, Cfg::kMaxSplits),
                "L=%d ctas=%ld: %d splits leave a warp more tiles than %d", length, ctas, splits,
                Cfg::kMaxSplits);
        }
        // Against the fill rule alone (SMs, rows, cluster size): never more splits, the busiest
        // warp as few tiles, and no split that leaves it as many as one split fewer would.
        if (clusters) {
          long fill = (132 + ctas - 1) / ctas;
          const long by_rows = (length + Cfg::kMinSplitRows - 1) / Cfg::kMinSplitRows;
          fill = fill < by_rows ? fill : by_rows;
          fill = fill < Cfg::kMaxSplits ? fill : Cfg::kMaxSplits;
          CHECK(splits <= fill && Cfg::warp_depth(length, splits) ==
                                      Cfg::warp_depth(length, int(fill)),
                "L=%d ctas=%ld: %d splits against the fill rule's %ld", length, ctas, splits,
                fill);
          CHECK(splits == 1 ||
                    Cfg::warp_depth(length, splits - 1) > Cfg::warp_depth(length, splits),
                "L=%d ctas=%ld: split %d shortens no warp", length, ctas, splits);
        }
        std::vector<int> hits(length, 0);
        const int per = Cfg::split_rows(length, splits);
        for (int s = 0; s < splits; ++s) {
          const int begin = s * per, end = begin + per < length ? begin + per : length;
          CHECK(end > begin, "L=%d, %d splits: split %d is empty", length, splits, s);
          for (int j = begin; j < end; ++j) hits[j]++;
        }
        bool once = true;
        for (int h : hits) once = once && h == 1;
        CHECK(once, "L=%d, %d splits: positions not covered once", length, splits);
      }
    }
  }
  // The trigger rule: Llama-3-8B's heads (8 key/value heads, a CTA each per sequence) on 132
  // SMs at 229 positions: batch 1 (4 splits, 32 CTAs) lets o_proj launch at once, batch 16 (2
  // splits, 256 CTAs, the cache streamed by most SMs) after its positions; a smaller grid is
  // never later than a larger one.
  {
    const int b1 = decode_attention_splits(8, 229, 132, true);
    const int b16 = decode_attention_splits(8 * 16, 229, 132, true);
    CHECK(b1 == 4 && b16 == 2, "Llama splits at 229 positions: %d (batch 1), %d (batch 16)", b1,
          b16);
    // Batch 6-8 at 256 positions: the SMs alone would ask for 3 splits, whose warps take 2 tiles
    // as 2 splits' do.
    for (int batch = 6; batch <= 8; ++batch) {
      const int splits = decode_attention_splits(8L * batch, 256, 132, true);
      CHECK(splits == 2, "batch %d at 256 positions: %d splits", batch, splits);
    }
    CHECK(decode_attention_splits(8L * 8, 4096, 132, true) == 3, "batch 8 at 4096: not 3 splits");
    CHECK(decode_attention_early_dependents(8L * b1, 132), "batch 1: the trigger is late");
    CHECK(!decode_attention_early_dependents(8L * 16 * b16, 132), "batch 16: the trigger is early");
    CHECK(decode_attention_early_dependents(66, 132) && !decode_attention_early_dependents(67, 132),
          "the rule's edge is not half the SMs");
    for (long ctas = 1; ctas < 1000; ++ctas) {
      CHECK(decode_attention_early_dependents(ctas, 132) ||
                !decode_attention_early_dependents(ctas + 1, 132),
            "ctas=%ld: late, but a larger grid is early", ctas);
    }
  }
  if (failures) std::printf("%d failures\n", failures);
  return failures != 0;
}
