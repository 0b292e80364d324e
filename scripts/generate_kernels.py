#!/usr/bin/env python3
"""Writes one .cu per GEMM kernel instance (flash-attention style: one template instantiation per
translation unit, so they build in parallel) and the tables that list them. The instance types
are hand-written (kernels/gemm/gemm_config.hpp, kernels/mixed/mixed_instances.hpp); this script
only instantiates them.

Run after changing CONFIGS; the outputs are committed so a build needs no generation step.
    python3 scripts/generate_kernels.py
"""
import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "csrc", "kernels", "gemm", "generated")
MIXED_OUT = os.path.join(ROOT, "csrc", "kernels", "mixed", "generated")
ATTENTION_OUT = os.path.join(ROOT, "csrc", "kernels", "attention", "generated")

DTYPES = {"f16": "__half", "bf16": "__nv_bfloat16"}
# The decode attention kernel's head-dim classes (DecodeAttentionConfig::head_dim_class).
ATTENTION_HEAD_DIMS = (64, 128, 256)
# (BM, BN, BK, stages, warps_m, warps_n): large tiles for large problems, small ones so that
# small problems still fill the GPU's SMs. The heuristic in gemm_dispatch.cu picks between them
# (the measurements behind the list: benchmarks/results/NOTES.md).
CONFIGS = [
    (256, 128, 32, 4, 4, 2),
    (128, 128, 64, 3, 2, 2),
    (64, 64, 32, 3, 2, 2),
]
# The Hopper kernel (gemm_wgmma_kernel.cuh, GemmWgmmaConfig): (BM, BN, BK, stages), the largest
# tile first; BM is 64 per consumer warpgroup, BK one 128-byte line of K per stage. The smaller
# tiles multiply the CTAs of grids that would leave SMs idle. The 64-row tile runs only where its
# grid has at most one tile per SM (gemm_configs.hpp's gemm_wgmma_heuristic), so it is one CTA
# per SM with 8 stages: its lone consumer warpgroup keeps that many loads in flight. Every
# configuration is compiled for one CTA per SM (GemmWgmmaConfig's MinCtasPerSm default). The last
# field marks a wave-fill tile: the heuristic's walk skips it, and takes it instead of the widest
# tile where it runs in no more rounds: 224 columns divide 28672 (7 x 4096, Llama-3-8B's gate/up)
# into 128 column tiles, 512 tiles in 3.88 waves at M = 512 on 132 SMs where 256 columns leave 448
# in 3.39.
WGMMA_CONFIGS = [(128, 256, 64, 4, False), (128, 224, 64, 5, True), (128, 128, 64, 6, False),
                 (64, 128, 64, 8, False)]


# Mixed-input GEMM instances (kernels/mixed/mixed_instances.hpp says what each kind's parameters
# mean; benchmarks/results/NOTES.md has the measurements behind the choice of instances).
# mma.sync (mixed_gemm_kernel.cuh): (bits, m16 tiles per CTA, fine groups).
MIXED_CONFIGS = [(bits, mt, fine) for bits in (4, 8) for mt in (1, 2, 4) for fine in (False, True)]
# Hopper wgmma (sm_90a): (bits, token tile, n64 tiles per warpgroup (the config's NTiles), exact
# scales, consumer warpgroups, TMA producer warpgroup). The default plans round the weights but in
# INT4's 16- and 32-row tiles at groups of whole k blocks, which keep exact per-group scales
# (mixed_plan.cpp's default_wgmma_scales); INT8's 32-row tile has them by schedule (scales=exact).
# The 16-row tile is INT4's only (INT8 runs the 32-row tile from M = 9); its 64-column form (one
# n64 tile, half the registers, 4 CTAs per SM) runs where 128 columns would split K 8 ways or
# more or give each split at most 16 k blocks, or by schedule (tile_n=64). The producer
# (mixed_wgmma_ws_kernel.cuh) serves the 128-, 160-, 192- and 256-row tiles and INT8's 64-row
# tile; 160 and 192 rows fit M of 129-192, 257-384 and 577-768 more tightly than 256 rows in as
# few CTAs. INT8's warp-specialized tiles (64 rows and up) also come with exact scales, which they
# run where K is one group (per-channel scales: scaled once after the loop). INT4's 64-row tile,
# filled by TMA, has a cp.async form too (the last field), which the planner runs at M = 33-40 in
# long k loops (kCpAsyncMaxRows).
MIXED_WGMMA_CONFIGS = [(bits, tm, nt, exact, wg, producer, cp_async) for bits in (4, 8)
                       for tm, nt, exact, wg, producer, cp_async in (
                           (16, 2, False, 1, False, False), (16, 1, False, 1, False, False),
                           (16, 2, True, 1, False, False), (16, 1, True, 1, False, False),
                           (32, 2, False, 1, False, False),
                           (32, 2, True, 1, False, False), (64, 2, False, 1, bits == 8, False),
                           (64, 2, False, 1, False, True),
                           (128, 1, False, 2, True, False), (160, 1, False, 2, True, False),
                           (192, 1, False, 2, True, False), (256, 1, False, 2, True, False),
                           (64, 2, True, 1, bits == 8, False),
                           (128, 1, True, 2, True, False), (160, 1, True, 2, True, False),
                           (192, 1, True, 2, True, False), (256, 1, True, 2, True, False))
                       if (tm != 16 or bits == 4) and (not (exact and tm >= 64) or bits == 8)
                       and (not cp_async or bits == 4)]
# Decode, M <= 8 (mixed_decode_kernel.cuh): (bits, fine groups).
MIXED_DECODE_CONFIGS = [(bits, fine) for bits in (4, 8) for fine in (False, True)]
HEADER = "// Generated by scripts/generate_kernels.py; edit the script, not this file.\n"


def write_tu(out_dir, name, includes, body):
    """One generated translation unit: the includes, then body inside namespace cute_gemm."""
    with open(os.path.join(out_dir, name + ".cu"), "w") as f:
        f.write(HEADER + "".join(f'#include "{inc}"\n' for inc in includes) + "\n"
                "namespace cute_gemm {\n\n" + body + "\n}  // namespace cute_gemm\n")


def write_instance_list(path, comment, rows):
    """A generated .inc: `comment`, then one instance row (a macro call) per line."""
    with open(path, "w") as f:
        f.write(HEADER + comment + "".join(r + "\n" for r in rows))


def write_instances_header(path, launch_header, decls, table):
    """The header declaring the generated functions, then `table` (instance struct and array)."""
    with open(path, "w") as f:
        f.write(HEADER + f'#pragma once\n\n#include "{launch_header}"\n\n'
                "namespace cute_gemm {\n\n" + "\n".join(decls) + "\n\n" + table +
                "\n\n}  // namespace cute_gemm\n")


def name(dtype, cfg):
    bm, bn, bk, s, wm, wn = cfg
    return f"gemm_{dtype}_{bm}x{bn}x{bk}_s{s}_w{wm}x{wn}"


def wgmma_name(dtype, cfg):
    bm, bn, bk, s = cfg[:4]
    return f"gemm_wgmma_{dtype}_{bm}x{bn}x{bk}_s{s}"


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".cu"):
            os.remove(os.path.join(OUT, f))
    decls = []
    for dtype, ctype in DTYPES.items():
        for cfg in CONFIGS:
            n = name(dtype, cfg)
            args = ", ".join(str(x) for x in cfg)
            write_tu(OUT, n, ["kernels/gemm/gemm_kernel.cuh",
                              "kernels/gemm/generated/gemm_instances.hpp"],
                     f"cudaError_t {n}(GemmParams const& p, cudaStream_t stream) {{\n"
                     f"  return launch_gemm<GemmKernelConfig<{ctype}, {args}>>(p, stream);\n"
                     "}\n")
            decls.append(f"cudaError_t {n}(GemmParams const& p, cudaStream_t stream);")
        for cfg in WGMMA_CONFIGS:
            bm, bn, bk, stages, _ = cfg
            n = wgmma_name(dtype, cfg)
            write_tu(OUT, n, ["kernels/gemm/gemm_wgmma_kernel.cuh",
                              "kernels/gemm/generated/gemm_instances.hpp"],
                     f"cudaError_t {n}(GemmParams const& p, int splits, cudaStream_t stream) {{\n"
                     f"  return launch_gemm_wgmma<GemmWgmmaConfig<{ctype}, {bn}, {stages}, "
                     f"{bm // 64}>>(p, splits, stream);\n}}\n")
            decls.append(f"cudaError_t {n}(GemmParams const& p, int splits, cudaStream_t stream);")
    with open(os.path.join(OUT, "gemm_configs.inc"), "w") as f:
        f.write(HEADER + "// CG_GEMM_CONFIG(BM, BN, BK, stages, warps_m, warps_n) for each "
                "configuration; host tests expand it.\n" +
                "".join("CG_GEMM_CONFIG(%d, %d, %d, %d, %d, %d)\n" % cfg for cfg in CONFIGS))
    with open(os.path.join(OUT, "gemm_wgmma_config.inc"), "w") as f:
        f.write(HEADER + "// CG_GEMM_WGMMA_CONFIG(BM, BN, BK, stages, wave_fill) of each Hopper "
                "configuration, largest first.\n" +
                "".join("CG_GEMM_WGMMA_CONFIG(%d, %d, %d, %d, %s)\n" % (*c[:4], cxx_bool(c[4]))
                        for c in WGMMA_CONFIGS))
    rows = ",\n".join(
        "    {%d, %d, %d, %d, %d, %d, %s, %s}" % (*cfg, name("f16", cfg), name("bf16", cfg))
        for cfg in CONFIGS)
    write_instances_header(
        os.path.join(OUT, "gemm_instances.hpp"), "kernels/gemm/gemm_launch.hpp", decls,
        "struct GemmInstance {\n  int bm, bn, bk, stages, warps_m, warps_n;\n"
        "  cudaError_t (*f16)(GemmParams const&, cudaStream_t);\n"
        "  cudaError_t (*bf16)(GemmParams const&, cudaStream_t);\n};\n\n"
        "// Largest tiles first.\ninline constexpr GemmInstance kGemmInstances[] = {\n"
        + rows + "\n};\n\n"
        "// The Hopper kernel (gemm_wgmma_kernel.cuh), sm_90a, widest tile first.\n"
        "struct GemmWgmmaInstance {\n  int bm, bn, bk, stages;\n"
        "  cudaError_t (*f16)(GemmParams const&, int, cudaStream_t);  // (params, splits, stream)\n"
        "  cudaError_t (*bf16)(GemmParams const&, int, cudaStream_t);\n};\n\n"
        "inline constexpr GemmWgmmaInstance kGemmWgmmaInstances[] = {\n" +
        ",\n".join("    {%d, %d, %d, %d, %s,\n     %s}" % (*c[:4], wgmma_name("f16", c),
                                                        wgmma_name("bf16", c))
                   for c in WGMMA_CONFIGS) + "\n};")


def mixed_warps(mt):
    return 4 if mt == 1 else 8


def cxx_bool(x):
    return "true" if x else "false"


def write_mixed_instance(name, kernel_header, config, launch_call, occupancy_call):
    """One generated TU: `name`'s launcher, which runs a plan on the instance `config`, and
    `name`_occupancy, the resident CTAs per SM of that launch on the current device (the kernel
    header's occupancy query, for the test that holds the planner's model against the GPU)."""
    using = f"using {name}_config = {config};"
    if len(using) > 100:
        using = using.replace(" = ", " =\n    ")
    head = f"cudaError_t {name}("
    params = "MixedGemmParams const& p, MixedPlan const& plan, cudaStream_t stream) {"
    launch = head + params if len(head + params) <= 100 else (
        head + "MixedGemmParams const& p, MixedPlan const& plan,\n" + " " * len(head) +
        "cudaStream_t stream) {")
    call = f"  return mixed::{launch_call.format(cfg=name + '_config')};"
    if len(call) > 100:
        call = call.replace("(p, ", "(\n      p, ", 1)
    occupancy_head = f"cudaError_t {name}_occupancy(MixedPlan const& plan, int* ctas_per_sm) {{"
    if len(occupancy_head) > 100:
        occupancy_head = occupancy_head.replace("(MixedPlan", "(\n    MixedPlan", 1)
    occupancy_call = f"  return mixed::{occupancy_call}<{name}_config>(plan, ctas_per_sm);"
    if len(occupancy_call) > 100:
        occupancy_call = occupancy_call.replace("(plan, ", "(\n      plan, ", 1)
    occupancy = f"{occupancy_head}\n{occupancy_call}\n}}\n"
    assert all(len(line) <= 100 for line in occupancy.splitlines()), name
    write_tu(MIXED_OUT, name, [kernel_header, "kernels/mixed/mixed_instances.hpp"],
             f"{using}\n\n{launch}\n{call}\n}}\n\n{occupancy}")


def main_mixed():
    os.makedirs(MIXED_OUT, exist_ok=True)
    for f in os.listdir(MIXED_OUT):
        if f.endswith(".cu") or f.endswith(".hpp"):
            os.remove(os.path.join(MIXED_OUT, f))
    rows = []
    for dtype, ctype in DTYPES.items():
        bf16 = cxx_bool(dtype == "bf16")
        for bits, tt, fine in [(b, 1, f) for b, f in MIXED_DECODE_CONFIGS]:
            n = f"mixed_decode_{dtype}_int{bits}_m{8 * tt}" + ("_fine" if fine else "")
            write_mixed_instance(
                n, "kernels/mixed/mixed_decode_kernel.cuh",
                f"mixed::DecodeInstance<{ctype}, {bf16}, {bits}, {cxx_bool(fine)}>",
                "launch_mixed_decode<{cfg}>(p, plan, stream)",
                "mixed_decode_occupancy")
            rows.append(f"CG_MIXED_DECODE({n}, {bf16}, {bits}, {cxx_bool(fine)})")
        for bits, mt, fine in MIXED_CONFIGS:
            n = f"mixed_{dtype}_int{bits}_m{16 * mt}" + ("_fine" if fine else "")
            write_mixed_instance(
                n, "kernels/mixed/mixed_gemm_kernel.cuh",
                f"mixed::MmaInstance<{ctype}, {bf16}, {bits}, {mt}, {cxx_bool(fine)}>",
                "launch_mixed<{cfg}>(p, plan, stream)", "mixed_occupancy")
            rows.append(f"CG_MIXED_MMA({n}, {bf16}, {bits}, {mt}, {cxx_bool(fine)})")
        for bits, tm, nt, exact, wg, producer, cp_async in MIXED_WGMMA_CONFIGS:
            tile_n = 64 * nt * wg
            n = (f"mixed_wgmma_{dtype}_int{bits}_m{tm}" + (f"_wg{wg}" if wg > 1 else "") +
                 (f"_n{tile_n}" if tile_n != 128 else "") + ("_exact" if exact else "") +
                 ("_cp_async" if cp_async else ""))
            args = (f"{bits}, {tm}, {nt}, {cxx_bool(exact)}, {wg}, {cxx_bool(producer)}, "
                    f"{cxx_bool(cp_async)}")
            write_mixed_instance(
                n, "kernels/mixed/mixed_wgmma_launch.cuh",
                f"mixed::WgmmaInstance<{ctype}, {bf16}, {args}>",
                "launch_mixed_wgmma<{cfg}>(p, plan, stream)", "mixed_wgmma_occupancy")
            rows.append(f"CG_MIXED_WGMMA({n}, {bf16}, {args})")
    write_instance_list(os.path.join(MIXED_OUT, "mixed_instances.inc"),
                        "// The mixed GEMM's instances, one generated TU each (defining `name`, "
                        "the launcher, and\n// `name`_occupancy); the row macros are defined "
                        "where the table is expanded\n// (kernels/mixed/mixed_instances.hpp).\n",
                        rows)


def main_attention():
    """The decode attention kernel, one TU per (element type, head-dim class), and the list of
    them (decode_attention_instances.inc, expanded by decode_attention_launch.hpp)."""
    os.makedirs(ATTENTION_OUT, exist_ok=True)
    for stale in glob.glob(os.path.join(ATTENTION_OUT, "decode_attention_*.cu")):
        os.remove(stale)
    rows = []
    for dtype, ctype in DTYPES.items():
        for dim in ATTENTION_HEAD_DIMS:
            n = f"decode_attention_{dtype}_d{dim}"
            write_tu(ATTENTION_OUT, n, ["kernels/attention/decode_attention_kernel.cuh",
                                        "kernels/attention/decode_attention_launch.hpp"],
                     "namespace attention {\n\n"
                     f"cudaError_t {n}(DecodeAttentionParams const& p, bool pdl, "
                     "cudaStream_t stream) {\n"
                     f"  return launch_decode_attention<{ctype}, {dim}>(p, pdl, stream);\n}}\n\n"
                     f"bool {n}_clusters() {{\n"
                     f"  return decode_attention_has_clusters<{ctype}, {dim}>();\n}}\n"
                     "\n}  // namespace attention\n")
            rows.append(f"CG_DECODE_ATTENTION({n}, {cxx_bool(dtype == 'bf16')}, {dim})")
    write_instance_list(os.path.join(ATTENTION_OUT, "decode_attention_instances.inc"),
                        "// The decode attention kernel's instances, one generated TU each; the "
                        "row macro is\n// defined where the list is expanded "
                        "(kernels/attention/decode_attention_launch.hpp).\n", rows)


if __name__ == "__main__":
    main()
    main_mixed()
    main_attention()
