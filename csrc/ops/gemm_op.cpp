// cute_gemm::gemm -- the torch op around the half-precision GEMM kernel:
//
//   C[M, N] = a[M, K] @ b[N, K]^T (+ bias[N]),  fp16 or bf16, fp32 accumulation.
//
// One file per op, flash-attention style: check_gemm_args() validates everything the kernel
// relies on (shared by the CPU and CUDA kernels, so both reject the same inputs), then each
// backend dispatches. The schema is declared in library.cpp; the fake kernel is in
// cute_gemm/ops.py. Autograd is registered here, in C++, so that calls which need no gradient
// pay no Python overhead; the backward uses at::matmul.
//
// The CPU kernel is the reference (fp32 matmul of the half inputs, rounded once). The CUDA kernel
// calls cute_gemm::gemm_launch (kernels/gemm/gemm_launch.hpp); everything CUDA-specific is under
// CUTE_GEMM_NO_CUDA so this file also builds in a CPU-only extension.
//
// `config` (str?, None = the heuristic) names one compiled tile configuration
// (kernels/gemm/gemm_configs.hpp; cute_gemm._C._gemm_configs() lists them) for the CUDA kernel to
// run. Every backend checks the name, so a call that the CUDA kernel would refuse fails on CPU and
// under tracing too; the CPU reference has nothing to choose and computes the same result.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/gemm/gemm_configs.hpp"
#include "ops/op_common.hpp"

#ifndef CUTE_GEMM_NO_CUDA
// c10's stream/guard headers, not ATen/cuda/CUDAContext.h: that one pulls in cuBLAS/cuSPARSE
// headers, which a minimal CUDA toolkit lacks. c10::cuda::getCurrentCUDAStream is the function
// at::cuda::getCurrentCUDAStream names.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/gemm/gemm_launch.hpp"
#endif

namespace cute_gemm {
namespace {

constexpr char const* kOp = "cute_gemm.gemm: ";

using Config = std::optional<c10::string_view>;

// What check_gemm_args found: the problem size and, when a kernel has to run, the leading
// strides to hand it.
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0;
  // False when M, N or K is 0: the result is empty (M or N is 0) or zeros/bias (K is 0), and no
  // stride or alignment requirement applies.
  bool runs_kernel = false;
  // The configuration `config` names (an index into kGemmConfigs), -1 for the heuristic.
  int config = -1;
};

// The config argument as an index into kGemmConfigs: -1 for None, a ValueError for a name that is
// not compiled (the message lists the names: fake kernel in cute_gemm/ops.py says the same).
int config_index(Config const& config) {
  if (!config.has_value()) return -1;
  std::string const name(*config);
  int const index = find_gemm_config(name);
  TORCH_CHECK_VALUE(index >= 0, kOp, "config must be None (the heuristic) or one of the compiled ",
                    "configurations ", gemm_config_names_text(), "; got '", name, "'");
  return index;
}

// Every check of the op, shared by all backends. Throws (TORCH_CHECK -> RuntimeError in Python;
// ValueError for an unknown config) with a message that names the argument, what was expected and
// what came.
GemmProblem check_gemm_args(at::Tensor const& a, at::Tensor const& b,
                            std::optional<at::Tensor> const& bias, Config const& config) {
  ops::check_2d(kOp, a, "a", "[M, K]");
  ops::check_2d(kOp, b, "b", "[N, K]");
  ops::check_half_dtype(kOp, a, "a");
  ops::check_same_dtype(kOp, b, "b", a);
  TORCH_CHECK(b.device() == a.device(), "cute_gemm.gemm: a and b must be on the same device; got ",
              "a on ", a.device(), " and b on ", b.device());

  GemmProblem p;
  p.m = a.size(0);
  p.n = b.size(0);
  p.k = a.size(1);
  TORCH_CHECK(b.size(1) == p.k, "cute_gemm.gemm: b.size(1) must equal a.size(1) (K; a is [M, K], ",
              "b is [N, K] and C = a @ b.T); got a of shape ", a.sizes(), " and b of shape ",
              b.sizes());
  TORCH_CHECK(p.k % ops::kAlignElems == 0, "cute_gemm.gemm: K must be a multiple of ",
              ops::kAlignElems, " (16-byte rows); got K=", p.k);

  if (bias.has_value()) ops::check_bias(kOp, *bias, a, p.n, "b.size(0)");
  // Checked even when no kernel runs: whether a name is valid must not depend on the shape.
  p.config = config_index(config);

  p.runs_kernel = p.m > 0 && p.n > 0 && p.k > 0;
  if (!p.runs_kernel) return p;

  p.lda = ops::check_rows(kOp, a, "a");
  p.ldb = ops::check_rows(kOp, b, "b");
  if (bias.has_value()) ops::check_bias_layout(kOp, *bias, p.n);
  ops::check_int32(kOp, p.m, "M (a.size(0))");
  ops::check_int32(kOp, p.n, "N (b.size(0))");
  ops::check_int32(kOp, p.k, "K (a.size(1))");
  ops::check_int32(kOp, p.lda, "a.stride(0)");
  ops::check_int32(kOp, p.ldb, "b.stride(0)");
  return p;
}

// The result when no kernel runs: [M, N] empty (M or N is 0), or zeros (+ bias) when K is 0 --
// what torch.matmul gives for an empty reduction.
at::Tensor gemm_without_kernel(GemmProblem const& p, at::Tensor const& a,
                               std::optional<at::Tensor> const& bias) {
  if (bias.has_value() && p.m > 0 && p.n > 0) {
    return bias->unsqueeze(0).expand({p.m, p.n}).contiguous();
  }
  return at::zeros({p.m, p.n}, a.options());
}

// CPU: the reference. fp32 matmul of the (exact) half inputs, bias added in fp32, rounded once.
at::Tensor gemm_cpu(at::Tensor const& a, at::Tensor const& b,
                    std::optional<at::Tensor> const& bias, Config config) {
  GemmProblem const p = check_gemm_args(a, b, bias, config);
  if (!p.runs_kernel) return gemm_without_kernel(p, a, bias);
  at::Tensor acc = at::matmul(a.to(at::kFloat), b.to(at::kFloat).t());
  if (bias.has_value()) acc.add_(bias->to(at::kFloat));
  return acc.to(a.scalar_type());
}

#ifndef CUTE_GEMM_NO_CUDA
at::Tensor gemm_cuda(at::Tensor const& a, at::Tensor const& b,
                     std::optional<at::Tensor> const& bias, Config config) {
  GemmProblem const p = check_gemm_args(a, b, bias, config);
  c10::cuda::CUDAGuard const device_guard(a.device());
  if (!p.runs_kernel) return gemm_without_kernel(p, a, bias);

  // The output is contiguous (ldc = N); the kernel stores 16-byte vectors where rows allow it and
  // single elements otherwise, so any N works without a padded buffer.
  at::Tensor c = at::empty({p.m, p.n}, a.options());

  GemmParams params;
  params.a = a.data_ptr();
  params.b = b.data_ptr();
  params.bias = bias.has_value() ? bias->data_ptr() : nullptr;
  params.c = c.data_ptr();
  params.m = static_cast<int>(p.m);
  params.n = static_cast<int>(p.n);
  params.k = static_cast<int>(p.k);
  params.lda = static_cast<int>(p.lda);
  params.ldb = static_cast<int>(p.ldb);
  params.ldc = static_cast<int>(p.n);
  params.dtype = a.scalar_type() == at::kHalf ? HalfType::kFloat16 : HalfType::kBFloat16;

  TORCH_CHECK_VALUE(!is_gemm_wgmma_config(p.config) || gemm_wgmma_usable(), kOp, "config '",
                    gemm_config_name(p.config),
                    "' needs a compute capability 9.0 GPU and a build with sm_90a code "
                    "(TORCH_CUDA_ARCH_LIST with 9.0a); this device or build has none");
  // The configuration that runs, chosen once: the workspace size, the launch and a failure's
  // message all take this index.
  int const ran = p.config >= 0 ? p.config : gemm_heuristic_config(params.m, params.n, params.k);
  // Split-K partial sums (the Hopper kernel on a grid of few tiles), from the caching allocator on
  // the current stream.
  at::Tensor workspace;
  if (size_t const bytes = gemm_workspace_bytes(params, ran); bytes > 0) {
    workspace = at::empty({static_cast<int64_t>(bytes)}, a.options().dtype(at::kByte));
    params.workspace = workspace.data_ptr();
  }
  cudaError_t const err = gemm_launch(params, c10::cuda::getCurrentCUDAStream(), ran);
  if (err != cudaSuccess) {
    TORCH_CHECK(false, "cute_gemm.gemm: kernel launch failed (config '", gemm_config_name(ran),
                p.config >= 0 ? "'" : "', the heuristic's", "): ", cudaGetErrorString(err));
  }
  return c;
}
#endif  // CUTE_GEMM_NO_CUDA

// Autograd: forward redispatches below the autograd key (to the CPU/CUDA kernel, or the fake
// kernel under tracing); backward is plain at::matmul in the inputs' dtype.
//   dA = dC @ B   [M, N] @ [N, K]      dB = dC^T @ A   [N, M] @ [M, K]      dbias = sum_m dC
class GemmFunction : public torch::autograd::Function<GemmFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor const& a,
                            at::Tensor const& b, std::optional<at::Tensor> const& bias,
                            Config config) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("cute_gemm::gemm", "")
                         .typed<at::Tensor(at::Tensor const&, at::Tensor const&,
                                           std::optional<at::Tensor> const&, Config)>();
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->save_for_backward({a, b});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(a, b, bias, config);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto const saved = ctx->get_saved_variables();
    at::Tensor const& a = saved[0];
    at::Tensor const& b = saved[1];
    at::Tensor const& grad = grads[0];
    // needs_input_grad counts tensor inputs only: bias is edge 2 when it was given.
    bool const has_bias = ctx->saved_data["has_bias"].toBool();
    at::Tensor grad_a, grad_b, grad_bias;
    if (ctx->needs_input_grad(0)) grad_a = at::matmul(grad, b);
    if (ctx->needs_input_grad(1)) grad_b = at::matmul(grad.t(), a);
    if (has_bias && ctx->needs_input_grad(2)) grad_bias = grad.sum(0);
    // One entry per forward argument: a, b, bias, config.
    return {grad_a, grad_b, grad_bias, at::Tensor()};
  }
};

at::Tensor gemm_autograd(at::Tensor const& a, at::Tensor const& b,
                         std::optional<at::Tensor> const& bias, Config config) {
  return GemmFunction::apply(a, b, bias, config);
}

}  // namespace
}  // namespace cute_gemm

TORCH_LIBRARY_IMPL(cute_gemm, Autograd, m) { m.impl("gemm", &cute_gemm::gemm_autograd); }

TORCH_LIBRARY_IMPL(cute_gemm, CPU, m) { m.impl("gemm", &cute_gemm::gemm_cpu); }

#ifndef CUTE_GEMM_NO_CUDA
TORCH_LIBRARY_IMPL(cute_gemm, CUDA, m) { m.impl("gemm", &cute_gemm::gemm_cuda); }
#endif
