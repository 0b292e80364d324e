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
