"""Build script for cute_gemm.

PyTorch is a build-time *and* run-time prerequisite that the user installs first, so the package
is installed without build isolation:

    pip install torch
    pip install --no-build-isolation -e .      # or: pip install --no-build-isolation .

Environment variables:
  TORCH_CUDA_ARCH_LIST      GPU targets, e.g. "9.0a" or "8.0;8.6;9.0a". When set it overrides the
                            default "8.0;9.0a" (torch maps "9.0a" to compute_90a/sm_90a). The
                            Hopper (wgmma) kernels need "9.0a"; without it H100/H200 run the
                            mma.sync kernels.
  MAX_JOBS                  parallel compile jobs (default: number of CPUs, at most 4).
  CUTE_GEMM_PTXAS_VERBOSE   set to 1 to pass -Xptxas=-v to nvcc (register/spill report).
  CUDA_HOME                 CUDA toolkit root, if torch cannot find it.
  CUTE_GEMM_CPU_ONLY        set to 1 to build the CPU-only extension where the CUDA one could be
                            built (scripts/setup_env.sh does on a machine without a GPU).

With a CPU-only torch, without a CUDA toolkit, with no .cu sources or with CUTE_GEMM_CPU_ONLY=1,
a CPU-only extension is built (no .cu files, CUTE_GEMM_NO_CUDA defined).
"""

import sys

try:
    import torch
except ImportError:
    sys.exit("cute_gemm needs PyTorch to build: pip install torch, "
             "then pip install --no-build-isolation .")

import glob
import os
import re
import shutil

try:
    import fcntl  # POSIX only; used to serialize concurrent builds
except ImportError:
    fcntl = None

from setuptools import find_packages, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARCH_LIST = "8.0;9.0a"


def _fix_cuda_home():
    """Point CUDA_HOME at a real toolkit when torch's own guess would have no headers.

    torch guesses CUDA_HOME as the parent of the directory holding `nvcc` on PATH; when that nvcc
    is a wrapper script (e.g. /usr/local/bin/nvcc) the guess has no include/cuda_runtime.h and
    the build fails late. Must run before torch.utils.cpp_extension is imported.
    """
    if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        return

    def has_headers(home):
        return bool(home) and os.path.isfile(os.path.join(home, "include", "cuda_runtime.h"))

    nvcc = shutil.which("nvcc")
    if nvcc is None or has_headers(os.path.dirname(os.path.dirname(nvcc))):
        return  # torch's own search (or its /usr/local/cuda fallback) is fine
    for home in (os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "/usr/local/cuda"):
        if has_headers(home):
            os.environ["CUDA_HOME"] = home
            return


_fix_cuda_home()

from torch.utils.cpp_extension import (  # noqa: E402
    CUDA_HOME, BuildExtension, CppExtension, CUDAExtension)


def _version():
    with open(os.path.join(ROOT, "cute_gemm", "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _sources(*patterns):
    found = set()
    for pattern in patterns:
        found.update(glob.glob(pattern, root_dir=ROOT, recursive=True))
    return sorted(found)


if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
    os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_ARCH_LIST
if not os.environ.get("MAX_JOBS"):
    os.environ["MAX_JOBS"] = str(max(1, min(4, os.cpu_count() or 1)))

# Plain C++ under csrc/kernels (the mixed GEMM's planner and its instance table) is in every build.
cpp_sources = _sources("csrc/bindings/*.cpp", "csrc/ops/*.cpp", "csrc/kernels/**/*.cpp")
cu_sources = _sources("csrc/kernels/**/*.cu")
if os.environ.get("CUTE_GEMM_CPU_ONLY", "") not in ("", "0", "1"):
    sys.exit("CUTE_GEMM_CPU_ONLY must be 0 (build the CUDA kernels where torch and nvcc can) or 1 "
             "(build the CPU-only extension); got %r" % os.environ["CUTE_GEMM_CPU_ONLY"])
cpu_only = os.environ.get("CUTE_GEMM_CPU_ONLY") == "1"
cuda_usable = torch.version.cuda is not None and CUDA_HOME is not None and not cpu_only

# torch 2.14's own headers (c10, ATen) need C++20: with -std=c++17 any file that includes them
# fails (std::strong_ordering, string_view::starts_with, requires-clauses).
CXX_STD = "-std=c++20"
cxx_flags = ["-O3", "-DNDEBUG", CXX_STD]
nvcc_flags = ["-O3", "-DNDEBUG", CXX_STD, "--expt-relaxed-constexpr", "-lineinfo"]
if os.environ.get("CUTE_GEMM_PTXAS_VERBOSE") == "1":
    nvcc_flags.append("-Xptxas=-v")

# The Hopper wgmma kernels have code only in an sm_90a build; the dispatcher (host code) must know
# whether there is one.
if "9.0a" in re.split(r"[;\s]+", os.environ["TORCH_CUDA_ARCH_LIST"]):
    nvcc_flags.append("-DCUTE_GEMM_WITH_SM90A")
    cxx_flags.append("-DCUTE_GEMM_WITH_SM90A")

include_dirs = [os.path.join(ROOT, "csrc")]
if cuda_usable and cu_sources:
    ext = CUDAExtension(
        name="cute_gemm._C",
        sources=cpp_sources + cu_sources,
        include_dirs=include_dirs,
        extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags},
    )
else:
    why = "no .cu sources" if cuda_usable else "CUTE_GEMM_CPU_ONLY=1" if cpu_only else (
        "torch.version.cuda=%s, CUDA_HOME=%s" % (torch.version.cuda, CUDA_HOME))
    print("cute_gemm: building CPU-only extension (%s)" % why, file=sys.stderr)
    ext = CppExtension(
        name="cute_gemm._C",
        sources=cpp_sources,
        include_dirs=include_dirs,
        define_macros=[("CUTE_GEMM_NO_CUDA", None)],
        extra_compile_args={"cxx": cxx_flags},
    )


class _BuildExt(BuildExtension.with_options(use_ninja=True)):
    """BuildExtension with a fixed object dir, build/temp.cute_gemm.

    pip's editable builds would otherwise compile in a fresh temp dir each time; keeping ninja's
    objects and logs makes rebuilds incremental. Concurrent builds of one checkout are serialized
    with a lock file, since two ninjas sharing a build dir corrupt its .ninja_deps.
    """

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = os.path.join(ROOT, "build", "temp.cute_gemm")

    def run(self):
        os.makedirs(self.build_temp, exist_ok=True)
        with open(self.build_temp + ".lock", "w") as lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            super().run()


setup(
    name="cute_gemm",
    version=_version(),
    description="Weight-only quantized GEMM for PyTorch on NVIDIA GPUs, with a CuTe-style layout "
                "algebra",
    packages=find_packages(include=["cute_gemm", "cute_gemm.*"], exclude=["tests", "tests.*"]),
    python_requires=">=3.10",
    install_requires=[],
    ext_modules=[ext],
    cmdclass={"build_ext": _BuildExt},
    zip_safe=False,
)
