"""The adapter inside the installed vLLM: vLLM's forward_mha drives it with
metadata from vLLM's own planner, and its output matches vLLM's own CPU
prefill backend and an fp64 oracle; the older chunk_idx interface; and what
the forward pass must not do (construct a Selector, read YAML, copy from
the device)."""

import abc
import math

import pytest
import torch

import mlaprefill
import mlaprefill.vllm as adapter
from conftest import HEADS, LATENT, NOPE, ROPE, SCALE, V, Step, new_backend, reference, vllm_cpu_backend
from vllm.model_executor.layers.attention import mla_attention as vllm_mla
from vllm.v1.attention.backends.mla.prefill.base import MLAPrefillBackend

# bf16 outputs of two correct kernels differ by rounding; against fp64 the
# error is bf16's (8 bits of mantissa) on values of size ~1.
TOLERANCE = 2e-2

# Several requests with context, one (the third) split across chunks, one
# without context, odd lengths; a 64-row workspace in 16-token blocks.
QUERY_LENS = [5, 3, 7, 1, 9]
CONTEXT_LENS = [40, 0, 100, 24, 13]


def test_it_is_vllms_backend_class_with_the_installed_interface():
    assert issubclass(adapter.MlaPrefillBackend, MLAPrefillBackend)
    assert adapter.MlaPrefillBackend.context_chunk_interface == "chunk"
    backend = new_backend(adapter.MlaPrefillBackend)
    assert backend.supports_out()
    clone = backend.clone()
    assert type(clone) is adapter.MlaPrefillBackend and clone is not backend
    assert (clone.num_heads, clone.scale, clone.v_head_dim) == (HEADS, SCALE, V)
    assert clone._backends.keys() == backend._backends.keys()  # created when constructed


def test_the_planner_splits_a_request_and_packs_several():
    chunks = Step(QUERY_LENS, CONTEXT_LENS).chunked_context().chunks
    assert len(chunks) >= 3
    assert any(chunk.is_continuation for chunk in chunks)
    assert any(chunk.num_requests > 1 for chunk in chunks)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_forward_mha_with_the_adapter_matches_vllms_cpu_backend(dtype):
    step = Step(QUERY_LENS, CONTEXT_LENS, dtype=dtype)
    ours = step.forward(new_backend(adapter.MlaPrefillBackend)).double()
    theirs = step.forward(vllm_cpu_backend()).double()
    expected = step.expected()
    assert not torch.isnan(ours).any()
    assert (ours - expected).abs().max() < TOLERANCE
    assert (theirs - expected).abs().max() < TOLERANCE
    assert (ours - theirs).abs().max() < TOLERANCE


def test_forward_mha_without_context():
    step = Step([6, 11, 1], [0, 0, 0])
    got = step.forward(new_backend(adapter.MlaPrefillBackend)).double()
    assert (got - step.expected()).abs().max() < TOLERANCE


def test_one_chunk_holding_every_request():
    step = Step([4, 2], [10, 20], workspace=256)
    assert len(step.chunked_context().chunks) == 1
    got = step.forward(new_backend(adapter.MlaPrefillBackend)).double()
    assert (got - step.expected()).abs().max() < TOLERANCE


def chunk_inputs(step, chunk, gen):
    n = chunk.num_context_tokens
    k = torch.randn(n, HEADS, NOPE + ROPE, generator=gen).to(step.dtype)
    v = torch.randn(n, HEADS, V, generator=gen).to(step.dtype)
    return step.q[chunk.token_slice], k, v


def test_each_context_chunk_against_the_oracle_and_into_out():
    step = Step(QUERY_LENS, CONTEXT_LENS)
    backend = new_backend(adapter.MlaPrefillBackend)
    metadata = step.metadata(backend)
    gen = torch.Generator().manual_seed(1)
    for chunk in metadata.chunked_context.chunks:
        q, k, v = chunk_inputs(step, chunk, gen)
        cu_q = chunk.query_start_loc.tolist()
        cu_k = chunk.cu_seq_lens.tolist()
        expected_out, expected_lse = reference(q, k, v, cu_q, cu_k, SCALE, causal=False)
        out, lse = backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v)
        assert (out.double() - expected_out).abs().max() < TOLERANCE
        assert (lse.double() - expected_lse).abs().max() < 1e-2
        into = torch.full_like(out, float("nan"))
        got, _ = backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v, out=into)
        assert got is into and torch.equal(into, out)


def test_a_chunk_with_a_request_without_context_tokens():
    # vLLM's planner makes no such chunk, but its ContextChunk can say it: the
    # rows of the empty request come back as 0 and -inf.
    step = Step([3, 4], [16, 16])
    backend = new_backend(adapter.MlaPrefillBackend)
    metadata = step.metadata(backend)
    chunk = metadata.chunked_context.chunks[0]
    chunk.seq_lens = torch.tensor([16, 0], dtype=torch.int32)
    chunk.cu_seq_lens = torch.tensor([0, 16, 16], dtype=torch.int32)
    chunk.num_context_tokens = 16
    backend.prepare_metadata(metadata)
    q, k, v = chunk_inputs(step, chunk, torch.Generator().manual_seed(2))
    out, lse = backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v)
    expected_out, _ = reference(q, k, v, [0, 3, 7], [0, 16, 16], SCALE, causal=False)
    assert (out.double() - expected_out).abs().max() < TOLERANCE
    assert torch.all(out[3:] == 0) and torch.all(lse[:, 3:] == -math.inf)


def test_a_chunk_of_another_step_is_refused():
    step = Step([3, 4], [16, 16])
    backend = new_backend(adapter.MlaPrefillBackend)
    metadata = step.metadata(backend)
    chunk = metadata.chunked_context.chunks[0]
    # The next step has no context.
    backend.prepare_metadata(vllm_mla.MLACommonPrefillMetadata(
        block_table=step.block_table, query_start_loc=torch.tensor([0, 3]), max_query_len=3,
        q_data_type=step.dtype, query_lens_cpu=torch.tensor([3])))
    q, k, v = chunk_inputs(step, chunk, torch.Generator().manual_seed(3))
    with pytest.raises(mlaprefill.InvalidArgument, match="context chunk 0"):
        backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v)


def test_new_tokens_into_out_and_the_pcp_chunk():
    step = Step([5, 8], [0, 0], dtype=torch.float16)
    backend = new_backend(adapter.MlaPrefillBackend)
    step.metadata(backend)
    gen = torch.Generator().manual_seed(4)
    q = step.q
    k = torch.randn(13, HEADS, NOPE + ROPE, generator=gen).half()
    v = torch.randn(13, HEADS, V, generator=gen).half()
    out = torch.full((13, HEADS, V), float("nan"), dtype=torch.float16)
    got = backend.run_prefill_new_tokens(q=q, k=k, v=v, return_softmax_lse=False, out=out)
    expected, _ = reference(q, k, v, [0, 5, 13], [0, 5, 13], SCALE, causal=True)
    assert got is out and (out.double() - expected).abs().max() < TOLERANCE
    # Prefill context parallelism: the last 2 and 3 queries of each sequence
    # against all of its keys, causal from the bottom right.
    pq = torch.cat([q[3:5], q[10:13]])
    pcp_out, pcp_lse = backend.run_prefill_new_tokens_pcp_chunk(pq, k, v, [0, 2, 5], [0, 5, 13])
    assert (pcp_out.double() - torch.cat([expected[3:5], expected[10:13]])).abs().max() < TOLERANCE
    assert pcp_lse.shape == (HEADS, 5)
    # The step's own preparation is untouched by it.
    again = backend.run_prefill_new_tokens(q=q, k=k, v=v, return_softmax_lse=False)
    assert torch.equal(again, out)


def test_a_q_dtype_the_step_was_not_prepared_for_is_refused():
    step = Step([4], [0])
    backend = new_backend(adapter.MlaPrefillBackend)
    step.metadata(backend)
    q = step.q.half()
    with pytest.raises(mlaprefill.InvalidArgument, match="prepared for"):
        backend.run_prefill_new_tokens(q=q, k=q, v=q[..., :V], return_softmax_lse=True)


class OlderMLAPrefillBackend(MLAPrefillBackend, abc.ABC):
    """vLLM's base class as older releases declared it: a chunk number, and
    every chunk's cu_seq_lens [chunks, B+1] in the metadata."""

    @abc.abstractmethod
    def run_prefill_context_chunk(self, chunk_idx, q, k, v):
        raise NotImplementedError


def test_the_older_chunk_idx_interface():
    cls = adapter.backend_class(OlderMLAPrefillBackend)
    assert cls.context_chunk_interface == "chunk_idx" and issubclass(cls, OlderMLAPrefillBackend)
    backend = new_backend(cls)
    gen = torch.Generator().manual_seed(5)
    context_lens = [40, 0, 21]
    cu_q = [0, 5, 8, 14]
    # The older vLLM's plan: every chunk spans the whole batch.
    plan = mlaprefill.plan_context_chunks(context_lens, 32, 16)
    cu_rows = torch.tensor([chunk["cu_seqlens_k"] for chunk in plan], dtype=torch.int32)
    metadata = vllm_mla.MLACommonPrefillMetadata(
        block_table=torch.zeros(3, 1, dtype=torch.int32), query_start_loc=torch.tensor(cu_q, dtype=torch.int32),
        max_query_len=6, q_data_type=torch.bfloat16,
        chunked_context=type("Older", (), {"cu_seq_lens": cu_rows})())
    backend.prepare_metadata(metadata)
    q = torch.randn(14, HEADS, NOPE + ROPE, generator=gen).bfloat16()
    assert len(plan) >= 2
    for index, chunk in enumerate(plan):
        cu_k = chunk["cu_seqlens_k"]
        k = torch.randn(cu_k[-1], HEADS, NOPE + ROPE, generator=gen).bfloat16()
        v = torch.randn(cu_k[-1], HEADS, V, generator=gen).bfloat16()
        out, lse = backend.run_prefill_context_chunk(index, q, k, v)
        expected_out, expected_lse = reference(q, k, v, cu_q, cu_k, SCALE, causal=False)
        assert (out.double() - expected_out).abs().max() < TOLERANCE
        finite = expected_lse.isfinite()
        assert torch.equal(lse.isfinite(), finite)
        assert (lse.double()[finite] - expected_lse[finite]).abs().max() < 1e-2


def test_an_unknown_interface_is_named():
    class Unknown(MLAPrefillBackend, abc.ABC):
        @abc.abstractmethod
        def run_prefill_context_chunk(self, piece, q, k, v):
            raise NotImplementedError

    with pytest.raises(TypeError, match="neither a `chunk` nor a `chunk_idx`"):
        adapter.backend_class(Unknown)
