import os
import subprocess
import sys

import cute_gemm

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_version_is_string():
    assert isinstance(cute_gemm.__version__, str)
    assert cute_gemm.__version__


def test_extension_loaded_from_package_dir():
    ext_dir = os.path.dirname(os.path.realpath(cute_gemm._C.__file__))
    pkg_dir = os.path.dirname(os.path.realpath(cute_gemm.__file__))
    assert ext_dir == pkg_dir


def test_layout_submodule():
    assert cute_gemm.layout is not None
    assert isinstance(cute_gemm.layout.__all__, list)
    assert cute_gemm._C.layout.__name__.endswith("layout")


def test_setup_py_without_torch_gives_clear_message():
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            "sys.argv = ['setup.py', '--version']; "
            "runpy.run_path('setup.py', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert ("cute_gemm needs PyTorch to build: pip install torch, "
            "then pip install --no-build-isolation .") in proc.stderr
    assert "Traceback" not in proc.stderr


def _setup_py_version(cpu_only):
    code = "import runpy, sys; sys.argv = ['setup.py', '--version']; " \
           "runpy.run_path('setup.py', run_name='__main__')"
    env = dict(os.environ, CUTE_GEMM_CPU_ONLY=cpu_only)
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120, env=env)


def test_setup_py_cpu_only_switch():
    # CUTE_GEMM_CPU_ONLY=1 (what scripts/setup_env.sh sets without a GPU) builds the CPU-only
    # extension and says why; a value other than 0 or 1 is refused, naming the variable.
    proc = _setup_py_version("1")
    assert proc.returncode == 0, proc.stderr
    assert "building CPU-only extension (CUTE_GEMM_CPU_ONLY=1)" in proc.stderr
    proc = _setup_py_version("yes")
    assert proc.returncode != 0
    assert "CUTE_GEMM_CPU_ONLY must be 0" in proc.stderr and "got 'yes'" in proc.stderr
    assert "Traceback" not in proc.stderr
