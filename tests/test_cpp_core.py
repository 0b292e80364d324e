"""Builds and runs the C++ tests of the header-only layout core (CPU only, no GPU needed).

- Every tests/cpp/*.cpp is a host program (g++ -std=c++17 -O1 -Wall -Werror -I csrc); it must
  compile (its static_asserts are compile-time tests) and exit 0.
- tests/cpp/test_device_compile.cu must compile with nvcc for sm_80 and sm_90a (compile only;
  skipped when nvcc is not installed).
- The core headers must also build with -DNDEBUG -O2.
"""

import glob
import os
import shutil
import subprocess

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(REPO_ROOT, "csrc")
CPP_DIR = os.path.join(REPO_ROOT, "tests", "cpp")
CXX = os.environ.get("CXX", "g++")
CXXFLAGS = ["-std=c++17", "-O1", "-Wall", "-Werror", "-I", CSRC]

CPP_TESTS = sorted(glob.glob(os.path.join(CPP_DIR, "*.cpp")))


def _run(cmd, timeout=600, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


def _require(proc, what):
    assert proc.returncode == 0, (f"{what} failed (exit {proc.returncode}):\n"
                                  f"$ {' '.join(proc.args)}\n{proc.stdout}\n{proc.stderr}")


def _find_nvcc():
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    return shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if os.path.isfile("/usr/local/cuda/bin/nvcc") else None)


@pytest.fixture(scope="module")
def cxx():
    if shutil.which(CXX) is None:
        pytest.skip(f"no C++ compiler ({CXX}) on PATH")
    return CXX


@pytest.mark.parametrize("source", CPP_TESTS, ids=[os.path.basename(p) for p in CPP_TESTS])
def test_cpp_program(cxx, source, tmp_path):
    exe = str(tmp_path / os.path.splitext(os.path.basename(source))[0])
    _require(_run([cxx, *CXXFLAGS, source, "-o", exe]), "compile")
    proc = _run([exe], timeout=120)
    _require(proc, "run")
    print(proc.stdout)


def test_core_headers_build_release(cxx, tmp_path):
    """Every top-level core header, together, with -DNDEBUG -O2 (and each self-contained)."""
    headers = sorted(os.path.basename(h)
                     for h in glob.glob(os.path.join(CSRC, "cute_gemm", "*.hpp")))
    assert "tensor.hpp" in headers and "dyn_layout_algebra.hpp" in headers
    src = tmp_path / "all_headers.cpp"
    src.write_text("".join(f'#include "cute_gemm/{h}"\n' for h in headers) +
                   "int main() { return 0; }\n")
    flags = ["-std=c++17", "-O2", "-DNDEBUG", "-Wall", "-Wextra", "-Werror", "-I", CSRC]
    _require(_run([cxx, *flags, "-c", str(src), "-o", str(tmp_path / "all.o")]), "compile")
    for h in headers:  # one concept per header: each compiles on its own
        one = tmp_path / f"one_{h}.cpp"
        one.write_text(f'#include "cute_gemm/{h}"\n')
        _require(_run([cxx, *flags, "-fsyntax-only", str(one)]), f"{h} on its own")
    # The typed tests also pass in a release build (the algebra is constexpr either way).
    test = os.path.join(CPP_DIR, "test_typed_layout.cpp")
    exe = str(tmp_path / "typed_release")
    _require(_run([cxx, *flags, test, "-o", exe]), "compile")
    _require(_run([exe], timeout=120), "run")


@pytest.mark.parametrize("arch", ["-arch=sm_80", "-gencode=arch=compute_90a,code=sm_90a"])
def test_device_compile(arch, tmp_path):
    nvcc = _find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    source = os.path.join(CPP_DIR, "test_device_compile.cu")
    cmd = [nvcc, "-std=c++17", "--expt-relaxed-constexpr", arch, "-Werror", "all-warnings",
           "-I", CSRC, "-c", source, "-o", str(tmp_path / "device.o")]
    _require(_run(cmd), "nvcc compile")
