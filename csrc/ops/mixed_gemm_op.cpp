// cute_gemm::mixed_gemm -- the torch op around the mixed-input (weight-only quantized) GEMM:
//
//   out[M, N] = a[M, K] @ dequant(qweight)[N, K]^T (+ bias[N]),  fp16/bf16 a, INT4/INT8 weights,
//   dequant(W)[n, k] = (q[n, k] - z) * scales[k / G, n],  z = zeros[k / G, n] or 2^(bits-1).
//
// activation="silu_mul" (a gate/up projection, N = 2H): out[M, H] = SiLU(g) * u, g and u the fp32
// sums (+ bias) of columns 0..H-1 and H..2H-1, rounded once (the dense path rounds g and u to the
// activation dtype first).
//
// The packed format is kernels/mixed/weight_format.hpp (cute_gemm/quant.py packs it). As for
// gemm_op.cpp: check_mixed_gemm_args() validates everything the kernel relies on and is shared by
// the CPU and CUDA kernels; the fake kernel is in cute_gemm/ops.py.
//
// The CPU kernel is the reference: the weight is unpacked and dequantized with ATen ops (the same
// arithmetic as cute_gemm.quant.dequantize: (q - z) * s in fp32, exact, rounded once to the
// activation dtype), then an fp32 matmul, bias in fp32, one rounding. The CUDA kernel asks the
// planner (kernels/mixed/mixed_plan.hpp) once per call what runs on the current device, honouring
// the optional `schedule` argument, and launches that plan (kernels/mixed/mixed_gemm_launch.hpp):
// a fused kernel, which reads the packed weight and uses the exact (q - z) * s unless the plan
// says it rounds the weight to the activation dtype first (its exact_scales), or the dense path:
// dequantize once to the activation dtype, then a dense GEMM.
//
// cute_gemm::mixed_gemm_partials returns what the reduce kernel would add: the plan's fp32
// partial sums [S, M, N] along K (no bias, no activation), for a compiler that adds them inside
// the kernel consuming the output (cute_gemm/inductor.py). The plan is made for it
// (MixedGemmProblem::partials): every kernel writes its sums to the returned tensor, split or not.
//
// Autograd: gradients flow to `a` (dA = dOut @ dequant(W), in the activation dtype) and `bias`
// (the column sums of dOut). The quantized weight is frozen: qweight is integer, and scales/zeros
// that require grad are rejected with an error rather than silently getting no gradient.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/mixed/mixed_plan.hpp"
#include "kernels/mixed/weight_format.hpp"
#include "ops/op_common.hpp"

#ifndef CUTE_GEMM_NO_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/mixed/mixed_gemm_launch.hpp"
#endif

namespace cute_gemm {

namespace {

constexpr char const* kOp = "cute_gemm.mixed_gemm: ";
constexpr char const* kPartialsOp = "cute_gemm.mixed_gemm_partials: ";
// The packed format's rules (valid bits and group sizes, -1 -> K, block_k, the packed shape and
// layout) are kernels/mixed/weight_format.hpp's, shared with the kernels and, through the binding,
// with cute_gemm/weight_format.py.
constexpr int64_t kBlockN = mixed::kBlockN;  // output channels per packed block

// What check_mixed_gemm_args found.
struct MixedProblem {
  int64_t m = 0, n = 0, k = 0;
  int64_t bits = 4;
  int64_t group = 0;  // the effective group size: group_size, or K for per-channel
  int64_t lda = 0;
  bool gated = false;        // activation="silu_mul"
  int64_t n_out = 0;         // output columns: N, or N/2 gated
  bool runs_kernel = false;  // false when M or N is 0: the result is empty
};

using OptionalText = std::optional<c10::string_view>;

// The activation argument: None or "silu_mul" (gated); a ValueError otherwise.
bool parse_activation(OptionalText const& activation) {
  if (!activation.has_value()) return false;
  TORCH_CHECK_VALUE(*activation == "silu_mul", kOp,
                    "activation must be None or 'silu_mul' (SiLU(gate) * up of the two halves of "
                    "N); got '", std::string(*activation), "'");
  return true;
}

// scales / zeros: [K/G, N] in a's dtype, contiguous.
void check_group_tensor(at::Tensor const& t, char const* name, at::Tensor const& a,
                        MixedProblem const& p, char const* op) {
  ops::check_same_dtype(op, t, name, a);
  TORCH_CHECK(t.dim() == 2 && t.size(0) == p.k / p.group && t.size(1) == p.n, op, name,
              " must have shape [K/G, N] = [", p.k / p.group, ", ", p.n, "] (K=", p.k, ", G=",
              p.group, ", N=", p.n, " = qweight.size(0) * 8); got ", t.sizes());
  ops::check_same_device(op, t, name, a);
  TORCH_CHECK(t.is_contiguous(), op, name, " must be contiguous; got strides ", t.strides(),
              " for shape ", t.sizes(), "; call ", name, ".contiguous()");
}

// Every check of the ops (`op`: their messages' prefix), shared by all backends. Throws
// (TORCH_CHECK -> RuntimeError in Python) with a message that names the argument, what was
// expected and what came.
MixedProblem check_mixed_gemm_args(at::Tensor const& a, at::Tensor const& qweight,
                                   at::Tensor const& scales,
                                   std::optional<at::Tensor> const& zeros, int64_t bits,
                                   int64_t group_size, int64_t k,
                                   std::optional<at::Tensor> const& bias,
                                   OptionalText const& activation, char const* op = kOp) {
  ops::check_2d(op, a, "a", "[M, K]");
  ops::check_half_dtype(op, a, "a");
  TORCH_CHECK(mixed::valid_bits(bits), op, "bits must be ", mixed::kValidBitsText, "; got bits=",
              bits);
  TORCH_CHECK(mixed::valid_group_size(group_size), op, "group_size must be ",
              mixed::kValidGroupSizesText, "; got group_size=", group_size);
  TORCH_CHECK(a.size(1) == k, op, "k must equal a.size(1) (K, the unpadded reduction size); got ",
              "k=", k, " and a of shape ", a.sizes());
  TORCH_CHECK(k >= 1, op, "K must be >= 1; got K=", k);
  if (group_size == mixed::kPerChannel) {
    TORCH_CHECK(mixed::valid_k(k, group_size), op, "K must be a multiple of ",
                mixed::k_multiple(group_size), " for per-channel quantization (group_size=",
                mixed::kPerChannel, "); got K=", k);
  } else {
    TORCH_CHECK(mixed::valid_k(k, group_size), op, "K must be a multiple of group_size; got K=",
                k, ", group_size=", group_size);
  }

  MixedProblem p;
  p.m = a.size(0);
  p.k = k;
  p.bits = bits;
  p.group = mixed::effective_group_size(group_size, k);
  int64_t const bk = mixed::block_k(int(bits));
  mixed::PackedShape const packed = mixed::packed_shape(0, k, int(bits));  // [N/8, kb, 32, 4]
  int64_t const kb = packed.k_blocks;

  TORCH_CHECK(qweight.scalar_type() == at::kInt, op,
              "qweight must have dtype torch.int32 (the packed weight); got ",
              ops::dtype_name(qweight.scalar_type()));
  TORCH_CHECK(qweight.dim() == 4 && qweight.size(1) == kb && qweight.size(2) == packed.lanes &&
                  qweight.size(3) == packed.words,
              op, "qweight must have shape [N/8, ceil(K/", bk, "), 32, 4] = [N/8, ", kb,
              ", 32, 4] for bits=", bits, " and K=", k, "; got ", qweight.sizes());
  ops::check_same_device(op, qweight, "qweight", a);
  TORCH_CHECK(qweight.is_contiguous(), op, "qweight must be contiguous; got strides ",
              qweight.strides(), " for shape ", qweight.sizes());
  p.n = qweight.size(0) * kBlockN;
  p.gated = parse_activation(activation);
  TORCH_CHECK_VALUE(!p.gated || p.n % (2 * kBlockN) == 0, op, "activation='silu_mul' needs N (",
                    "the gate and up halves) a multiple of 16; got N=", p.n,
                    " (qweight.size(0) * 8)");
  p.n_out = p.gated ? p.n / 2 : p.n;

  check_group_tensor(scales, "scales", a, p, op);
  if (zeros.has_value()) check_group_tensor(*zeros, "zeros", a, p, op);

  if (bias.has_value()) ops::check_bias(op, *bias, a, p.n, "qweight.size(0) * 8");

  p.runs_kernel = p.m > 0 && p.n > 0;
  if (!p.runs_kernel) return p;

  // The row layout the kernel needs (as for cute_gemm.gemm).
  p.lda = ops::check_rows(op, a, "a");
  ops::check_aligned(op, qweight, "qweight");
  ops::check_aligned(op, scales, "scales");
  if (zeros.has_value()) ops::check_aligned(op, *zeros, "zeros");
  // N is a multiple of 8 here, so check_bias_layout's exception for N == 1 never applies.
  if (bias.has_value()) ops::check_bias_layout(op, *bias, p.n);
  ops::check_int32(op, p.m, "M (a.size(0))");
  ops::check_int32(op, p.n, "N (qweight.size(0) * 8)");
  ops::check_int32(op, p.k, "K");
  ops::check_int32(op, p.lda, "a.stride(0)");
  return p;
}

// q[N, K] (int32) from the packed tensor: the inverse of cute_gemm.quant.pack_weight. The
// unpacked bit fields [nb, kb, 32, 4, 32/bits] are viewed as the format layout's modes sorted by
// stride and permuted to q's row-major (n, k) order (weight_format.hpp's packed_views).
// N is handled as a SymInt: the backward also runs on fake tensors under torch.compile's
// dynamic shapes (K, bits and the group size are plain ints of the schema); nb, the only
// dimension that depends on N, is the outermost mode of both views.
at::Tensor unpack_q(at::Tensor const& qweight, int64_t bits, int64_t k) {
  static constexpr mixed::PackedViews kViews[] = {mixed::packed_views(4), mixed::packed_views(8)};
  mixed::PackedViews const& v = kViews[bits == 4 ? 0 : 1];
  c10::SymInt const nb = qweight.sym_size(0);
  int64_t const bk = mixed::block_k(int(bits)), kb = mixed::k_blocks(k, int(bits));
  at::Tensor const shifts = at::arange(0, 32, bits, qweight.options());
  // Arithmetic shifts of negative words bring in ones from the left; the mask removes them.
  at::Tensor const fields = at::bitwise_and(
      at::bitwise_right_shift(qweight.unsqueeze(-1), shifts), (int64_t{1} << bits) - 1);
  std::vector<c10::SymInt> view(v.fields, v.fields + v.rank);
  view[0] = nb;
  view[1] = kb;
  std::vector<int64_t> const q_from_fields(v.q_from_fields, v.q_from_fields + v.rank);
  at::Tensor const q = fields.view_symint(view).permute(q_from_fields);
  std::vector<c10::SymInt> const rows = {nb * kBlockN, kb * bk};
  return q.reshape_symint(rows).narrow(1, 0, k);
}

// dequant(W)[N, K] in `dtype`: (q - z) * s in fp32 (exact), rounded once. `group` is the
// schema's group_size (-1 per-channel) or the effective one: effective_group_size maps both to G.
at::Tensor dequantize_weight(at::Tensor const& qweight, at::Tensor const& scales,
                             std::optional<at::Tensor> const& zeros, int64_t bits,
                             int64_t group_size, int64_t k, at::ScalarType dtype) {
  int64_t const group = mixed::effective_group_size(group_size, k);
  c10::SymInt const n = qweight.sym_size(0) * kBlockN;
  std::vector<c10::SymInt> const grouped = {n, k / group, group};
  at::Tensor const q = unpack_q(qweight, bits, k).to(at::kFloat).view_symint(grouped);
  at::Tensor const s = scales.to(at::kFloat).t().unsqueeze(-1);
  at::Tensor w;
  if (zeros.has_value()) {
    w = (q - zeros->to(at::kFloat).t().unsqueeze(-1)) * s;
  } else {
    w = (q - static_cast<double>(int64_t{1} << (bits - 1))) * s;
  }
  std::vector<c10::SymInt> const full = {n, k};
  return w.reshape_symint(full).to(dtype);
}

using Schedule = OptionalText;

// SiLU(g) * u of the fp32 halves of acc [M, N] along N: [M, N/2] fp32.
at::Tensor silu_mul(at::Tensor const& acc) {
  std::vector<at::Tensor> const halves = acc.chunk(2, 1);
  return at::silu(halves[0]) * halves[1];
}

// The schedule argument, parsed (a ValueError naming the bad item when it does not parse).
MixedSchedule parse_schedule(Schedule const& schedule, char const* op = kOp) {
  if (!schedule.has_value()) return {};
  try {
    return MixedSchedule::parse(std::string(*schedule));
  } catch (std::invalid_argument const& e) {
    TORCH_CHECK_VALUE(false, op, e.what());
  }
}

// The CPU reference's fp32 product a @ dequant(W)^T, W dequantized and rounded to a's dtype.
at::Tensor reference_product(MixedProblem const& p, at::Tensor const& a, at::Tensor const& qweight,
                             at::Tensor const& scales, std::optional<at::Tensor> const& zeros) {
  at::Tensor const w =
      dequantize_weight(qweight, scales, zeros, p.bits, p.group, p.k, a.scalar_type());
  return at::matmul(a.to(at::kFloat), w.to(at::kFloat).t());
}

// CPU: the reference. A schedule is checked but has nothing to choose here.
at::Tensor mixed_gemm_cpu(at::Tensor const& a, at::Tensor const& qweight, at::Tensor const& scales,
                          std::optional<at::Tensor> const& zeros, int64_t bits,
                          int64_t group_size, int64_t k, std::optional<at::Tensor> const& bias,
                          Schedule schedule, OptionalText activation) {
  MixedProblem const p =
      check_mixed_gemm_args(a, qweight, scales, zeros, bits, group_size, k, bias, activation);
  parse_schedule(schedule);
  if (!p.runs_kernel) return at::empty({p.m, p.n_out}, a.options());
  at::Tensor acc = reference_product(p, a, qweight, scales, zeros);
  if (bias.has_value()) acc.add_(bias->to(at::kFloat));
  if (p.gated) acc = silu_mul(acc);
  return acc.to(a.scalar_type());
}

// mixed_gemm_partials' checks, for its CPU and CUDA kernels alike: mixed_gemm's without bias and
// activation, under the partials op's name, and its schedule parsed.
std::pair<MixedProblem, MixedSchedule> check_partials_args(
    at::Tensor const& a, at::Tensor const& qweight, at::Tensor const& scales,
    std::optional<at::Tensor> const& zeros, int64_t bits, int64_t group_size, int64_t k,
    Schedule const& schedule) {
  MixedProblem const p = check_mixed_gemm_args(a, qweight, scales, zeros, bits, group_size, k,
                                               std::nullopt, std::nullopt, kPartialsOp);
  return {p, parse_schedule(schedule, kPartialsOp)};
}

// CPU partials: one split (the plan on CPU), the reference's fp32 product before bias and rounding.
at::Tensor mixed_gemm_partials_cpu(at::Tensor const& a, at::Tensor const& qweight,
                                   at::Tensor const& scales,
                                   std::optional<at::Tensor> const& zeros, int64_t bits,
                                   int64_t group_size, int64_t k, Schedule schedule) {
  MixedProblem const p =
      check_partials_args(a, qweight, scales, zeros, bits, group_size, k, schedule).first;
  if (!p.runs_kernel) return at::empty({1, p.m, p.n}, a.options().dtype(at::kFloat));
  return reference_product(p, a, qweight, scales, zeros).unsqueeze(0);
}

// Partial sums carry no gradient (an inference op): refused where autograd would need one.
at::Tensor mixed_gemm_partials_autograd(at::Tensor const& a, at::Tensor const& qweight,
                                        at::Tensor const& scales,
                                        std::optional<at::Tensor> const& zeros, int64_t bits,
                                        int64_t group_size, int64_t k, Schedule schedule) {
  TORCH_CHECK(!at::GradMode::is_enabled() ||
                  !(a.requires_grad() || scales.requires_grad() ||
                    (zeros.has_value() && zeros->requires_grad())),
              kPartialsOp, "has no gradient (an inference op); got a tensor ",
              "that requires grad with grad mode on: use cute_gemm.mixed_gemm, or torch.no_grad()");
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("cute_gemm::mixed_gemm_partials", "")
          .typed<at::Tensor(at::Tensor const&, at::Tensor const&, at::Tensor const&,
                            std::optional<at::Tensor> const&, int64_t, int64_t, int64_t,
                            Schedule)>();
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(a, qweight, scales, zeros, bits, group_size, k, schedule);
}

#ifndef CUTE_GEMM_NO_CUDA
// The plan for a checked problem on the current device, honouring the schedule (a ValueError
// for one it cannot run). `partials`: the plan of mixed_gemm_partials.
MixedPlan plan_on_device(MixedProblem const& p, int64_t group_size, bool bf16,
                         MixedSchedule const& sched, bool partials, char const* op) {
  try {
    return plan_mixed_gemm({p.m, p.n, p.k, static_cast<int>(p.bits), static_cast<int>(group_size),
                            bf16, p.gated, partials},
                           current_device_spec(), sched);
  } catch (std::invalid_argument const& e) {
    TORCH_CHECK_VALUE(false, op, e.what());
  }
}

// The launch parameters of a checked problem (out and the workspace are the caller's to set).
MixedGemmParams make_params(MixedProblem const& p, at::Tensor const& a, at::Tensor const& qweight,
                            at::Tensor const& scales, std::optional<at::Tensor> const& zeros,
                            std::optional<at::Tensor> const& bias) {
  MixedGemmParams params;
  params.a = a.data_ptr();
  params.qweight = qweight.data_ptr<int32_t>();
  params.scales = scales.data_ptr();
  params.zeros = zeros.has_value() ? zeros->data_ptr() : nullptr;
  params.bias = bias.has_value() ? bias->data_ptr() : nullptr;
  params.m = static_cast<int>(p.m);
  params.n = static_cast<int>(p.n);
  params.k = static_cast<int>(p.k);
  params.lda = static_cast<int>(p.lda);
  params.ldo = static_cast<int>(p.n_out);
  params.bits = static_cast<int>(p.bits);
  params.group_size = static_cast<int>(p.group);  // K for per-channel
  params.dtype = a.scalar_type() == at::kHalf ? HalfType::kFloat16 : HalfType::kBFloat16;
  params.gated = p.gated;
  return params;
}

// The dense path: dequant(W) rounded to the activation dtype, then a dense GEMM (+ bias). The
// temporary [N, K] weight comes from the caching allocator, so this stays capturable. Ungated.
at::Tensor dense_path(MixedGemmParams const& params, MixedProblem const& p, at::Tensor const& a,
                      std::optional<at::Tensor> const& bias, cudaStream_t stream,
                      char const* op) {
  at::Tensor w = at::empty({p.n, p.k}, a.options());
  cudaError_t const err = dequantize_weight_launch(params, w.data_ptr(), stream);
  TORCH_CHECK(err == cudaSuccess, op, "dequantize kernel launch failed: ",
              cudaGetErrorString(err));
  return at::linear(a, w, bias);
}

at::Tensor mixed_gemm_cuda(at::Tensor const& a, at::Tensor const& qweight,
                           at::Tensor const& scales, std::optional<at::Tensor> const& zeros,
                           int64_t bits, int64_t group_size, int64_t k,
                           std::optional<at::Tensor> const& bias, Schedule schedule,
                           OptionalText activation) {
  MixedProblem const p =
      check_mixed_gemm_args(a, qweight, scales, zeros, bits, group_size, k, bias, activation);
  MixedSchedule const sched = parse_schedule(schedule);
  c10::cuda::CUDAGuard const device_guard(a.device());
  if (!p.runs_kernel) return at::empty({p.m, p.n_out}, a.options());

  // The plan, once: what runs, its grid and its workspace.
  MixedPlan const plan =
      plan_on_device(p, group_size, a.scalar_type() == at::kBFloat16, sched, /*partials=*/false,
                     kOp);
  MixedGemmParams params = make_params(p, a, qweight, scales, zeros, bias);
  cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();

  if (plan.kernel == MixedKernel::kDense) {
    at::Tensor const out = dense_path(params, p, a, bias, stream, kOp);
    return p.gated ? silu_mul(out.to(at::kFloat)).to(a.scalar_type()) : out;
  }

  at::Tensor out = at::empty({p.m, p.n_out}, a.options());
  params.out = out.data_ptr();

  // Split-K partial sums (or a gated kernel's fp32 sums): a caching-allocator buffer on the
  // current stream, never cudaMalloc, so the call stays capturable in CUDA graphs. Uninitialized.
  at::Tensor workspace;
  if (plan.workspace_bytes > 0) {
    workspace = at::empty({static_cast<int64_t>(plan.workspace_bytes)},
                          a.options().dtype(at::kByte));
    params.workspace = workspace.data_ptr();
    params.workspace_bytes = plan.workspace_bytes;
  }

  cudaError_t const err = mixed_gemm_launch(params, plan, stream);
  TORCH_CHECK(err == cudaSuccess, kOp, "kernel launch failed (", plan.describe(), "): ",
              cudaGetErrorString(err));
  return out;
}

// mixed_gemm_partials: the plan made for partial sums writes them, split or not, straight into
// the returned [S, M, N] fp32 tensor (its workspace) and launches no reduce kernel. The dense
// path's output is the one partial sum.
at::Tensor mixed_gemm_partials_cuda(at::Tensor const& a, at::Tensor const& qweight,
                                    at::Tensor const& scales,
                                    std::optional<at::Tensor> const& zeros, int64_t bits,
                                    int64_t group_size, int64_t k, Schedule schedule) {
  auto const [p, sched] =
      check_partials_args(a, qweight, scales, zeros, bits, group_size, k, schedule);
  c10::cuda::CUDAGuard const device_guard(a.device());
  at::TensorOptions const f32 = a.options().dtype(at::kFloat);
  if (!p.runs_kernel) return at::empty({1, p.m, p.n}, f32);

  MixedPlan const plan =
      plan_on_device(p, group_size, a.scalar_type() == at::kBFloat16, sched, /*partials=*/true,
                     kPartialsOp);
  MixedGemmParams params = make_params(p, a, qweight, scales, zeros, std::nullopt);
  cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();
  if (plan.kernel == MixedKernel::kDense) {
    return dense_path(params, p, a, std::nullopt, stream, kPartialsOp).to(at::kFloat).unsqueeze(0);
  }

  at::Tensor partials = at::empty({plan.splits, p.m, p.n}, f32);
  TORCH_CHECK(plan.via_workspace && plan.partials &&
                  plan.workspace_bytes == static_cast<size_t>(partials.nbytes()),
              kPartialsOp, "internal error: the plan for partial sums (", plan.describe(),
              ") does not write [", plan.splits, ", ", p.m, ", ", p.n, "] fp32 sums");
  params.workspace = partials.data_ptr();
  params.workspace_bytes = plan.workspace_bytes;
  cudaError_t const err = mixed_gemm_launch(params, plan, stream);
  TORCH_CHECK(err == cudaSuccess, kPartialsOp, "kernel launch failed (", plan.describe(), "): ",
              cudaGetErrorString(err));
  return partials;
}
#endif  // CUTE_GEMM_NO_CUDA

// Autograd: forward redispatches below the autograd key; backward in the activation dtype:
//   dA = dOut @ dequant(W)   [M, N] @ [N, K]        dbias = sum_m dOut
// Gated, dOut is the gradient of SiLU(g) * u: the backward recomputes g and u (a @ dequant(W)^T +
// bias in fp32, from the saved a) and takes dOut' = [dOut * u * SiLU'(g), dOut * SiLU(g)] as dOut.
class MixedGemmFunction : public torch::autograd::Function<MixedGemmFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor const& a,
                            at::Tensor const& qweight, at::Tensor const& scales,
                            std::optional<at::Tensor> const& zeros, int64_t bits,
                            int64_t group_size, int64_t k, std::optional<at::Tensor> const& bias,
                            Schedule schedule, OptionalText activation) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("cute_gemm::mixed_gemm", "")
                         .typed<at::Tensor(at::Tensor const&, at::Tensor const&, at::Tensor const&,
                                           std::optional<at::Tensor> const&, int64_t, int64_t,
                                           int64_t, std::optional<at::Tensor> const&, Schedule,
                                           OptionalText)>();
    bool const gated = parse_activation(activation);
    ctx->saved_data["has_zeros"] = zeros.has_value();
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["gated"] = gated;
    ctx->saved_data["bits"] = bits;
    ctx->saved_data["group_size"] = group_size;
    ctx->saved_data["k"] = k;
    ctx->save_for_backward({qweight, scales, zeros.has_value() ? *zeros : at::Tensor(),
                            gated ? a : at::Tensor(),
                            gated && bias.has_value() ? *bias : at::Tensor()});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(a, qweight, scales, zeros, bits, group_size, k, bias, schedule, activation);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto const saved = ctx->get_saved_variables();
    bool const has_zeros = ctx->saved_data["has_zeros"].toBool();
    bool const has_bias = ctx->saved_data["has_bias"].toBool();
    bool const gated = ctx->saved_data["gated"].toBool();
    // needs_input_grad counts tensor inputs only: a, qweight, scales, [zeros], [bias].
    size_t const bias_edge = has_zeros ? 4 : 3;
    bool const grad_a_needed = ctx->needs_input_grad(0);
    bool const grad_bias_needed = has_bias && ctx->needs_input_grad(bias_edge);
    at::Tensor grad = grads[0];
    at::Tensor w;
    auto weight = [&](at::ScalarType dtype) {
      if (!w.defined()) {
        int64_t const bits = ctx->saved_data["bits"].toInt();
        int64_t const k = ctx->saved_data["k"].toInt();
        int64_t const group_size = ctx->saved_data["group_size"].toInt();
        std::optional<at::Tensor> zeros;
        if (has_zeros) zeros = saved[2];
        w = dequantize_weight(saved[0], saved[1], zeros, bits, group_size == -1 ? k : group_size,
                              k, dtype);
      }
      return w;
    };
    if (gated && (grad_a_needed || grad_bias_needed)) {
      at::Tensor const& a = saved[3];
      at::Tensor pre = at::matmul(a.to(at::kFloat), weight(a.scalar_type()).to(at::kFloat).t());
      if (has_bias) pre.add_(saved[4].to(at::kFloat));
      std::vector<at::Tensor> const gu = pre.chunk(2, 1);
      at::Tensor const sig = at::sigmoid(gu[0]);
      at::Tensor const g32 = grad.to(at::kFloat);
      at::Tensor const d_gate = g32 * gu[1] * sig * (1 + gu[0] * (1 - sig));
      at::Tensor const d_up = g32 * gu[0] * sig;
      grad = at::cat({d_gate, d_up}, 1).to(grad.scalar_type());
    }
    at::Tensor grad_a, grad_bias;
    if (grad_a_needed) grad_a = at::matmul(grad, weight(grad.scalar_type()));
    if (grad_bias_needed) grad_bias = grad.sum(0);
    // One entry per forward argument: a, qweight, scales, zeros, bits, group_size, k, bias,
    // schedule, activation.
    return {grad_a, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), grad_bias, at::Tensor(), at::Tensor()};
  }
};

at::Tensor mixed_gemm_autograd(at::Tensor const& a, at::Tensor const& qweight,
                               at::Tensor const& scales, std::optional<at::Tensor> const& zeros,
                               int64_t bits, int64_t group_size, int64_t k,
                               std::optional<at::Tensor> const& bias, Schedule schedule,
                               OptionalText activation) {
  if (at::GradMode::is_enabled()) {
    TORCH_CHECK(!scales.requires_grad() && !(zeros.has_value() && zeros->requires_grad()), kOp,
                "gradients w.r.t. scales/zeros are not supported (the quantized weight is ",
                "frozen; gradients flow to a and bias only); pass scales.detach() / ",
                "zeros.detach()");
  }
  return MixedGemmFunction::apply(a, qweight, scales, zeros, bits, group_size, k, bias,
                                  schedule, activation);
}

}  // namespace
}  // namespace cute_gemm

TORCH_LIBRARY_IMPL(cute_gemm, Autograd, m) {
  m.impl("mixed_gemm", &cute_gemm::mixed_gemm_autograd);
  m.impl("mixed_gemm_partials", &cute_gemm::mixed_gemm_partials_autograd);
}

TORCH_LIBRARY_IMPL(cute_gemm, CPU, m) {
  m.impl("mixed_gemm", &cute_gemm::mixed_gemm_cpu);
  m.impl("mixed_gemm_partials", &cute_gemm::mixed_gemm_partials_cpu);
}

#ifndef CUTE_GEMM_NO_CUDA
TORCH_LIBRARY_IMPL(cute_gemm, CUDA, m) {
  m.impl("mixed_gemm", &cute_gemm::mixed_gemm_cuda);
  m.impl("mixed_gemm_partials", &cute_gemm::mixed_gemm_partials_cuda);
}
#endif
