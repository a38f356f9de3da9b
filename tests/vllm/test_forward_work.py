"""What the forward pass must not do, counted while vLLM's forward_mha runs
through the adapter: construct a Selector (which reads the YAML
configuration), create a library backend, or read a tensor back to the host
(a device synchronisation on a GPU). prepare_metadata, once per step, reads
only the tensors vLLM keeps on the host for that."""

import contextlib
from types import SimpleNamespace

import pytest
import torch

import mlaprefill
import mlaprefill.vllm as adapter
from conftest import Step, new_backend

# Every way a tensor's values reach Python or the host.
READS = ("tolist", "item", "cpu", "numpy", "__int__", "__float__", "__index__", "__bool__", "to")


class Counter:
    def __init__(self, monkeypatch):
        self.selectors, self.creates, self.configures, self.reads = 0, 0, 0, []
        self.active = False
        self._monkeypatch = monkeypatch
        self._wrap(mlaprefill._core, "Selector", "selectors")
        self._wrap(mlaprefill._core, "configure", "configures")
        self._wrap(mlaprefill.Selector, "create", "creates")
        for name in READS:
            self._wrap_read(name)

    def _wrap(self, owner, name, field):
        original = getattr(owner, name)

        def counted(*args, **kwargs):
            if self.active:
                setattr(self, field, getattr(self, field) + 1)
            return original(*args, **kwargs)

        self._monkeypatch.setattr(owner, name, counted)

    def _wrap_read(self, name):
        original = getattr(torch.Tensor, name)

        def counted(tensor, *args, **kwargs):
            if self.active:
                self.reads.append((name, tensor))
            return original(tensor, *args, **kwargs)

        self._monkeypatch.setattr(torch.Tensor, name, counted)

    @contextlib.contextmanager
    def counting(self):
        self.active = True
        try:
            yield self
        finally:
            self.active = False


def counted_methods(backend, counter, names):
    """Counts only inside the adapter's own methods, not vLLM's code around them."""
    for name in names:
        method = getattr(backend, name)

        def counted(*args, _method=method, **kwargs):
            with counter.counting():
                return _method(*args, **kwargs)

        setattr(backend, name, counted)


RUN_METHODS = ("run_prefill_new_tokens", "run_prefill_context_chunk", "supports_quant_output")


def test_the_forward_pass_constructs_nothing_and_reads_nothing_back(monkeypatch):
    step = Step([5, 3, 7, 1, 9], [40, 0, 100, 24, 13])
    backend = new_backend(adapter.MlaPrefillBackend)
    adapter._shared_selector()  # vLLM's selection, before the model runs
    counter = Counter(monkeypatch)
    calls = []
    original_run = backend.run_prefill_context_chunk
    backend.run_prefill_context_chunk = lambda **kwargs: calls.append(kwargs["chunk"].index) or original_run(**kwargs)
    counted_methods(backend, counter, RUN_METHODS)
    for _ in range(3):  # three layers of one step
        step.forward(backend)
        backend.supports_quant_output("fp8_e4m3_static_per_tensor")
    assert calls == [0, 1, 2, 3] * 3
    assert (counter.selectors, counter.configures, counter.creates) == (0, 0, 0)
    assert counter.reads == []


def test_prepare_metadata_reads_only_vllms_host_tensors(monkeypatch):
    step = Step([5, 3, 7, 1, 9], [40, 0, 100, 24, 13])
    # The model's dtype, as vLLM's config gives it: the backends for it are
    # made when the adapter is constructed.
    backend = new_backend(adapter.MlaPrefillBackend,
                          vllm_config=SimpleNamespace(model_config=SimpleNamespace(dtype=step.dtype)))
    adapter._shared_selector()
    counter = Counter(monkeypatch)
    counted_methods(backend, counter, ("prepare_metadata",))
    metadata = step.metadata(backend)
    host = [metadata.query_lens_cpu] + [chunk.seq_lens for chunk in metadata.chunked_context.chunks]
    assert (counter.selectors, counter.configures, counter.creates) == (0, 0, 0)
    assert counter.reads and all(name == "tolist" and any(t is h for h in host) for name, t in counter.reads)


def test_the_counter_sees_what_it_counts(monkeypatch):
    # A check that cannot fail proves nothing: the older per-call selection
    # and a copy of a device-side tensor both show.
    counter = Counter(monkeypatch)
    with counter.counting():
        mlaprefill.Selector()
        torch.tensor([0, 3]).tolist()
    assert counter.selectors == 1 and len(counter.reads) == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16])
def test_construction_and_clone_select_once_each(monkeypatch, dtype):
    adapter._shared_selector()
    counter = Counter(monkeypatch)
    with counter.counting():
        backend = new_backend(adapter.MlaPrefillBackend)
        backend.clone()
    # float32 (the default dtype without a vllm_config), two library backends
    # per object: for the new tokens and for context chunks.
    assert counter.selectors == 0 and counter.creates == 4
