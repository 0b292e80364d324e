// Launches a mixed GEMM plan (mixed_plan.hpp): the plan names an instance of the table in
// generated/mixed_instances.inc (one generated translation unit each); this file maps it to that
// instance's launcher, or to its occupancy query (mixed_instance_occupancy). It also describes the
// current device for the planner.

#include <atomic>
#include <mutex>
#include <random>
#include <vector>

#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"
#include "kernels/tma_map.hpp"

namespace cute_gemm {

// The launchers and occupancy queries, in the table's order (each defined in its generated TU).
#define CG_MIXED_MMA(name, ...)                                              \
  cudaError_t name(MixedGemmParams const&, MixedPlan const&, cudaStream_t); \
  cudaError_t name##_occupancy(MixedPlan const&, int*);
#define CG_MIXED_WGMMA(name, ...) CG_MIXED_MMA(name)
#define CG_MIXED_DECODE(name, ...) CG_MIXED_MMA(name)
#include "kernels/mixed/generated/mixed_instances.inc"
#undef CG_MIXED_MMA
#undef CG_MIXED_WGMMA
#undef CG_MIXED_DECODE

namespace {

using Launcher = cudaError_t (*)(MixedGemmParams const&, MixedPlan const&, cudaStream_t);

constexpr Launcher kLaunchers[] = {
#define CG_MIXED_MMA(name, ...) &name,
#define CG_MIXED_WGMMA(name, ...) &name,
#define CG_MIXED_DECODE(name, ...) &name,
#include "kernels/mixed/generated/mixed_instances.inc"
#undef CG_MIXED_MMA
#undef CG_MIXED_WGMMA
#undef CG_MIXED_DECODE
};

using Occupancy = cudaError_t (*)(MixedPlan const&, int*);

constexpr Occupancy kOccupancies[] = {
#define CG_MIXED_MMA(name, ...) &name##_occupancy,
#define CG_MIXED_WGMMA(name, ...) &name##_occupancy,
#define CG_MIXED_DECODE(name, ...) &name##_occupancy,
#include "kernels/mixed/generated/mixed_instances.inc"
#undef CG_MIXED_MMA
#undef CG_MIXED_WGMMA
#undef CG_MIXED_DECODE
};

DeviceSpec spec_of(int device) {
  DeviceSpec d;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return d;  // sm_count 0: the planner refuses it with a clear message
  }
  d.name = prop.name;
  d.sm_count = prop.multiProcessorCount;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.smem_per_sm = int(prop.sharedMemPerMultiprocessor);
  d.smem_per_block_optin = int(prop.sharedMemPerBlockOptin);
  d.smem_reserved_per_cta = int(prop.reservedSharedMemPerBlock);
  d.regs_per_sm = prop.regsPerMultiprocessor;
  d.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  d.max_ctas_per_sm = prop.maxBlocksPerMultiProcessor;
#if defined(CUTE_GEMM_WITH_SM90A)
  // sm_90a code runs on compute capability 9.0 only; the warp-specialized instances copy by TMA,
  // from tensor maps the driver encodes.
  d.wgmma = prop.major == 9 && prop.minor == 0 && tensor_map_encoder() != nullptr;
#endif
  return d;
}

}  // namespace

DeviceSpec const& current_device_spec() {
  static std::mutex mutex;
  static std::vector<DeviceSpec*> specs;  // per device, never freed (referenced by callers)
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    device = 0;
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (size_t(device) >= specs.size()) specs.resize(device + 1, nullptr);
  if (specs[device] == nullptr) specs[device] = new DeviceSpec(spec_of(device));
  return *specs[device];
}

// Stream-K's launch ids (MixedGemmParams::stream_k_id): distinct for every launch of the
// process, never 0, from a random start (a flag left raised by a launch that failed cannot match
// a later launch's id).
static uint64_t next_stream_k_id() {
  static std::atomic<uint64_t> next{std::random_device{}() * 0x9E3779B97F4A7C15ull | 1};
  uint64_t id = 0;
  while (id == 0) id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

cudaError_t mixed_gemm_launch(MixedGemmParams const& p, MixedPlan const& plan,
                              cudaStream_t stream) {
  constexpr int kCount = int(sizeof(kLaunchers) / sizeof(kLaunchers[0]));
  static_assert(kCount > 0, "no mixed instances");
  if (plan.instance < 0 || plan.instance >= kCount || plan.instance >= mixed_instance_count())
    return cudaErrorInvalidValue;
  // A gated GEMM's halves are whole n8 blocks (the op and the planner refuse other N).
  if (plan.gated != p.gated || (p.gated && p.n % (2 * mixed::kBlockN) != 0))
    return cudaErrorInvalidValue;
  if (plan.workspace_bytes > 0 &&
      (p.workspace == nullptr || p.workspace_bytes < plan.workspace_bytes))
    return cudaErrorInvalidValue;
  if (plan.stream_k_ctas > 0) {  // every launch its own id
    MixedGemmParams q = p;
    q.stream_k_id = next_stream_k_id();
    return kLaunchers[plan.instance](q, plan, stream);
  }
  return kLaunchers[plan.instance](p, plan, stream);
}

cudaError_t mixed_instance_occupancy(MixedPlan const& plan, int* ctas_per_sm) {
  constexpr int kCount = int(sizeof(kOccupancies) / sizeof(kOccupancies[0]));
  if (ctas_per_sm == nullptr) return cudaErrorInvalidValue;
  *ctas_per_sm = 0;
  // A plan whose kernel is not its instance's was not made with this build's table: its fields
  // describe some other kernel.
  if (plan.instance < 0 || plan.instance >= kCount || plan.instance >= mixed_instance_count() ||
      plan.kernel != mixed_instance(plan.instance).kernel)
    return cudaErrorInvalidValue;
  return kOccupancies[plan.instance](plan, ctas_per_sm);
}

}  // namespace cute_gemm
