"""What newer vLLM's selector config states besides dtype and MLA dims (the
KV cache format, decode context parallelism, the head count), judged by the
adapter's validate_configuration; vLLM's own config of the installed release,
which lacks them, is judged as before."""

from typing import NamedTuple

import pytest
import torch

import mlaprefill.vllm as adapter
from conftest import HEADS, NOPE, ROPE, V
from vllm.platforms.interface import DeviceCapability
from vllm.v1.attention.backends.mla.prefill.base import MLADimensions
from vllm.v1.attention.backends.mla.prefill.selector import MLAPrefillSelectorConfig

DIMS = MLADimensions(qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V)


class NewerSelectorConfig(NamedTuple):
    """vLLM's MLAPrefillSelectorConfig with the fields newer vLLM adds."""

    dtype: torch.dtype
    mla_dimensions: MLADimensions
    cache_dtype: str = "auto"
    dcp_world_size: int = 1
    num_heads: int = HEADS


@pytest.fixture(autouse=True)
def reference_backend(monkeypatch):
    # A backend of this library every build has, so that only the config's fields can refuse.
    monkeypatch.setattr(adapter, "_selector", None)
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "REFERENCE")


def reasons(**fields):
    return adapter.MlaPrefillBackend.validate_configuration(DeviceCapability(9, 0),
                                                            NewerSelectorConfig(torch.bfloat16, DIMS, **fields))


def test_the_installed_vllms_config_is_judged_as_before():
    config = MLAPrefillSelectorConfig(torch.bfloat16, DIMS)
    assert adapter.MlaPrefillBackend.validate_configuration(DeviceCapability(9, 0), config) == []
    assert reasons() == []


@pytest.mark.parametrize("cache_dtype", adapter.SERVED_CACHE_DTYPES)
def test_caches_vllm_hands_over_in_the_models_dtype_are_served(cache_dtype):
    assert reasons(cache_dtype=cache_dtype) == []


@pytest.mark.parametrize("cache_dtype", ["fp8_ds_mla", "nvfp4_ds_mla", "int8_per_token_head", "turboquant_k8v4"])
def test_other_cache_formats_are_refused_by_name(cache_dtype):
    got = reasons(cache_dtype=cache_dtype)
    assert len(got) == 1 and f"KV cache dtype {cache_dtype!r} not supported" in got[0]


def test_decode_context_parallelism_is_served():
    # vLLM gathers each chunk's context from every rank before the call.
    assert reasons(dcp_world_size=4) == []


def test_a_head_count_below_one_is_refused():
    assert reasons(num_heads=128) == []
    got = reasons(num_heads=0)
    assert len(got) == 1 and "num_heads 0" in got[0]


def test_the_reasons_add_to_the_librarys(monkeypatch):
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "CUDA_FLASH")
    monkeypatch.setattr(adapter, "_selector", None)
    got = adapter.MlaPrefillBackend.validate_configuration(
        DeviceCapability(7, 0), NewerSelectorConfig(torch.bfloat16, DIMS, cache_dtype="fp8_ds_mla"))
    assert len(got) == 2 and "fp8_ds_mla" in got[0] and "CUDA_FLASH" in got[1]
