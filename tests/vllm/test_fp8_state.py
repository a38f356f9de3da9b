"""The FP8 prefill state newer vLLM passes with each context chunk
(layer_name, calibration_amax, static_descale, calibration_armed), on chunks
vLLM's own planner made: taken where it asks for nothing the library lacks,
refused before anything is written where it asks for FP8 with static
scales."""

import pytest
import torch

import mlaprefill
import mlaprefill.vllm as adapter
from conftest import HEADS, NOPE, ROPE, SCALE, V, Step, new_backend, reference

TOLERANCE = 2e-2


def chunk_inputs(step, chunk, seed):
    gen = torch.Generator().manual_seed(seed)
    n = chunk.num_context_tokens
    k = torch.randn(n, HEADS, NOPE + ROPE, generator=gen).to(step.dtype)
    v = torch.randn(n, HEADS, V, generator=gen).to(step.dtype)
    return step.q[chunk.token_slice], k, v


def prepared_chunk():
    step = Step([5, 3, 7], [40, 24, 21])
    backend = new_backend(adapter.MlaPrefillBackend)
    chunk = step.metadata(backend).chunked_context.chunks[0]
    return step, backend, chunk


@pytest.mark.parametrize("armed", [False, True])
def test_the_state_without_static_scales_is_taken_and_the_buffer_left_alone(armed):
    step, backend, chunk = prepared_chunk()
    q, k, v = chunk_inputs(step, chunk, 1)
    # A layer's calibration buffer as vLLM keeps it: a row per q, k, v and a column per head.
    amax = torch.full((3, HEADS), 0.5)
    out = torch.full((q.shape[0], HEADS, V), float("nan"), dtype=step.dtype)
    got, lse = backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v, out=out, layer_name="layers.0.attn",
                                                 calibration_amax=amax, static_descale=torch.empty(0, HEADS),
                                                 calibration_armed=armed)
    expected, _ = reference(q, k, v, chunk.query_start_loc.tolist(), chunk.cu_seq_lens.tolist(), SCALE,
                            causal=False)
    assert got is out and (out.double() - expected).abs().max() < TOLERANCE
    assert torch.equal(amax, torch.full((3, HEADS), 0.5))
    # The defaults, as vLLM passes them for a layer without FP8 state.
    again, _ = backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v, layer_name="", calibration_amax=None,
                                                 static_descale=None, calibration_armed=False)
    assert torch.equal(again, out)


def test_static_scales_are_refused_before_anything_is_written():
    step, backend, chunk = prepared_chunk()
    q, k, v = chunk_inputs(step, chunk, 2)
    out = torch.full((q.shape[0], HEADS, V), float("nan"), dtype=step.dtype)
    amax = torch.zeros(3, HEADS)
    descale = torch.ones(3, HEADS)
    with pytest.raises(mlaprefill.NotSupported, match=r"static_descale.*layers\.3\.attn.*FP8 inputs only as vLLM casts"):
        backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v, out=out, layer_name="layers.3.attn",
                                          calibration_amax=amax, static_descale=descale, calibration_armed=True)
    assert torch.isnan(out).all()
    assert torch.equal(amax, torch.zeros(3, HEADS)) and torch.equal(descale, torch.ones(3, HEADS))
    # The refusal leaves the step as prepared: the same chunk runs afterwards.
    got, _ = backend.run_prefill_context_chunk(chunk=chunk, q=q, k=k, v=v, out=out)
    assert got is out and not torch.isnan(out).any()


def test_fp8_inputs_as_vllms_fp8_prefill_casts_them():
    """vLLM's FP8 prefill (q_data_type float8_e4m3fn): q, k and v cast to e4m3
    without scales; the output in the metadata's output_dtype. Host backends
    take it (docs/contract.md §4), against the fp64 attention of the bytes'
    values."""
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is None:
        pytest.skip("this PyTorch has no float8_e4m3fn")
    step = Step([5, 3, 7], [40, 24, 21])
    backend = new_backend(adapter.MlaPrefillBackend)
    metadata = step.metadata(backend)
    metadata.q_data_type = fp8
    backend.prepare_metadata(metadata)
    gen = torch.Generator().manual_seed(3)
    n = step.q.shape[0]
    q = step.q.to(fp8)
    k = torch.randn(n, HEADS, NOPE + ROPE, generator=gen).to(fp8)
    v = torch.randn(n, HEADS, V, generator=gen).to(fp8)
    out, lse = backend.run_prefill_new_tokens(q, k, v, return_softmax_lse=True)
    assert out.dtype == step.dtype
    cu = step.query_start_loc.tolist()
    expected, expected_lse = reference(q.float(), k.float(), v.float(), cu, cu, SCALE, causal=True)
    assert (out.double() - expected).abs().max() < TOLERANCE
    assert (lse.double() - expected_lse).abs().max() < 1e-3
    chunk = metadata.chunked_context.chunks[0]
    ck = torch.randn(chunk.num_context_tokens, HEADS, NOPE + ROPE, generator=gen).to(fp8)
    cv = torch.randn(chunk.num_context_tokens, HEADS, V, generator=gen).to(fp8)
    chunk_out, _ = backend.run_prefill_context_chunk(chunk=chunk, q=q[chunk.token_slice], k=ck, v=cv)
    expected, _ = reference(q[chunk.token_slice].float(), ck.float(), cv.float(), chunk.query_start_loc.tolist(),
                            chunk.cu_seq_lens.tolist(), SCALE, causal=False)
    assert chunk_out.dtype == step.dtype and (chunk_out.double() - expected).abs().max() < TOLERANCE
