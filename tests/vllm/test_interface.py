"""The adapter against the interface of the installed vLLM, without running a
model: vLLM's plugin loader registers it, vLLM's registry and selector
resolve it on a simulated GPU, and its methods take every call vLLM's base
class declares. ci/test-vllm runs this in vLLM's CPU build, ci/test-vllm-cuda
alone in vLLM's CUDA release on a machine without a GPU."""

import inspect
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

import mlaprefill.vllm as adapter
from vllm.config import AttentionConfig
from vllm.platforms import current_platform
from vllm.platforms.interface import DeviceCapability
from vllm.v1.attention.backends.mla.prefill import selector as vllm_selector
from vllm.v1.attention.backends.mla.prefill.base import MLAPrefillBackend
from vllm.v1.attention.backends.mla.prefill.registry import MLAPrefillBackendEnum

DEEPSEEK = dict(qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)


pytestmark = pytest.mark.usefixtures("fresh_selection")  # conftest.py


def test_vllms_plugin_loader_registers_the_entry_point():
    code = ("from vllm.plugins import load_general_plugins\n"
            "from vllm.v1.attention.backends.mla.prefill.registry import MLAPrefillBackendEnum as E\n"
            "load_general_plugins()\n"
            "print('CUSTOM', E.CUSTOM.get_path())\n")
    env = {name: value for name, value in os.environ.items() if name != "VLLM_PLUGINS"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert f"CUSTOM {adapter.CLASS_PATH}" in result.stdout.splitlines()


def test_on_a_simulated_hopper_vllm_resolves_and_selects_it(monkeypatch):
    adapter.register()
    assert MLAPrefillBackendEnum.CUSTOM.get_class() is adapter.MlaPrefillBackend
    assert MLAPrefillBackendEnum[adapter.MEMBER].get_class() is adapter.MlaPrefillBackend
    monkeypatch.setattr(current_platform, "is_cpu", lambda: False)
    monkeypatch.setattr(current_platform, "get_device_capability", lambda device_id=0: DeviceCapability(9, 0))
    # The library's host backend, which every build has, judged on the sm_90 platform.
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "REFERENCE")
    for option in ("CUSTOM", adapter.MEMBER):
        config = SimpleNamespace(model_config=SimpleNamespace(dtype=torch.bfloat16,
                                                              hf_text_config=SimpleNamespace(**DEEPSEEK)),
                                 attention_config=AttentionConfig(mla_prefill_backend=option))
        assert vllm_selector.get_mla_prefill_backend(config) is adapter.MlaPrefillBackend


def base_methods():
    """The methods vLLM's base class declares for its backends to have or override."""
    return sorted(name for name, value in vars(MLAPrefillBackend).items()
                  if (name == "__init__" or not name.startswith("_"))
                  and (inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod))))


def refusals(ours, theirs):
    """How `ours` fails to take a call `theirs` admits: each parameter of
    theirs in the same place, of the same kind, with the same default where
    theirs has one; a parameter only ours has must be optional."""
    problems = []
    mine = list(ours.parameters.values())
    for index, parameter in enumerate(theirs.parameters.values()):
        match = ours.parameters.get(parameter.name)
        if match is None:
            problems.append(f"no parameter {parameter.name}")
        elif match.kind != parameter.kind:
            problems.append(f"{parameter.name} is {match.kind.description}, vLLM's is {parameter.kind.description}")
        elif parameter.kind != parameter.KEYWORD_ONLY and mine.index(match) != index:
            problems.append(f"{parameter.name} is parameter {mine.index(match)}, vLLM's is {index}")
        elif parameter.default is not parameter.empty and match.default != parameter.default:
            problems.append(f"{parameter.name} defaults to {match.default!r}, vLLM's to {parameter.default!r}")
    for parameter in mine:
        if parameter.name not in theirs.parameters and parameter.default is parameter.empty and parameter.kind not in (
                parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            problems.append(f"{parameter.name} is required and not vLLM's")
    return problems


@pytest.mark.parametrize("name", base_methods())
def test_the_adapter_takes_every_call_vllms_base_class_declares(name):
    ours = inspect.signature(getattr(adapter.MlaPrefillBackend, name))
    theirs = inspect.signature(getattr(MLAPrefillBackend, name))
    assert refusals(ours, theirs) == [], f"{name}{ours} against vLLM's {name}{theirs}"


def test_the_adapter_is_a_complete_backend_of_this_vllm():
    assert issubclass(adapter.MlaPrefillBackend, MLAPrefillBackend)
    assert not inspect.isabstract(adapter.MlaPrefillBackend)
    assert adapter.MlaPrefillBackend.context_chunk_interface == "chunk"
