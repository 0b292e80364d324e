#!/usr/bin/env python3
"""Registers, spills, stack and SASS instruction counts of every kernel in a build, per GPU arch,
read from the build's object files, so a refactor can show its SASS did not change.

    python3 scripts/kernel_resources.py [--build build/temp.cute_gemm] --out FILE.json
    python3 scripts/kernel_resources.py --compare BEFORE.json AFTER.json [--markdown OUT.md]

Needs cuobjdump and nvdisasm on PATH (nvcc's toolkit has them; where it does not, the PyPI wheels
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm carry them). No GPU needed.

A kernel is keyed by its object file (one generated instance per .cu), the arch and its function
name without template arguments plus an ordinal among those of the same name, so the keys survive
changes to a kernel's template parameters.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

FUNC_RE = re.compile(r"^\s*Function\s+(\S+):")
RES_RE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
ARCH_RE = re.compile(r"^\s*arch = (sm_\w+)")
SASS_FUNC_RE = re.compile(r"^\s*Function : (\S+)")
SASS_INSN_RE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(\S.*?);")


def demangle(names):
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out))


def base_name(demangled):
    """`void ns::kernel<...>(args)` -> `kernel`."""
    depth, cut = 0, len(demangled)
    for i, c in enumerate(demangled):
        if c == "<":
            if depth == 0:
                cut = min(cut, i)
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            cut = min(cut, i)
            break
    name = demangled[:cut].strip()
    return name.split()[-1].split("::")[-1] if name else demangled.split("(")[0]


def scan_object(path):
    """{(arch, mangled): {regs, stack, shared, local, sass}} for one object file."""
    res = subprocess.run(["cuobjdump", "-res-usage", path], capture_output=True, text=True)
    kernels, arch, func = {}, None, None
    for line in res.stdout.splitlines():
        m = ARCH_RE.match(line)
        if m:
            arch = m.group(1)
            continue
        m = FUNC_RE.match(line)
        if m:
            func = m.group(1)
            continue
        m = RES_RE.search(line)
        if m and func:
            kernels[(arch, func)] = dict(zip(("regs", "stack", "shared", "local"),
                                             map(int, m.groups())), sass=0)
            func = None
    sass = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True)
    arch, func = None, None
    for line in sass.stdout.splitlines():
        m = ARCH_RE.match(line)
        if m:
            arch = m.group(1)
            continue
        m = SASS_FUNC_RE.match(line)
        if m:
            func = m.group(1)
            continue
        if func and SASS_INSN_RE.match(line):
            key = (arch, func)
            if key in kernels:
                kernels[key]["sass"] += 1
    return kernels


def collect(build):
    objects = []
    for root, _, files in os.walk(os.path.join(build, "csrc", "kernels")):
        objects += [os.path.join(root, f) for f in files if f.endswith(".o")]
    rows = {}
    for path in sorted(objects):
        found = scan_object(path)
        names = demangle(sorted({f for _, f in found}))
        ordinal = {}
        for (arch, func), r in sorted(found.items(), key=lambda kv: (kv[0][0], names[kv[0][1]])):
            stem = os.path.splitext(os.path.basename(path))[0]
            base = base_name(names[func])
            n = ordinal.setdefault((stem, arch, base), 0)
            ordinal[(stem, arch, base)] += 1
            rows[f"{stem} {arch} {base}#{n}"] = dict(r, name=names[func])
    return rows


def compare(before, after, md_path=None):
    keys = sorted(set(before) | set(after))
    lines = ["| kernel | regs | local (spill) bytes | stack | SASS instructions |",
             "|---|---|---|---|---|"]
    changed = 0
    for key in keys:
        b, a = before.get(key), after.get(key)
        if b is None or a is None:
            lines.append(f"| {key} | {'only after' if b is None else 'only before'} | | | |")
            changed += 1
            continue

        def cell(field):
            return str(b[field]) if b[field] == a[field] else f"{b[field]} -> {a[field]}"
        if any(b[f] != a[f] for f in ("regs", "local", "stack", "sass")):
            changed += 1
        lines.append(f"| {key} | {cell('regs')} | {cell('local')} | {cell('stack')} | "
                     f"{cell('sass')} |")
    text = "\n".join(lines) + f"\n\n{changed} of {len(keys)} kernels differ.\n"
    if md_path:
        with open(md_path, "w") as f:
            f.write(text)
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build/temp.cute_gemm")
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--markdown")
    args = ap.parse_args()
    if args.compare:
        with open(args.compare[0]) as f0, open(args.compare[1]) as f1:
            compare(json.load(f0), json.load(f1), args.markdown)
        return
    for tool in ("cuobjdump", "nvdisasm"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found on PATH (pip install nvidia-cuda-cuobjdump "
                     "nvidia-cuda-nvdisasm, then add their bin/ to PATH)")
    rows = collect(args.build)
    text = json.dumps(rows, indent=1, sort_keys=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(f"{len(rows)} kernels", file=sys.stderr)


if __name__ == "__main__":
    main()
