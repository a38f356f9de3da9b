"""vLLM's own registry, plugin loader and selector find the adapter, and
vLLM reports the library's reasons when it refuses."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

import mlaprefill.vllm as adapter
from conftest import HEADS, LATENT, NOPE, ROPE, SCALE, V
from vllm.config import AttentionConfig
from vllm.platforms import current_platform
from vllm.platforms.interface import DeviceCapability
from vllm.v1.attention.backends.mla.prefill import selector as vllm_selector
from vllm.v1.attention.backends.mla.prefill.cpu_sdpa import CPUSDPAMLAPrefillBackend
from vllm.v1.attention.backends.mla.prefill.registry import MLAPrefillBackendEnum


# Each test reads the environment afresh (conftest.fresh_selection).
pytestmark = pytest.mark.usefixtures("fresh_selection")


def vllm_config(option, dims=(NOPE, ROPE, V)):
    """What vLLM's selector reads of a VllmConfig: the model's dtype and MLA
    dims, and the user's attention_config with the MLA prefill backend option."""
    text_config = SimpleNamespace(**dict(zip(("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"), dims)))
    return SimpleNamespace(model_config=SimpleNamespace(dtype=torch.bfloat16, hf_text_config=text_config),
                           attention_config=AttentionConfig(mla_prefill_backend=option))


def construct(cls, config):
    return cls(num_heads=HEADS, scale=SCALE, kv_lora_rank=LATENT, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE,
               v_head_dim=V, vllm_config=config)


def test_register_binds_custom_our_member_and_the_cpu_route():
    assert adapter.register() == adapter.CLASS_PATH
    assert MLAPrefillBackendEnum.CUSTOM.get_class() is adapter.MlaPrefillBackend
    assert MLAPrefillBackendEnum[adapter.MEMBER].get_class() is adapter.MlaPrefillBackend
    assert MLAPrefillBackendEnum.CPU.get_class() is adapter.CpuPrefillRoute
    adapter.register()  # again, as a second plugin load in the process would: no error, same bindings
    assert MLAPrefillBackendEnum.CUSTOM.get_class() is adapter.MlaPrefillBackend


def plugin_process(plugins):
    """vLLM's plugin loader in a fresh process, with VLLM_PLUGINS as given
    (None: unset): what CUSTOM and CPU resolve to afterwards."""
    env = dict(os.environ)
    env.pop("VLLM_PLUGINS", None)
    if plugins is not None:
        env["VLLM_PLUGINS"] = plugins
    code = ("from vllm.plugins import load_general_plugins\n"
            "from vllm.v1.attention.backends.mla.prefill.registry import MLAPrefillBackendEnum as E\n"
            "load_general_plugins()\n"
            "print('CUSTOM', E.CUSTOM.value if not E.CUSTOM.is_overridden() else E.CUSTOM.get_path())\n"
            "print('CPU', E.CPU.get_path())\n")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.startswith(("CUSTOM", "CPU")))


def test_vllms_plugin_loader_registers_the_installed_entry_point():
    assert plugin_process(None) == {"CUSTOM": adapter.CLASS_PATH, "CPU": adapter.CPU_ROUTE_PATH}
    assert plugin_process("mlaprefill") == {"CUSTOM": adapter.CLASS_PATH, "CPU": adapter.CPU_ROUTE_PATH}
    # VLLM_PLUGINS without mlaprefill turns it off.
    off = plugin_process("")
    assert off["CUSTOM"] == "None" and off["CPU"].endswith("cpu_sdpa.CPUSDPAMLAPrefillBackend")


def test_on_cpu_the_option_picks_the_adapter_through_the_cpu_member():
    adapter.register()
    assert current_platform.is_cpu()
    for option in ("CUSTOM", adapter.MEMBER):
        config = vllm_config(option)
        cls = vllm_selector.get_mla_prefill_backend(config)
        assert cls is adapter.CpuPrefillRoute
        assert type(construct(cls, config)) is adapter.MlaPrefillBackend
    # Without the option (or with another backend named), vLLM's own CPU backend.
    for option in (None, "FLASH_ATTN"):
        config = vllm_config(option)
        backend = construct(vllm_selector.get_mla_prefill_backend(config), config)
        assert type(backend) is CPUSDPAMLAPrefillBackend


def gpu_platform(monkeypatch, capability):
    """vLLM's selector as on a GPU platform, which validates the option."""
    monkeypatch.setattr(current_platform, "is_cpu", lambda: False)
    monkeypatch.setattr(current_platform, "get_device_capability", lambda device_id=0: capability)


def test_on_a_gpu_platform_vllm_validates_and_selects_it(monkeypatch):
    adapter.register()
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "REFERENCE")
    gpu_platform(monkeypatch, DeviceCapability(9, 0))
    assert vllm_selector.get_mla_prefill_backend(vllm_config("CUSTOM")) is adapter.MlaPrefillBackend
    assert vllm_selector.get_mla_prefill_backend(vllm_config(adapter.MEMBER)) is adapter.MlaPrefillBackend


def test_vllm_reports_the_librarys_reasons(monkeypatch):
    adapter.register()
    # A backend this machine's build cannot serve on an sm_70.
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "CUDA_FLASH")
    gpu_platform(monkeypatch, DeviceCapability(7, 0))
    with pytest.raises(ValueError, match=r"Selected MLA prefill backend CUSTOM is not valid.*CUDA_FLASH"):
        vllm_selector.get_mla_prefill_backend(vllm_config("CUSTOM"))


def test_vllm_refuses_a_model_without_mla_dimensions(monkeypatch):
    adapter.register()
    gpu_platform(monkeypatch, DeviceCapability(9, 0))
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "REFERENCE")
    with pytest.raises(ValueError, match="MLA dimensions unknown"):
        vllm_selector.get_mla_prefill_backend(vllm_config("CUSTOM", dims=(0, 0, 0)))


def test_the_dimensions_validated_are_the_models(monkeypatch):
    # vLLM's MLADimensions, not DeepSeek's by default: CUDA_FLASH's reasons
    # name the dims it was asked about, and only when it lacks them.
    from vllm.v1.attention.backends.mla.prefill.base import MLADimensions
    from vllm.v1.attention.backends.mla.prefill.selector import MLAPrefillSelectorConfig

    def reasons(nope, rope, v):
        dims = MLADimensions(qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=v)
        config = MLAPrefillSelectorConfig(torch.bfloat16, dims)
        return " ".join(adapter.MlaPrefillBackend.validate_configuration(DeviceCapability(9, 0), config))

    monkeypatch.setenv("MLA_PREFILL_BACKEND", "CUDA_FLASH")
    assert "got (qk_nope_head_dim=32, qk_rope_head_dim=64, v_head_dim=33)" in reasons(32, 64, 33)
    assert "MLA dimensions" not in reasons(128, 64, 128)
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "REFERENCE")
    monkeypatch.setattr(adapter, "_selector", None)
    assert reasons(32, 64, 33) == ""
    assert adapter.MlaPrefillBackend.supports_mla_dimensions(MLADimensions(qk_nope_head_dim=NOPE,
                                                                           qk_rope_head_dim=ROPE, v_head_dim=V))
