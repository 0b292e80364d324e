#pragma once
// The plan of a mixed-input GEMM call: which kernel runs, its instance (tile, stages, warps),
// the split-K factor and whether the weight is first dequantized for a dense GEMM. One pure
// function decides it from the problem, a device description and an optional schedule:
//
//   MixedPlan plan = plan_mixed_gemm(problem, device_spec, schedule);
//
// Plain C++ (no CUDA, no torch): it is compiled into every build, so plans for any built-in
// device (H100 SXM, H200, A100) can be computed and tested on a machine without a GPU. The op
// (csrc/ops/mixed_gemm_op.cpp) computes the plan once per call for the current device
// (current_device_spec(), kernels/mixed/mixed_dispatch.cu) and launches it
// (mixed_gemm_launch.hpp). The rules and their measurements are in mixed_plan.cpp and
// benchmarks/results/NOTES.md.

#include <cstddef>
#include <cstdint>
#include <string>

namespace cute_gemm {

// What a GPU offers the planner: enough for the occupancy calculator's arithmetic and the
// choice of instruction set.
struct DeviceSpec {
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int smem_per_sm = 0;           // bytes of shared memory per SM
  int smem_per_block_optin = 0;  // the most dynamic shared memory one CTA may ask for
  int smem_reserved_per_cta = 1024;  // the system's share of each CTA's shared memory
  int regs_per_sm = 65536;
  int max_threads_per_sm = 2048;
  int max_ctas_per_sm = 32;
  bool wgmma = false;  // the build has the sm_90a kernels and the device runs them (cc 9.0)
};

// Built-in specs (the build is assumed to carry sm_90a code for the Hopper ones).
DeviceSpec h100_sxm_spec();
DeviceSpec h200_spec();
DeviceSpec a100_spec();
// "h100", "h200" or "a100"; throws std::invalid_argument otherwise.
DeviceSpec builtin_device_spec(std::string const& name);

// One GEMM call: out[M, N] = A[M, K] @ dequant(W)[N, K]^T.
struct MixedGemmProblem {
  int64_t m = 0, n = 0, k = 0;
  int bits = 4;
  int group_size = 128;  // as the op takes it: 32, 64, 128 or -1 (per-channel)
  bool bf16 = false;
  // out[M, N/2] = SiLU(gate) * up of the two halves of N (mixed_gemm_launch.hpp); N % 16 == 0.
  bool gated = false;
  // The caller takes the fp32 partial sums [splits][M][N] themselves (the op
  // mixed_gemm_partials): the kernel writes them to the workspace, split or not, and no reduce
  // kernel runs. Ungated problems only. The plan may then split where it would not with a reduce
  // kernel (mixed_plan.cpp, kPartialsCtaWarps).
  bool partials = false;
};

enum class MixedKernel : int {
  kAuto = -1,   // schedules only: let the planner choose
  kDecode = 0,  // mixed_decode_kernel.cuh, M <= 8, any sm_80+ GPU
  kMma = 1,     // mixed_gemm_kernel.cuh, mma.sync, any sm_80+ GPU
  kWgmma = 2,   // mixed_wgmma_kernel.cuh / mixed_wgmma_ws_kernel.cuh, sm_90a
  kDense = 3,   // dequantize the weight once, then a dense GEMM (cuBLAS)
};
char const* kernel_name(MixedKernel kernel);

// Explicit choices that override the planner's (Machete / Marlin style: an argument of the call,
// never process state). Zero / kAuto fields are left to the planner. A choice the device or the
// problem cannot honour is refused (std::invalid_argument naming the field); a split count above
// the problem's k blocks is lowered so that no split is empty, and decode warps are rounded down
// to whole k slices that fit in shared memory: the plan shows what runs.
struct MixedSchedule {
  MixedKernel kernel = MixedKernel::kAuto;
  int tile_m = 0;     // wgmma: the token tile (16 (INT4 only), 32, 64, 128, 160, 192, 256)
  // wgmma: output columns per CTA; 64: the 16-row tile's one-n64-tile form (INT4, half the
  // registers, 4 CTAs per SM; twice the column tiles, so half the splits for a grid). By default
  // 128, and 64 for the 16-row tile where 128 columns would split K 8 ways or more or give each
  // split at most 16 k blocks (narrow_wgmma16).
  int tile_n = 0;
  // wgmma: exact scales (fp32 sums of q - z scaled per group: the 16- and 32-row tiles only) or
  // rounded weights ((q - z) * s in the activation dtype, as the dense path); kAuto: exact in
  // INT4's 16- and 32-row tiles at groups of whole k blocks, rounded elsewhere.
  enum class Scales { kAuto, kExact, kRounded } scales = Scales::kAuto;
  // wgmma: how the tile's stages are filled: TMA boxes that a few threads issue, or every
  // thread's cp.async (INT4's 64-row tile has both forms; the others one); kAuto: TMA but where
  // the planner's rule takes the 64-row tile's cp.async form (kCpAsyncMaxRows).
  enum class Loads { kAuto, kTma, kCpAsync } loads = Loads::kAuto;
  int splits = 0;     // split-K factor, 1..64
  int warps = 0;      // decode: warps per CTA, 1..16
  int col_warps = 0;  // decode: warps side by side in a k slice (1, 2, 4)
  int k_slices = 0;   // mma.sync: k slices per CTA (1, or 2 in INT4's 16-row tile)
  int raster_m = 0;   // warp-specialized wgmma: M tiles per raster group (1 .. 64)
  // Where split-K's partial sums are added: in a thread block cluster of the splits (the
  // cp.async wgmma kernel, up to 8 splits, not for partial sums: MixedPlan::reduce_in_cluster)
  // or by split_k_reduce_kernel through the fp32 workspace; kAuto: the cluster where it can.
  enum class Reduce { kAuto, kCluster, kKernel } reduce = Reduce::kAuto;
  // Stream-K (MixedPlan::stream_k_ctas): -1 the planner's choice, 0 off, > 0 that many CTAs.
  int stream_k = -1;
  // Where the kernel lets the next kernel in the stream launch (MixedPlan::early_dependents):
  // right after its own dependency wait (kEarly) or after its main loop (kLate); kAuto: the
  // planner's rule. The decode kernel and the wgmma tiles without a producer warpgroup only.
  enum class Trigger { kAuto, kEarly, kLate } trigger = Trigger::kAuto;

  // "kernel=decode,warps=8,col_warps=2", "kernel=wgmma,tile_m=128,splits=2", "" (all auto).
  // Keys: kernel (auto, decode, mma, wgmma, dense), tile_m, tile_n, scales (exact, rounded),
  // loads (tma, cp_async), splits, warps, col_warps, k_slices, raster_m, reduce (cluster,
  // kernel), stream_k (off, CTAs), trigger (early, late).
  static MixedSchedule parse(std::string const& text);
  std::string str() const;
  bool is_auto() const;
};

struct MixedPlan {
  MixedKernel kernel = MixedKernel::kMma;
  int instance = -1;      // index into mixed_instances() (-1: the dense path)
  int tile_m = 0;         // rows of A per CTA
  int tile_n = 0;         // output columns per CTA
  int stages = 0;         // pipeline depth
  int threads = 0;        // per CTA
  int smem_bytes = 0;     // dynamic shared memory per CTA
  int splits = 1;         // split-K factor; > 1: the partial sums meet in a cluster or go
                          // through the workspace to a reduce kernel (reduce_in_cluster)
  int warps = 0;          // warps per CTA (decode: of col_warps * k_slices)
  int col_warps = 0;      // decode: warps side by side, 32 columns each, sharing the activations
  int k_slices = 0;       // decode: slices of the CTA's k range, one per col_warps warps;
                          // mma.sync: slices of the CTA's k range, one per 4 or 8 warps (1, 2)
  int warp_groups = 0;    // wgmma: consumer warpgroups per CTA
  bool producer = false;  // wgmma: a TMA producer warpgroup (warp-specialized kernel)
  bool tma_loads = false;  // wgmma: stages filled by TMA boxes (otherwise by cp.async)
  bool fine_groups = false;   // scales applied every 2 k16 steps (groups shorter than a k block)
  bool exact_scales = true;   // the scales multiply exact fp32 sums of a * (q - z); otherwise
                              // the weight is rounded to the activation dtype first
  int ctas_per_sm = 0;        // resident CTAs per SM (the occupancy model)
  int64_t grid[3] = {0, 0, 0};
  // Warp-specialized wgmma: the CTAs take the (M tile, N tile) grid in groups of raster_m M
  // tiles, column by column (kernels/tile_raster.hpp); 1 is row-major (each M tile's N tiles in
  // turn). Every other kernel: 1, row-major.
  int raster_m = 1;
  // Gated: an instance that gates in registers (MixedInstanceInfo::gates_in_registers) does so
  // without split-K or with its splits in a cluster (gates_in_kernel()); every other plan writes
  // its fp32 sums to the workspace (one slice without split-K) and split_k_reduce_kernel gates
  // them.
  bool gated = false;
  // Split-K: the kernel runs in thread block clusters of (1, 1, splits) whose CTAs add their
  // partial sums in distributed shared memory, and the CTA that owns an output stores it (the
  // cp.async wgmma kernel, mixed_wgmma_cluster_sums.cuh): no workspace, no reduce kernel. Where
  // the instance can (MixedInstanceInfo::max_cluster_splits) unless the schedule says
  // reduce=kernel; not for partial sums.
  bool reduce_in_cluster = false;
  // Stream-K, unsplit (0: none): this many CTAs share the tiles' k blocks evenly (stream_k.hpp),
  // each tile's sums added by the CTA that holds its last k block from the others' partial sums
  // in the workspace; grid[0] counts the CTAs. The instances that can: MixedInstanceInfo::
  // stream_k_partial_floats > 0. By default where the tiles leave some SMs a CTA fewer than
  // others and fill few enough of the slots to pay for the hand-over (mixed_plan.cpp,
  // kStreamKCostBlocks). The warp-specialized tiles (producer) share only the tiles past the
  // full waves of this many CTAs, which run one whole tile each: grid (C, full waves + 1, 1)
  // (kWsStreamKMaxFill).
  int stream_k_ctas = 0;
  // The kernel writes fp32 sums to the workspace and split_k_reduce_kernel adds (and gates) them
  // into out: with split-K not reduced in a cluster, and gated where the instance does not gate
  // in registers (MixedInstanceInfo::gates_in_registers). The launchers take it from here.
  bool via_workspace = false;
  // The kernel itself gates: the launchers run its instance's gating form.
  bool gates_in_kernel() const { return gated && !via_workspace; }
  // Uninitialized scratch: fp32 [splits][M][N] partial sums, or stream-K's partial sums and
  // flags (stream_k_workspace_bytes).
  size_t workspace_bytes = 0;
  // MixedGemmProblem::partials: the workspace is the caller's result (via_workspace is set) and
  // the launchers run no reduce kernel.
  bool partials = false;
  // The kernel lets the next kernel in the stream launch (programmatic dependent launch) right
  // after its own dependency wait, not after its main loop, so that the next kernel's CTAs take
  // the SM slots this grid leaves (or each SM as this grid's CTAs leave it) and stream their
  // first weights early. Decode: where the grid leaves few resident slots beside it
  // (kEarlyDependentsFill); the wgmma tiles without a producer warpgroup: a gated 16-row grid
  // unsplit in one partial wave (kEarlyDependentsGated16); schedule key trigger; every other plan
  // triggers after its loop (mixed_plan.cpp).
  bool early_dependents = false;
  // Decode at M = 1 in one-warp k slices, where the scales' (and zero points') and the activation
  // row's copies of a k block fit one per lane and the scale rows step evenly: the instance whose
  // lanes each make one such copy per k block, from addresses set before its loop (fewer
  // instructions and registers per k block; mixed_decode_config.hpp, single_row_fits).
  bool single_row = false;

  std::string describe() const;  // one readable line
};

// The plan for `problem` on `device`, honouring `schedule`. Pure: same inputs, same plan.
// Throws std::invalid_argument for problems outside the op's contract (M, N, K < 1, N % 8, bad
// bits / group size) and for schedules that cannot run.
MixedPlan plan_mixed_gemm(MixedGemmProblem const& problem, DeviceSpec const& device,
                          MixedSchedule const& schedule = {});

// The instantiated kernels the planner chooses from (mixed_instances.hpp lists them).
struct MixedInstanceInfo {
  MixedKernel kernel;
  char const* name;  // the generated TU's name, e.g. "mixed_wgmma_f16_int4_m128_wg2"
  int bits;
  bool bf16;
  int tile_m, tile_n;
  bool fine_groups;   // mma.sync, decode
  bool exact_scales;  // wgmma
  int warp_groups;    // wgmma
  bool producer;      // wgmma
  bool tma_loads;     // wgmma: stages filled by TMA boxes; otherwise by every thread's cp.async
  int stages;
  int threads;        // per CTA (decode: at most; the plan picks the warps)
  int smem_bytes;     // dynamic shared memory per CTA (decode: at the most warps and rows)
  int registers;      // per thread, as ptxas allocates them on sm_90a (decode: col_warps 1)
  int min_ctas_per_sm;  // the CTAs per SM the kernel's register cap is sized for
  int max_k_slices;     // mma.sync: k slices a CTA may run (threads and smem_bytes: one slice)
  int sliced_smem_bytes;  // mma.sync: dynamic shared memory of a CTA of max_k_slices slices
  bool gates_in_registers;  // has a kernel for gated GEMMs that gates in registers (decode,
                           // mma.sync's 16-row tile); the others gate in the reduce kernel
  int max_cluster_splits;  // split-K sums can meet in a thread block cluster of up to this many
                           // splits (the cp.async wgmma kernel); 0: through the workspace only
  int stream_k_partial_floats;  // runs stream-K plans, handing a tile's partial sums over in this
                                // many floats per CTA; 0: no stream-K
  // Decode only (the CTA shape is chosen per call): rows of A a CTA of M rows stages, shared
  // memory of a CTA of `warps` warps in k slices of `col_warps`, the most warps per CTA (whole
  // k slices) that fit in `smem_limit` bytes (0: none), and registers per thread of the
  // instantiation for `col_warps` and a gated GEMM or not (compiled apart).
  int (*decode_rows)(int m);
  int (*decode_smem_bytes)(int rows, int warps, int col_warps);
  int (*decode_max_warps)(int rows, int col_warps, int smem_limit);
  int (*decode_registers)(int col_warps, bool gated, bool single_row);
  bool (*decode_single_row)(int group, int groups);  // the instance's single_row_fits
};
int mixed_instance_count();
MixedInstanceInfo const& mixed_instance(int index);

// Resident CTAs per SM of `threads` threads, `regs` registers per thread and `smem` bytes of
// dynamic shared memory: the arithmetic of the CUDA occupancy calculator (sm_80 / sm_90).
int occupancy_ctas_per_sm(DeviceSpec const& device, int threads, int regs, int smem);

}  // namespace cute_gemm
