"""The vLLM adapter without vLLM, driven as vLLM drives a prefill backend,
with PyTorch tensors and metadata objects that carry vLLM's attribute names
(tests/vllm runs it inside the real vLLM that ci/vllm-env installs). Here
vLLM's registry is tested only for the error and with a stand-in."""

import math
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import mlaprefill
import mlaprefill.vllm as adapter
from conftest import DQK, V, assert_close, attention, lengths_to_cu, random_tensor


def fp8_key():
    # vLLM's kFp8StaticTensorSym as its attributes: fp8 dtype, static per-tensor scale.
    return SimpleNamespace(dtype="torch.float8_e4m3fn", scale=SimpleNamespace(static=True, group_shape=(-1, -1)))


@pytest.fixture(autouse=True)
def fresh_selector(monkeypatch):
    # The adapter reads the library's configuration once per process; each
    # test here sets its own environment.
    monkeypatch.setattr(adapter, "_selector", None)


def deepseek_config(dtype):
    """vLLM's MLAPrefillSelectorConfig: dtype and MLADimensions."""
    dims = dict(zip(("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"), mlaprefill.DEEPSEEK_DIMS))
    return SimpleNamespace(dtype=dtype, mla_dimensions=SimpleNamespace(**dims))


def test_the_class_methods_vllm_selects_with():
    cls = adapter.MlaPrefillBackend
    assert cls.get_name() == "MLAPREFILL"
    assert cls.is_available()
    assert cls.supports_dtype(torch.bfloat16) and not cls.supports_dtype(torch.float64)
    assert cls.validate_configuration(None, deepseek_config(torch.bfloat16)) == []
    assert cls.validate_configuration(None, deepseek_config(torch.float64)) == ["dtype torch.float64 not supported"]
    # vLLM writes 0 for dims the model's config lacks.
    unknown = SimpleNamespace(dtype=torch.bfloat16, mla_dimensions=SimpleNamespace(
        qk_nope_head_dim=0, qk_rope_head_dim=0, v_head_dim=0))
    assert "MLA dimensions unknown" in cls.validate_configuration(None, unknown)[0]


def test_quant_output_is_the_created_backends():
    backend = adapter.MlaPrefillBackend(2, 0.1, 512, 128, 64, 128)
    assert not backend.supports_quant_output(SimpleNamespace(dtype="torch.int8", scale=None))
    selected = mlaprefill.Selector().select("float32")
    assert backend.supports_quant_output(fp8_key()) == selected._native.fp8_output
    # MI300's fp8 (e4m3fnuz: another bias and NaN) is not the e4m3fn the library writes.
    fnuz = SimpleNamespace(dtype="torch.float8_e4m3fnuz", scale=fp8_key().scale)
    assert not backend.supports_quant_output(fnuz)


def test_a_capability_is_judged_on_that_platform(monkeypatch):
    cls = adapter.MlaPrefillBackend
    hopper = SimpleNamespace(major=9, minor=0)
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "REFERENCE")
    assert cls.supports_compute_capability(hopper)
    # CUDA_FLASH serves a (simulated) sm_90 exactly when this build has CUDA.
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "CUDA_FLASH")
    monkeypatch.setattr(adapter, "_selector", None)
    assert cls.supports_compute_capability(hopper) == mlaprefill._core.build_info()["cuda"]
    assert not cls.supports_compute_capability(SimpleNamespace(major=7, minor=0))
    reasons = cls.validate_configuration(SimpleNamespace(major=7, minor=0), deepseek_config(torch.float16))
    assert len(reasons) == 1 and "CUDA_FLASH" in reasons[0]


def test_register_without_vllm_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # vLLM absent, even where it is installed
    with pytest.raises(ImportError, match="needs vLLM"):
        adapter.register()


def test_register_calls_vllms_registry(monkeypatch):
    calls = []
    registry = SimpleNamespace(
        MLAPrefillBackendEnum=SimpleNamespace(CUSTOM="CUSTOM"),
        register_mla_prefill_backend=lambda member, path: calls.append((member, path)),
    )
    for name in ("vllm", "vllm.v1", "vllm.v1.attention", "vllm.v1.attention.backends",
                 "vllm.v1.attention.backends.mla", "vllm.v1.attention.backends.mla.prefill"):
        monkeypatch.setitem(sys.modules, name, SimpleNamespace())
    monkeypatch.setitem(sys.modules, "vllm.v1.attention.backends.mla.prefill.registry", registry)
    assert adapter.register() == "mlaprefill.vllm.MlaPrefillBackend"
    # CUSTOM, and a member of its own name; no CPU route without vLLM's CPU backend.
    assert calls == [("CUSTOM", "mlaprefill.vllm.MlaPrefillBackend"), ("MLAPREFILL", "mlaprefill.vllm.MlaPrefillBackend")]


class OlderVllmBase:
    """What the adapter reads of an older vLLM's MLAPrefillBackend: a chunk
    number, and every chunk's cu_seq_lens as rows of one tensor."""

    def run_prefill_context_chunk(self, chunk_idx, q, k, v):
        raise NotImplementedError


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_chunked_prefill_step_as_an_older_vllm_runs_it(rng, dtype):
    heads, q_lengths, chunks = 4, [5, 3, 0], [[4, 2, 1], [3, 0, 0]]
    cu_q = lengths_to_cu(q_lengths)
    name = {torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype]
    cls = adapter.backend_class(OlderVllmBase)
    assert cls.context_chunk_interface == "chunk_idx"
    backend = cls(heads, 1.0 / math.sqrt(DQK), 512, 128, 64, 128, vllm_config=None)
    metadata = SimpleNamespace(
        query_start_loc=torch.tensor(cu_q, dtype=torch.int32),
        q_data_type=dtype,
        max_query_len=max(q_lengths),
        block_table=None,
        chunked_context=SimpleNamespace(
            cu_seq_lens=torch.tensor([lengths_to_cu(c) for c in chunks], dtype=torch.int32),
            max_seq_lens=[max(c) for c in chunks],
        ),
    )
    backend.prepare_metadata(metadata)
    nq = cu_q[-1]
    q, k = random_tensor(rng, (nq, heads, DQK), "torch", name), random_tensor(rng, (nq, heads, DQK), "torch", name)
    v = random_tensor(rng, (nq, heads, V), "torch", name)
    out, lse = backend.run_prefill_new_tokens(q, k, v, return_softmax_lse=True)
    assert out.dtype == dtype and lse.shape == (heads, nq)
    assert isinstance(backend.run_prefill_new_tokens(q, k, v, return_softmax_lse=False), torch.Tensor)
    for index, lengths in enumerate(chunks):
        cu_c = lengths_to_cu(lengths)
        ck = random_tensor(rng, (cu_c[-1], heads, DQK), "torch", name)
        cv = random_tensor(rng, (cu_c[-1], heads, V), "torch", name)
        chunk_out, chunk_lse = backend.run_prefill_context_chunk(index, q, ck, cv)
        expected_out, expected_lse = attention(q.float(), ck.float(), cv.float(), cu_q, cu_c, backend.scale,
                                               causal=False)
        assert_close(chunk_out, chunk_lse, expected_out, expected_lse, name)
    expected_out, expected_lse = attention(q.float(), k.float(), v.float(), cu_q, cu_q, backend.scale, causal=True)
    assert_close(out, lse, expected_out, expected_lse, name)


def test_new_tokens_into_vllms_output_buffer(rng):
    backend = adapter.MlaPrefillBackend(2, 0.1, 512, 128, 64, 128)
    backend.prepare_metadata(SimpleNamespace(query_start_loc=torch.tensor([0, 6]), max_query_len=6,
                                             chunked_context=None))
    q, k = random_tensor(rng, (6, 2, DQK), "torch"), random_tensor(rng, (6, 2, DQK), "torch")
    v = random_tensor(rng, (6, 2, V), "torch")
    out = torch.full((6, 2, V), float("nan"))
    got = backend.run_prefill_new_tokens(q, k, v, return_softmax_lse=False, out=out)
    assert got is out and not torch.isnan(out).any()
    expected, _ = attention(q, k, v, [0, 6], [0, 6], 0.1, causal=True)
    assert np.abs(out.numpy() - expected).max() < 1e-4


def test_run_before_prepare_metadata_is_an_error(rng):
    backend = adapter.MlaPrefillBackend(2, 0.1, 512, 128, 64, 128)
    q = random_tensor(rng, (1, 2, DQK), "torch")
    with pytest.raises(mlaprefill.InvalidArgument, match="prepare_metadata"):
        backend.run_prefill_new_tokens(q, q, q[..., :V], return_softmax_lse=True)


def test_context_chunks_as_current_vllm_hands_them(rng):
    # Without vLLM the adapter has the current form: a ContextChunk holding a
    # slice of the batch's requests (here the second and third) and q of its
    # tokens only. vLLM keeps seq_lens and query_lens_cpu on the host.
    heads, scale = 2, 0.2
    backend = adapter.MlaPrefillBackend(heads, scale, 512, 128, 64, 128)
    assert adapter.MlaPrefillBackend.context_chunk_interface == "chunk" and backend.supports_out()
    chunk = SimpleNamespace(index=0, request_slice=slice(1, 3), token_slice=slice(4, 11),
                            seq_lens=torch.tensor([5, 2], dtype=torch.int32))
    backend.prepare_metadata(SimpleNamespace(query_start_loc=torch.tensor([0, 4, 7, 11]), q_data_type=torch.float32,
                                             query_lens_cpu=torch.tensor([4, 3, 4]),
                                             chunked_context=SimpleNamespace(chunks=[chunk])))
    q = random_tensor(rng, (7, heads, DQK), "torch")
    k = random_tensor(rng, (7, heads, DQK), "torch")
    v = random_tensor(rng, (7, heads, V), "torch")
    out = torch.full((7, heads, V), float("nan"))
    got, lse = backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v, out=out)
    expected_out, expected_lse = attention(q, k, v, [0, 3, 7], [0, 5, 7], scale, causal=False)
    assert got is out
    assert_close(out, lse, expected_out, expected_lse, "float32")


def prepared_chunk(rng, heads=2):
    """A stand-alone adapter prepared for one context chunk of two requests, and its q, k, v."""
    backend = adapter.MlaPrefillBackend(heads, 0.2, 512, 128, 64, 128)
    chunk = SimpleNamespace(index=0, request_slice=slice(0, 2), token_slice=slice(0, 5),
                            seq_lens=torch.tensor([4, 3], dtype=torch.int32))
    backend.prepare_metadata(SimpleNamespace(query_start_loc=torch.tensor([0, 2, 5]), q_data_type=torch.float32,
                                             query_lens_cpu=torch.tensor([2, 3]),
                                             chunked_context=SimpleNamespace(chunks=[chunk])))
    q = random_tensor(rng, (5, heads, DQK), "torch")
    k = random_tensor(rng, (7, heads, DQK), "torch")
    v = random_tensor(rng, (7, heads, V), "torch")
    return backend, chunk, q, k, v


def test_a_context_chunk_takes_newer_vllms_fp8_state(rng):
    backend, chunk, q, k, v = prepared_chunk(rng)
    amax = torch.zeros(3, 2)
    out = torch.full((5, 2, V), float("nan"))
    got, lse = backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v, out=out, layer_name="layers.0.attn",
                                                 calibration_amax=amax, static_descale=torch.empty(0, 2),
                                                 calibration_armed=True)
    expected_out, expected_lse = attention(q, k, v, [0, 2, 5], [0, 4, 7], 0.2, causal=False)
    assert got is out
    assert_close(out, lse, expected_out, expected_lse, "float32")
    assert torch.equal(amax, torch.zeros(3, 2))  # no FP8 pass, nothing to calibrate


def test_static_fp8_scales_are_refused_with_nothing_written(rng):
    backend, chunk, q, k, v = prepared_chunk(rng)
    out = torch.full((5, 2, V), float("nan"))
    with pytest.raises(mlaprefill.NotSupported, match="FP8 inputs only as vLLM casts them"):
        backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v, out=out, layer_name="layers.1.attn",
                                          static_descale=torch.ones(3, 2))
    assert torch.isnan(out).all()


def test_newer_selector_config_fields(monkeypatch):
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "REFERENCE")
    cls = adapter.MlaPrefillBackend

    def reasons(**fields):
        config = deepseek_config(torch.bfloat16)
        return cls.validate_configuration(None, SimpleNamespace(**vars(config), **fields))

    assert reasons(cache_dtype="fp8_e4m3", dcp_world_size=2, num_heads=16) == []
    assert "KV cache dtype 'nvfp4_ds_mla' not supported" in reasons(cache_dtype="nvfp4_ds_mla")[0]
    assert "num_heads 0" in reasons(num_heads=0)[0]


class CommonImpl:
    """What the adapter reads of vLLM's MLA attention classes: forward_mha's code."""

    def forward_mha(self, q, metadata):
        return self._new_tokens(q, metadata)

    def _new_tokens(self, q, metadata):
        return [metadata.prefill.prefill_backend.run_prefill_new_tokens(q=x) for x in (q,)][0]


class InheritingImpl(CommonImpl):
    pass


class LatentImpl(CommonImpl):
    def forward_mha(self, q, metadata):
        return self._extend(q, metadata.prefill.req_to_token)

    def _extend(self, q, table):
        return q @ table


def test_whether_forward_mha_calls_a_prefill_backend_is_read_from_its_code():
    assert adapter.calls_prefill_backend(CommonImpl) is True  # through a method it names, in a comprehension
    assert adapter.calls_prefill_backend(InheritingImpl) is True
    assert adapter.calls_prefill_backend(LatentImpl) is False
    assert adapter.calls_prefill_backend(object) is None


def vllm_global_mask(indices, q_lens, whole):
    """The bit rows vLLM's _build_topk_mask scatters from a sparse layer's
    top-k indices (positions in each request's whole key range, -1 none):
    int32 [B, rows padded to 128, words rounded to 4 with the reserved
    key_starts word], garbage (set bits) in the padding."""
    rows = -(-max(q_lens) // 128) * 128
    words = (-(-max(whole) // 32) + 1 + 3) // 4 * 4
    bits = np.zeros((len(q_lens), rows, words * 32), dtype=np.uint8)
    bits[:, :, max(whole):] = 1  # never read
    q0 = 0
    for b, sq in enumerate(q_lens):
        for i in range(sq):
            picked = indices[q0 + i]
            bits[b, i, picked[picked >= 0]] = 1
        bits[b, sq:] = 1  # padded rows, never read
        q0 += sq
    return torch.from_numpy(np.packbits(bits, axis=-1, bitorder="little").view(np.int32).copy())


def test_a_sparse_layers_masked_prefill_as_vllm_runs_it(rng):
    """A tiny sparse-attention layer's prefill with context, as vLLM's
    masked-MHA path runs it (sparse_mla_attention.forward_mha with a global
    mask): a random "indexer" picks k keys per query, the new tokens' call
    reads the mask at key_starts = the context lengths, each context chunk's
    call at its starts, with its requests' rows and tokens, and the partials
    merge by LSE. Against a torch fp64 attention over each query's picks."""
    heads, scale, top_k = 2, 0.2, 9
    q_lens, context = [5, 7, 3], [10, 0, 6]
    whole = [c + n for c, n in zip(context, q_lens)]
    indices = np.full((sum(q_lens), top_k), -1, dtype=np.int64)
    q0 = 0
    for b, sq in enumerate(q_lens):
        for i in range(sq):
            visible = context[b] + i + 1  # causal: the indexer picks among the keys up to the query
            picks = rng.choice(visible, size=min(top_k - 1, visible), replace=False)
            indices[q0 + i, : len(picks)] = picks
        q0 += sq
    mask = vllm_global_mask(indices, q_lens, whole)
    q = random_tensor(rng, (sum(q_lens), heads, DQK), "torch")
    whole_k = random_tensor(rng, (sum(whole), heads, DQK), "torch")
    whole_v = random_tensor(rng, (sum(whole), heads, V), "torch")
    cu_whole = lengths_to_cu(whole)

    def rows(requests, lengths, starts):
        index = [cu_whole[b] + s + j for b, n, s in zip(requests, lengths, starts) for j in range(n)]
        return whole_k[index], whole_v[index]

    backend = adapter.MlaPrefillBackend(heads, scale, 512, 128, 64, 128)
    backend.prepare_metadata(SimpleNamespace(query_start_loc=torch.tensor(lengths_to_cu(q_lens)),
                                             q_data_type=torch.float32, query_lens_cpu=torch.tensor(q_lens),
                                             chunked_context=None))
    cu_q = torch.tensor(lengths_to_cu(q_lens), dtype=torch.int32)
    k, v = rows(range(3), q_lens, context)
    suffix = backend.run_masked_mha(q, k, v, cu_q, cu_q, dense_mask=mask, key_starts=torch.tensor(context),
                                    causal=True, return_softmax_lse=True)
    # vLLM's chunks: every request's first 6 context tokens, then request 0's last 4.
    chunks = [(slice(0, 3), [6, 0, 6], [0, 0, 0]), (slice(0, 1), [4], [6])]
    context_out = context_lse = None
    for requests, lengths, starts in chunks:
        ids = range(3)[requests]
        token_slice = slice(lengths_to_cu(q_lens)[ids.start], lengths_to_cu(q_lens)[ids.stop])
        ck, cv = rows(ids, lengths, starts)
        out, lse = backend.run_masked_mha(
            q[token_slice], ck, cv, torch.tensor(lengths_to_cu([q_lens[b] for b in ids]), dtype=torch.int32),
            torch.tensor(lengths_to_cu(lengths), dtype=torch.int32), dense_mask=mask[requests],
            key_starts=torch.tensor(starts), causal=False, return_softmax_lse=True)
        if context_out is None:
            context_out, context_lse = out, lse
        else:
            merged, merged_lse = mlaprefill.merge_attn_states(out, lse, context_out[token_slice].contiguous(),
                                                              context_lse[:, token_slice].contiguous(),
                                                              return_lse=True)
            context_out[token_slice], context_lse[:, token_slice] = merged, merged_lse
    out, lse = mlaprefill.merge_attn_states(context_out, context_lse, *suffix, return_lse=True)

    expected_out = np.zeros((sum(q_lens), heads, V))
    expected_lse = np.full((heads, sum(q_lens)), -np.inf)
    q0 = 0
    for b, sq in enumerate(q_lens):
        for i in range(sq):
            picks = [cu_whole[b] + p for p in indices[q0 + i] if p >= 0]
            keys, values = whole_k[picks].double(), whole_v[picks].double()
            for h in range(heads):
                scores = scale * (keys[:, h] @ q[q0 + i, h].double())
                expected_lse[h, q0 + i] = torch.logsumexp(scores, 0).item()
                expected_out[q0 + i, h] = (torch.softmax(scores, 0)[:, None] * values[:, h]).sum(0).numpy()
        q0 += sq
    assert_close(out, lse, expected_out, expected_lse, "float32")
