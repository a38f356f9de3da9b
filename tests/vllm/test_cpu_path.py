"""Which of vLLM's CPU MLA attention backends call an MLA prefill backend,
read from their code, and register()'s warning where the one vLLM's CPU
platform picks on the host does not."""

import importlib
import warnings

import pytest

import mlaprefill.vllm as adapter
from vllm.platforms import current_platform
from vllm.v1.attention.backends.mla.amx_mla import AMXMLAImpl
from vllm.v1.attention.backends.mla.cpu_mla import CPUMLAImpl
from vllm.v1.attention.backends.registry import AttentionBackendEnum

CPU_MLA, AMX_MLA = AttentionBackendEnum.CPU_MLA.get_path(), AttentionBackendEnum.AMX_MLA.get_path()


def test_vllms_cpu_mla_backends_read():
    # CPU_MLA inherits vLLM's common forward_mha; AMX_MLA attends to the paged latent cache itself.
    assert adapter.calls_prefill_backend(CPUMLAImpl) is True
    assert adapter.calls_prefill_backend(AMXMLAImpl) is False


def register_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        adapter.register()
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning) and "mlaprefill" in str(w.message)]


def test_register_asks_the_platform_and_warns_exactly_when_its_pick_skips_the_backend(monkeypatch):
    assert current_platform.is_cpu()
    picked, ask = [], current_platform.get_attn_backend_cls

    def recorded(*args, **kwargs):
        picked.append(ask(*args, **kwargs))
        return picked[-1]

    monkeypatch.setattr(current_platform, "get_attn_backend_cls", recorded)
    messages = register_warnings()
    assert len(picked) == 1
    module, _, name = str(picked[0]).rpartition(".")
    backend = getattr(importlib.import_module(module), name)
    assert bool(messages) == (adapter.calls_prefill_backend(backend.get_impl_cls()) is False)


@pytest.mark.parametrize("path, warned", [(AMX_MLA, True), (CPU_MLA, False)])
def test_the_warning_names_the_backend_and_the_way_out(monkeypatch, path, warned):
    monkeypatch.setattr(current_platform, "get_attn_backend_cls", lambda *args, **kwargs: path)
    messages = register_warnings()
    assert bool(messages) == warned
    if warned:
        assert "AMX_MLA" in messages[0] and "CPU_MLA" in messages[0] and "changes nothing" in messages[0]


def test_no_warning_off_the_cpu_platform(monkeypatch):
    monkeypatch.setattr(current_platform, "is_cpu", lambda: False)
    monkeypatch.setattr(current_platform, "get_attn_backend_cls", lambda *args, **kwargs: AMX_MLA)
    assert register_warnings() == []
