"""Registers ``quant_method="cute_gemm"`` with transformers without importing it eagerly.

Importing transformers (what ``cute_gemm.hf`` needs) costs ~1.5 s, more than the rest of
``import cute_gemm``. So ``import cute_gemm`` imports ``cute_gemm.hf`` (and registers) at once
only when transformers is already imported; otherwise ``install()`` puts a finder in front of
``sys.meta_path`` that registers right after the top-level ``transformers`` module has executed,
so that ``from_pretrained`` of a pre-quantized checkpoint works after ``import cute_gemm`` and
``import transformers`` in either order. Without transformers the finder never fires.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

_NAME = "transformers"


def _register():
    """Imports ``cute_gemm.hf`` and registers; a failure is a warning, never a failed import of
    transformers."""
    try:
        importlib.import_module(".hf", __package__).register()
    except Exception as e:  # noqa: BLE001 - transformers must import whatever happens here
        warnings.warn(f"cute_gemm: could not register quant_method 'cute_gemm' with "
                      f"transformers ({type(e).__name__}: {e}); import cute_gemm.hf to retry",
                      RuntimeWarning, stacklevel=2)


class _TransformersHook(importlib.abc.MetaPathFinder):
    """Finds nothing itself: looks up ``transformers``' real spec through the other finders and
    wraps its loader's ``exec_module`` to register once the module has executed."""

    def __init__(self):
        self._busy = False  # our own lookup of the spec below comes back here

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _NAME or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(fullname)  # the other finders (we answer None)
        finally:
            self._busy = False
        loader = getattr(spec, "loader", None)
        original = getattr(loader, "exec_module", None)
        if original is None:
            return spec  # (None: not installed, transformers' ImportError as usual)

        def exec_module(module):
            original(module)
            if module.__name__ != fullname:  # a loader shared with other modules
                return
            try:
                del loader.exec_module  # back to the loader's own method
            except AttributeError:
                pass
            uninstall()
            _register()

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            pass  # a loader that takes no attributes: registered on first use of cute_gemm.hf
        return spec


def install():
    """Puts the hook first in ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _TransformersHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TransformersHook())


def uninstall():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _TransformersHook)]


def installed():
    return any(isinstance(f, _TransformersHook) for f in sys.meta_path)
