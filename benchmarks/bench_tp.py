"""Tensor-parallel decode: a Llama-3-8B-shaped model (32 layers, random weights, bf16) in bf16 and
cute_gemm INT4 g128, on one GPU and tensor parallel over ``--world`` GPUs (cute_gemm.distributed's
styles through transformers' ``base_model_tp_plan``, NCCL); decode tokens/s at batch 1 and 16,
each step one CUDA-graph replay (bench_decode's timing), and the GPU time of the all-reduces per
step (torch.profiler over uncaptured steps: the NCCL kernels).

    python benchmarks/bench_tp.py [--world 2] [--batch 1,16] [--variants bf16,int4]
    python benchmarks/bench_tp.py --cpu-smoke    # 2 gloo ranks on the CPU, a tiny model

Each world size runs in processes of its own (one per GPU; world 1 alone on GPU 0, before the
tensor-parallel run), every rank building the same model from the same seed, so the shards are
taken from each rank's own copy (``src_data_rank=None``: no scatter). The quantized variant is
unfused (fused projections are not tensor parallel) with the output head kept 16-bit and sharded
column-wise like the embedding row-wise, as the test of the styles does. tokens/s are rank 0's
(every rank times the same steps); "vs 1 GPU" is the same variant and batch on one GPU in the
same run.

NVLink multicast stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 are set for every rank, whatever the caller's environment says (on a
shared host, a program that uses multicast can take the GPUs out of service).

Writes tp_<gpu>.json / .md / .png (tokens/s of each variant on 1 and --world GPUs by batch size;
needs matplotlib, --no-plot skips it) under --out (default benchmarks/results/) and prints the
table.
"""

import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import bench_decode  # noqa: E402
import bench_model  # noqa: E402
import common  # noqa: E402
from cute_gemm.demo import int_list  # noqa: E402

NCCL_KIND = "collectives (NCCL)"  # bench_model.KERNEL_KINDS' name for the NCCL kernels
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
VARIANTS = {
    "bf16": None,
    "int4": dict(bits=4, group_size=128, symmetric=True, fuse=False),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=2,
                   help="GPUs of the tensor-parallel run (2); 1: the one-GPU rows only (a check "
                        "of the code path on a one-GPU machine)")
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--batch", type=int_list, default=[1, 16])
    p.add_argument("--variants", default="bf16,int4")
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--steps", type=int, default=32, help="decode steps per timed run (32)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs; the median is reported")
    p.add_argument("--profile", type=int, default=8, metavar="STEPS",
                   help="uncaptured steps profiled for the all-reduce time (0: skip)")
    p.add_argument("--tag", default="")
    p.add_argument("--out", default=None)
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    p.add_argument("--cpu-smoke", action="store_true",
                   help="2 gloo ranks on the CPU, a 2-layer model of small dimensions: checks "
                        "the code path; measures nothing")
    args = p.parse_args(argv)
    args.variants = args.variants.split(",")
    for v in args.variants:
        if v not in VARIANTS:
            p.error(f"--variants: expected names from {sorted(VARIANTS)}, got {v!r}")
    if args.world < 1:
        p.error(f"--world: expected at least 1, got {args.world}")
    if args.steps < 1 or args.repeats < 1 or args.layers < 1 or min(args.batch) < 1:
        p.error("--steps, --repeats, --layers and --batch must be positive")
    if args.cpu_smoke:
        args.layers, args.prompt = min(args.layers, 2), min(args.prompt, 8)
        args.steps, args.repeats, args.profile = min(args.steps, 3), 1, 0
        args.batch = [b for b in args.batch if b <= 2] or [1]
    return args


def tp_model_plan(model):
    """transformers' plan for the decoder layers as cute_gemm's styles, plus the embedding
    (row-wise, replicated input) and the 16-bit head (column-wise, replicated output)."""
    from torch.distributed.tensor import Replicate

    from cute_gemm.distributed import ColwiseParallel, RowwiseParallel, tp_plan

    plan = tp_plan(model.config.base_model_tp_plan, prefix="model.")
    plan["model.embed_tokens"] = RowwiseParallel(input_layouts=Replicate())
    plan["lm_head"] = ColwiseParallel(output_layouts=Replicate())
    return plan


def nccl_ms_per_step(dec, steps):
    """GPU ms per decode step of the collectives' kernels over ``steps`` steps (CUDA-graph
    replays where capture works; bench_model.profile_steps' kinds), and the whole step's kernel
    time (busy ms: the sum of the kernels' durations)."""
    kinds = bench_model.profile_steps(dec, steps)[0]
    return kinds.get(NCCL_KIND, (0.0, 0.0, 0))[0], kinds["total"][0]


def rank_rows(rank, world, args, device):
    """This rank's part of one world size's run: every variant and batch size; rank 0 returns
    the rows."""
    import transformers

    import cute_gemm
    from cute_gemm.distributed import parallelize_module

    dims = dict(bench_decode.SMOKE if args.cpu_smoke else bench_decode.LLAMA3_8B)
    mesh = None
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.type, (world,))
    step_args = argparse.Namespace(prompt=args.prompt, steps=args.steps, repeats=args.repeats,
                                   mode="graph" if device.type == "cuda" else "eager")
    rows = []
    for name in args.variants:
        t0 = time.perf_counter()
        model = bench_decode.build_model(transformers, dims, args.layers, device, torch.bfloat16)
        settings = VARIANTS[name]
        note = "16-bit weights"
        if settings is not None:
            summary = cute_gemm.quantize_model(model, skip=("lm_head",), progress=False,
                                               **settings)
            note = f"{len(summary.converted)} layers quantized, head 16-bit"
        if mesh is not None:
            parallelize_module(model, mesh, tp_model_plan(model), src_data_rank=None)
            note += f", tensor parallel over {world}"
        build_s = time.perf_counter() - t0
        for batch in args.batch:
            row = bench_decode.bench_variant(transformers, model, batch, step_args, device)
            row.update(variant=name, world=world, note=note, build_s=round(build_s, 1),
                       step_mode=row.pop("mode"))
            if args.profile and device.type == "cuda":
                dec = bench_decode.Decoder(transformers, model, batch, args.prompt,
                                           3 + args.profile, device)
                with torch.no_grad():
                    dec.prefill()
                nccl, row["kernel_ms"] = nccl_ms_per_step(dec, args.profile)
                row["allreduce_ms"] = nccl if world > 1 else None  # one GPU: no collectives
                del dec
            rows.append(row)
            if rank == 0:
                print(f"  {name:<5} world {world} B={batch:<3} {row['ms_per_step']:8.3f} ms/step "
                      f"{row['tokens_per_s']:9.1f} tok/s  agree {row['agree']:.3f}  "
                      f"all-reduce {row.get('allreduce_ms') or 0.0:.3f} ms/step "
                      f"[{row['step_mode']}]", flush=True)
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def plot(path, rows, title):
    """tokens/s of each (variant, GPUs) over the batch sizes: one line per pair."""
    batches = sorted({r["batch"] for r in rows})
    series = {}
    for variant, world in dict.fromkeys((r["variant"], r["world"]) for r in rows):
        by = {r["batch"]: r["tokens_per_s"] for r in rows
              if r["variant"] == variant and r["world"] == world}
        series[f"{variant}, {world} GPU{'s' if world > 1 else ''}"] = [
            by.get(b, float("nan")) for b in batches]
    return common.plot_series(path, [f"batch {b}" for b in batches], series, title,
                              ylabel="decode tokens/s (same run)")


def _worker(rank, world, port, args, queue):
    os.environ.update(NO_MULTICAST)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cpu")
    if not args.cpu_smoke:
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo" if args.cpu_smoke else "nccl", rank=rank,
                                world_size=world)
    try:
        rows = rank_rows(rank, world, args, device)
        if world > 1:
            torch.distributed.barrier()
        queue.put(("ok", rank, rows if rank == 0 else None))
    except BaseException as e:  # noqa: BLE001  (reported by the parent, then re-raised)
        import traceback

        queue.put(("error", rank, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        raise
    finally:
        if world > 1:
            torch.distributed.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(world, args):
    """Rank 0's rows of a run over ``world`` processes (spawned; NCCL or, smoke, gloo)."""
    import torch.multiprocessing as mp

    os.environ.update(NO_MULTICAST)
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    failure = None
    try:
        mp.start_processes(_worker, args=(world, _free_port(), args, queue), nprocs=world,
                           join=True, start_method="spawn")
    except Exception as e:  # noqa: BLE001  (the ranks' own messages are more useful)
        failure = str(e)
    rows, errors = None, []
    while not queue.empty():
        status, rank, payload = queue.get()
        if status == "error":
            errors.append(f"rank {rank}: {payload}")
        elif rank == 0:
            rows = payload
    if errors or rows is None:
        raise RuntimeError(f"world {world} failed:\n" + ("\n".join(errors) or str(failure)))
    return rows


def main(argv=None):
    args = parse_args(argv)
    if not args.cpu_smoke:
        common.require_cuda("bench_tp.py")
        if torch.cuda.device_count() < args.world:
            sys.exit(f"bench_tp.py: --world {args.world} needs {args.world} GPUs, found "
                     f"{torch.cuda.device_count()}")
    import transformers

    rows = []
    for world in sorted({1, args.world}):
        print(f"world {world}:", flush=True)
        rows += run_world(world, args)
    one = {(r["variant"], r["batch"]): r["ms_per_step"] for r in rows if r["world"] == 1}
    for r in rows:
        r["vs_one_gpu"] = one[(r["variant"], r["batch"])] / r["ms_per_step"]
    dims = dict(bench_decode.SMOKE if args.cpu_smoke else bench_decode.LLAMA3_8B)
    device = torch.device("cpu" if args.cpu_smoke else "cuda")
    meta = bench_decode.model_meta(transformers, device, args.layers, dims, "bfloat16")
    meta.update({"world": args.world, "prompt_tokens": args.prompt, "decode_steps": args.steps,
                 "repeats": args.repeats, "profiled_steps": args.profile,
                 "multicast": "off (" + ", ".join(f"{k}={v}" for k, v in NO_MULTICAST.items())
                              + ")"})
    if not args.cpu_smoke:
        meta["gpu_count"] = torch.cuda.device_count()
    stem = "tp_cpu-smoke" if args.cpu_smoke else "tp_" + common.slug(meta["gpu_name"])
    stem += f"_{args.tag}" if args.tag else ""
    columns = [("variant", "weights"), ("world", "GPUs"), ("batch", "batch"),
               ("ms_per_step", "ms/step"), ("tokens_per_s", "tokens/s"),
               ("vs_one_gpu", "vs 1 GPU"), ("allreduce_ms", "all-reduce ms/step"),
               ("kernel_ms", "kernel ms/step"), ("agree", "agree"), ("step_mode", "step"),
               ("note", "model")]
    notes = [
        f"- Greedy decode, static KV cache; ms/step: the median of {args.repeats} runs of "
        f"{args.steps} steps, each step one CUDA-graph replay (the CPU smoke test: eager).",
        "- all-reduce ms/step: GPU time of the NCCL kernels over uncaptured steps "
        "(torch.profiler), beside the step's total kernel time; blank when not profiled.",
        "- vs 1 GPU: the same variant and batch on one GPU, same run, over this row's time.",
        "- agree: generated tokens equal to a cache-free forward's argmax (random weights).",
    ]
    out = args.out or (os.path.join(common.DEFAULT_OUT_DIR, "tmp") if args.cpu_smoke
                       else common.DEFAULT_OUT_DIR)
    title = f"Tensor-parallel decode, Llama-3-8B shapes x {args.layers} layers ({meta['gpu_name']})"
    paths = list(common.write_results(out, stem, meta, columns, rows, title, notes))
    if not args.no_plot:
        png = plot(os.path.join(out, stem + ".png"), rows, title)
        if png:
            paths.append(png)
    print("wrote " + " ".join(paths))
    print(f"\n{'weights':<8}{'GPUs':>5}{'batch':>6}{'ms/step':>10}{'tokens/s':>11}{'vs 1 GPU':>10}"
          f"{'all-reduce':>12}")
    for r in rows:
        ar = r.get("allreduce_ms")
        print(f"{r['variant']:<8}{r['world']:>5}{r['batch']:>6}{r['ms_per_step']:>10.3f}"
              f"{r['tokens_per_s']:>11.1f}{r['vs_one_gpu']:>9.2f}x"
              f"{'-' if ar is None else f'{ar:.3f} ms':>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
