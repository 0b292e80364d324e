#pragma once
// wgmma.mma_async (sm_90a): the warpgroup-wide asynchronous MMA of Hopper. The 4 warps of a
// warpgroup (128 consecutive threads starting at a multiple of 128) issue it together:
//   D[64 x N] (+)= A[64 x 16] * B[16 x N],  f32 accumulators.
// Here A comes from registers ("RS": each warp w holds rows 16w .. 16w+15 in the mma.sync
// m16n8k16 A-fragment order, see mma_traits_sm90.hpp) and B from shared memory through a matrix
// descriptor, the desc_b argument, K-major (imm-trans-b = 0). WgmmaDesc (cute_gemm/wgmma_desc.hpp)
// derives it from the B tile's layout and make_wgmma_desc (arch/wgmma_desc_sm90.hpp) encodes it.
//
// The MMA runs asynchronously: its register operands must not be written, and its accumulators not
// read, until a wgmma_wait_group<> that covers its commit group returns. Registers written before
// the MMA need wgmma_fence() first; shared memory written by the generic proxy (ordinary stores,
// cp.async) needs fence_proxy_async_shared() in the writing threads before the barrier that
// publishes it.
//
// scale_d = 0 ignores the accumulators' old values (D = A * B): the first k step of a sum needs
// no cleared registers.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cute_gemm/arch/config_arch.hpp"
#include "cute_gemm/arch/wgmma_desc_sm90.hpp"

namespace cute_gemm {

// Orders this thread's earlier register writes before the next wgmma.mma_async reads them.
CG_DEVICE void wgmma_fence() {
#if defined(CG_ARCH_WGMMA_ENABLED)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

// Closes the group of wgmma.mma_async issued since the previous commit.
CG_DEVICE void wgmma_commit_group() {
#if defined(CG_ARCH_WGMMA_ENABLED)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

// Waits until at most N commit groups are still running.
template <int N>
CG_DEVICE void wgmma_wait_group() {
#if defined(CG_ARCH_WGMMA_ENABLED)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Pins an accumulator register after a wgmma_wait_group: the compiler may move plain register
// reads (a bit cast for an inline-asm operand) above the wait's asm, which ptxas then sees as a
// read of a running wgmma's accumulator and serializes every wgmma (C7514); a read of the value
// this returns cannot move above it, nor it above the wait.
CG_DEVICE void wgmma_fence_operand(float& reg) {
#if defined(CG_ARCH_WGMMA_ENABLED)
  asm volatile("" : "+f"(reg)::"memory");
#endif
}

// Makes this thread's generic-proxy writes to shared memory (st.shared, cp.async once waited
// for) visible to the async proxy (wgmma's shared-memory operand reads, TMA).
CG_DEVICE void fence_proxy_async_shared() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// D[64 x N] (+)= A[64 x 16] (registers) * B[16 x N] (shared memory, K-major), f32 accumulators.
// Per thread: a[4] = A-fragment registers, d[N / 2] accumulators ((T128, V N/2) -> (M64, N): warp
// w, lane 4g + t holds rows 16w + g (values 4i, 4i + 1) and 16w + g + 8 (4i + 2, 4i + 3) of
// columns 8i + 2t, 8i + 2t + 1).
template <class T, int N>
struct SM90_64xNx16_F32_RS;

// D[64 x N] (+)= A[64 x 16] * B[16 x N], both from shared memory through matrix descriptors
// (desc_a, desc_b), both K-major (imm-trans-a = imm-trans-b = 0), f32 accumulators d[N / 2] in the
// C fragment order of SM90_64xNx16_F32_RS. N = 128, 256: the dense GEMM's warpgroup tiles
// (kernels/gemm/gemm_wgmma_kernel.cuh).
template <class T, int N>
struct SM90_64xNx16_F32_SS;

// The asm statements where this pass has wgmma, a trap otherwise (operands still seen as used).
#if defined(CG_ARCH_WGMMA_ENABLED)
#define CG_WGMMA_ASM(...) asm volatile(__VA_ARGS__)
#define CG_WGMMA_SS_ASM(...) asm volatile(__VA_ARGS__)
#else
#define CG_WGMMA_ASM(...) detail::arch_unsupported(d, a, desc_b, scale_d)
#define CG_WGMMA_SS_ASM(...) detail::arch_unsupported(d, desc_a, desc_b, scale_d)
#endif

// The accumulators' asm operands, shared by every shape and kind: CG_WGMMA_Rn names operands
// %0 .. %(n - 1) in the instruction, CG_WGMMA_Dn binds them to d[0] .. d[n - 1] (read-write).
#define CG_WGMMA_R8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define CG_WGMMA_R16 CG_WGMMA_R8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define CG_WGMMA_R32                                                                               \
  CG_WGMMA_R16                                                                                     \
  ", %16, %17, %18, %19, %20, %21, %22, %23"                                                       \
  ", %24, %25, %26, %27, %28, %29, %30, %31"
#define CG_WGMMA_R64                                                                               \
  CG_WGMMA_R32                                                                                     \
  ", %32, %33, %34, %35, %36, %37, %38, %39"                                                       \
  ", %40, %41, %42, %43, %44, %45, %46, %47"                                                       \
  ", %48, %49, %50, %51, %52, %53, %54, %55"                                                       \
  ", %56, %57, %58, %59, %60, %61, %62, %63"
#define CG_WGMMA_R80                                                                               \
  CG_WGMMA_R64                                                                                     \
  ", %64, %65, %66, %67, %68, %69, %70, %71"                                                       \
  ", %72, %73, %74, %75, %76, %77, %78, %79"
#define CG_WGMMA_R96                                                                               \
  CG_WGMMA_R80                                                                                     \
  ", %80, %81, %82, %83, %84, %85, %86, %87"                                                       \
  ", %88, %89, %90, %91, %92, %93, %94, %95"
#define CG_WGMMA_R112                                                                              \
  CG_WGMMA_R96                                                                                     \
  ", %96, %97, %98, %99, %100, %101, %102, %103"                                                   \
  ", %104, %105, %106, %107, %108, %109, %110, %111"
#define CG_WGMMA_R128                                                                              \
  CG_WGMMA_R112                                                                                    \
  ", %112, %113, %114, %115, %116, %117, %118, %119"                                               \
  ", %120, %121, %122, %123, %124, %125, %126, %127"
#define CG_WGMMA_D8                                                                                \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define CG_WGMMA_D16                                                                               \
  CG_WGMMA_D8, "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),         \
  "+f"(d[14]), "+f"(d[15])
#define CG_WGMMA_D32                                                                               \
  CG_WGMMA_D16, "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),      \
  "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),       \
  "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define CG_WGMMA_D64                                                                               \
  CG_WGMMA_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),      \
  "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),       \
  "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),       \
  "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]),       \
  "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define CG_WGMMA_D80                                                                               \
  CG_WGMMA_D64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),      \
  "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),       \
  "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define CG_WGMMA_D96                                                                               \
  CG_WGMMA_D80, "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),      \
  "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]),       \
  "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define CG_WGMMA_D112                                                                              \
  CG_WGMMA_D96, "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),    \
  "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),              \
  "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
#define CG_WGMMA_D128                                                                              \
  CG_WGMMA_D112, "+f"(d[112]), "+f"(d[113]),                                                       \
  "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),              \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),              \
  "+f"(d[126]), "+f"(d[127])

// One specialization per (kind, N, element type): the element types differ only in the PTX type
// name; per N, the operands after the accumulators (A registers or descriptors, then scale_d)
// are numbered on from N / 2. RS for N = 16, 32, 64, 128, 160, 192, 256 (the token tiles of the
// mixed kernel, mixed_wgmma_kernel.cuh), SS for N = 128, 224, 256 (the dense GEMM's tiles,
// gemm_wgmma_config.hpp); other N of the PTX's 8 .. 256 would follow the same pattern.
#define CG_SM90_64xNx16_F32_RS(T, TYPE, N, RLIST, DOPS, AREGS, DESC, PRED)                         \
  template <>                                                                                      \
  struct SM90_64xNx16_F32_RS<T, N> {                                                               \
    using ARegisters = uint32_t[4];                                                                \
    using DRegisters = float[N / 2];                                                               \
    CG_DEVICE static void fma(float (&d)[N / 2], uint32_t const (&a)[4], uint64_t desc_b,          \
                              int scale_d) {                                                       \
      CG_WGMMA_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n"                               \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE                 \
                   " {" RLIST "}, {" AREGS "}, " DESC ", p, 1, 1, 0;\n}\n"                         \
                   : DOPS                                                                          \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),                      \
                     "r"(scale_d));                                                                \
    }                                                                                              \
  };

CG_SM90_64xNx16_F32_RS(__half, "f16", 16, CG_WGMMA_R8, CG_WGMMA_D8,
                       "%8, %9, %10, %11", "%12", "%13")
CG_SM90_64xNx16_F32_RS(__nv_bfloat16, "bf16", 16, CG_WGMMA_R8, CG_WGMMA_D8,
                       "%8, %9, %10, %11", "%12", "%13")
CG_SM90_64xNx16_F32_RS(__half, "f16", 32, CG_WGMMA_R16, CG_WGMMA_D16,
                       "%16, %17, %18, %19", "%20", "%21")
CG_SM90_64xNx16_F32_RS(__nv_bfloat16, "bf16", 32, CG_WGMMA_R16, CG_WGMMA_D16,
                       "%16, %17, %18, %19", "%20", "%21")
CG_SM90_64xNx16_F32_RS(__half, "f16", 64, CG_WGMMA_R32, CG_WGMMA_D32,
                       "%32, %33, %34, %35", "%36", "%37")
CG_SM90_64xNx16_F32_RS(__nv_bfloat16, "bf16", 64, CG_WGMMA_R32, CG_WGMMA_D32,
                       "%32, %33, %34, %35", "%36", "%37")
CG_SM90_64xNx16_F32_RS(__half, "f16", 128, CG_WGMMA_R64, CG_WGMMA_D64,
                       "%64, %65, %66, %67", "%68", "%69")
CG_SM90_64xNx16_F32_RS(__nv_bfloat16, "bf16", 128, CG_WGMMA_R64, CG_WGMMA_D64,
                       "%64, %65, %66, %67", "%68", "%69")
CG_SM90_64xNx16_F32_RS(__half, "f16", 160, CG_WGMMA_R80, CG_WGMMA_D80,
                       "%80, %81, %82, %83", "%84", "%85")
CG_SM90_64xNx16_F32_RS(__nv_bfloat16, "bf16", 160, CG_WGMMA_R80, CG_WGMMA_D80,
                       "%80, %81, %82, %83", "%84", "%85")
CG_SM90_64xNx16_F32_RS(__half, "f16", 192, CG_WGMMA_R96, CG_WGMMA_D96,
                       "%96, %97, %98, %99", "%100", "%101")
CG_SM90_64xNx16_F32_RS(__nv_bfloat16, "bf16", 192, CG_WGMMA_R96, CG_WGMMA_D96,
                       "%96, %97, %98, %99", "%100", "%101")
CG_SM90_64xNx16_F32_RS(__half, "f16", 256, CG_WGMMA_R128, CG_WGMMA_D128,
                       "%128, %129, %130, %131", "%132", "%133")
CG_SM90_64xNx16_F32_RS(__nv_bfloat16, "bf16", 256, CG_WGMMA_R128, CG_WGMMA_D128,
                       "%128, %129, %130, %131", "%132", "%133")
#undef CG_SM90_64xNx16_F32_RS

#define CG_SM90_64xNx16_F32_SS(T, TYPE, N, RLIST, DOPS, DESCS, PRED)                               \
  template <>                                                                                      \
  struct SM90_64xNx16_F32_SS<T, N> {                                                               \
    using DRegisters = float[N / 2];                                                               \
    CG_DEVICE static void fma(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,                 \
                              int scale_d) {                                                       \
      CG_WGMMA_SS_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n"                            \
                      "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE              \
                      " {" RLIST "}, " DESCS ", p, 1, 1, 0, 0;\n}\n"                               \
                      : DOPS                                                                       \
                      : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                   \
    }                                                                                              \
  };

CG_SM90_64xNx16_F32_SS(__half, "f16", 128, CG_WGMMA_R64, CG_WGMMA_D64,
                       "%64, %65", "%66")
CG_SM90_64xNx16_F32_SS(__nv_bfloat16, "bf16", 128, CG_WGMMA_R64, CG_WGMMA_D64,
                       "%64, %65", "%66")
CG_SM90_64xNx16_F32_SS(__half, "f16", 224, CG_WGMMA_R112, CG_WGMMA_D112,
                       "%112, %113", "%114")
CG_SM90_64xNx16_F32_SS(__nv_bfloat16, "bf16", 224, CG_WGMMA_R112, CG_WGMMA_D112,
                       "%112, %113", "%114")
CG_SM90_64xNx16_F32_SS(__half, "f16", 256, CG_WGMMA_R128, CG_WGMMA_D128,
                       "%128, %129", "%130")
CG_SM90_64xNx16_F32_SS(__nv_bfloat16, "bf16", 256, CG_WGMMA_R128, CG_WGMMA_D128,
                       "%128, %129", "%130")
#undef CG_SM90_64xNx16_F32_SS

#undef CG_WGMMA_R8
#undef CG_WGMMA_R16
#undef CG_WGMMA_R32
#undef CG_WGMMA_R64
#undef CG_WGMMA_R80
#undef CG_WGMMA_R96
#undef CG_WGMMA_R112
#undef CG_WGMMA_R128
#undef CG_WGMMA_D8
#undef CG_WGMMA_D16
#undef CG_WGMMA_D32
#undef CG_WGMMA_D64
#undef CG_WGMMA_D80
#undef CG_WGMMA_D96
#undef CG_WGMMA_D112
#undef CG_WGMMA_D128
#undef CG_WGMMA_ASM
#undef CG_WGMMA_SS_ASM

}  // namespace cute_gemm
