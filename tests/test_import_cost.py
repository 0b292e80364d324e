"""``import cute_gemm`` does not import transformers (~1.5 s): cute_gemm.hf is imported on first use
or right after transformers is, and quant_method "cute_gemm" is registered in every order users
import the two. Each case runs in a fresh interpreter."""

import importlib.metadata
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _transformers_major():
    try:
        return int(importlib.metadata.version("transformers").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 0


needs_transformers = pytest.mark.skipif(_transformers_major() < 5,
                                        reason="needs transformers >= 5")

# Whether quant_method "cute_gemm" maps to cute_gemm's classes, and the hook is gone.
_REGISTERED = """
from transformers.quantizers import auto
assert auto.AUTO_QUANTIZER_MAPPING["cute_gemm"] is cute_gemm.hf.CuteGemmHfQuantizer
assert auto.AUTO_QUANTIZATION_CONFIG_MAPPING["cute_gemm"] is cute_gemm.CuteGemmConfig
assert not cute_gemm._hf_hook.installed()
"""


def _run(code, cwd=None):
    """Runs ``code`` in a fresh interpreter; it must get to its end (every assert holds)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT,
                                                       os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code + "\nprint('ok')\n"],
                            capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "ok", result.stdout


def test_import_does_not_import_transformers():
    _run("import sys, cute_gemm\n"
         "assert 'transformers' not in sys.modules and 'cute_gemm.hf' not in sys.modules\n"
         "assert cute_gemm._hf_hook.installed()\n"
         "assert {'hf', 'CuteGemmConfig', 'load_gptq_pretrained', 'load_awq_pretrained'}"
         " <= set(dir(cute_gemm)) & set(cute_gemm.__all__)\n")


@needs_transformers
def test_import_transformers_after_cute_gemm_registers():
    # (accelerate and transformers look transformers up with find_spec before importing it.)
    _run("import importlib.util, sys, cute_gemm\n"
         "assert importlib.util.find_spec('transformers') is not None\n"
         "assert 'cute_gemm.hf' not in sys.modules\n"
         "import transformers\n" + _REGISTERED)


@needs_transformers
def test_import_transformers_before_cute_gemm_registers():
    _run("import transformers, cute_gemm\n" + _REGISTERED)


@needs_transformers
def test_config_first_use_imports_and_registers():
    _run("import sys, cute_gemm\n"
         "config = cute_gemm.CuteGemmConfig(bits=4)\n"
         "assert config.bits == 4 and 'transformers' in sys.modules\n"
         "from cute_gemm import CuteGemmConfig, load_awq_pretrained\n"
         "assert CuteGemmConfig is type(config) and callable(load_awq_pretrained)\n"
         + _REGISTERED)


@needs_transformers
def test_failed_registration_warns_and_transformers_still_imports():
    _run("import sys, warnings, cute_gemm\n"
         "sys.modules['cute_gemm.hf'] = None  # importing it fails\n"
         "with warnings.catch_warnings(record=True) as caught:\n"
         "    warnings.simplefilter('always')\n"
         "    import transformers\n"
         "assert transformers.AutoConfig is not None\n"
         "text = [str(w.message) for w in caught if 'cute_gemm' in str(w.message)]\n"
         "assert len(text) == 1 and 'ModuleNotFoundError' in text[0], text\n"
         "assert not cute_gemm._hf_hook.installed()\n")


_TINY = """
import torch
config = transformers.LlamaConfig(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, vocab_size=256, tie_word_embeddings=False, max_position_embeddings=64)
tokens = torch.randint(0, 256, (2, 7), generator=torch.Generator().manual_seed(5))
"""


@needs_transformers
def test_prequantized_checkpoint_loads_after_import_cute_gemm_then_transformers(tmp_path):
    # What users do with a saved cute_gemm checkpoint: import cute_gemm, then transformers, and
    # from_pretrained, without touching cute_gemm.hf (the hook registers quant_method).
    _run("import cute_gemm\nimport transformers\n" + _TINY + """
torch.manual_seed(0)
transformers.LlamaForCausalLM(config).to(torch.float16).save_pretrained("base")
qconfig = cute_gemm.CuteGemmConfig(bits=4, group_size=32)
model = transformers.AutoModelForCausalLM.from_pretrained(
    "base", dtype=torch.float16, quantization_config=qconfig)
model.save_pretrained("quantized")
with torch.no_grad():
    torch.save(model(tokens).logits, "logits.pt")
""", cwd=tmp_path)
    _run("import sys, cute_gemm\nfrom transformers import AutoModelForCausalLM\n"
         "import transformers\n" + _TINY + """
model = AutoModelForCausalLM.from_pretrained("quantized")
assert type(model.config.quantization_config).__name__ == "CuteGemmConfig"
assert sum(isinstance(m, cute_gemm.QuantLinear) for m in model.modules()) == 14
with torch.no_grad():
    assert torch.equal(model(tokens).logits, torch.load("logits.pt"))
""", cwd=tmp_path)
