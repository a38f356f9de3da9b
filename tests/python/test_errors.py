"""Every bad input from Python is an exception carrying the library's
message; none takes the interpreter down."""

import numpy as np
import pytest
import torch

import mlaprefill
from conftest import DQK, V, lengths_to_cu, make_backend, random_tensor


@pytest.fixture
def backend():
    b = make_backend("REFERENCE")
    b.prepare(lengths_to_cu([3, 4]))
    return b


@pytest.fixture
def qkv(rng):
    return (random_tensor(rng, (7, 4, DQK), "torch"), random_tensor(rng, (7, 4, DQK), "torch"),
            random_tensor(rng, (7, 4, V), "torch"))


def test_wrong_dtype(backend, qkv):
    q, k, v = qkv
    with pytest.raises(mlaprefill.InvalidArgument, match="element type"):
        backend.run_new_tokens(q.to(torch.int32), k, v)
    with pytest.raises(ValueError, match="float16"):
        backend.run_new_tokens(q.half(), k, v)  # a float32 backend


def test_wrong_rank_and_shape(backend, qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match="rank"):
        backend.run_new_tokens(q.reshape(7, -1), k, v)
    with pytest.raises(ValueError, match="rank"):
        backend.run_new_tokens(q.reshape(1, 1, 7, 4, DQK), k, v)
    with pytest.raises(ValueError, match="heads"):
        backend.run_new_tokens(q[:, :2], k, v)
    with pytest.raises(ValueError):
        backend.run_new_tokens(q[:, :, :100], k, v)
    with pytest.raises(ValueError):
        backend.run_new_tokens(q, k, v[:, :, :64])


def test_lengths_that_do_not_match_the_metadata(backend, qkv):
    q, k, v = qkv
    with pytest.raises(ValueError):
        backend.run_new_tokens(q[:6], k, v)
    with pytest.raises(ValueError):
        backend.run_new_tokens(q, k[:5], v[:5])


@pytest.mark.parametrize("cu", [[0, 5, 3], [1, 4], [0, -1], [], [0, 2**40]])
def test_bad_cu_seqlens(cu):
    backend = make_backend("REFERENCE")
    with pytest.raises(ValueError):
        backend.prepare(cu)


def test_cu_seqlens_must_be_integers():
    backend = make_backend("REFERENCE")
    with pytest.raises(ValueError, match="integers"):
        backend.prepare(np.array([0.0, 2.5]))
    with pytest.raises(ValueError, match="integers"):
        backend.prepare(torch.tensor([0.0, 3.0]))
    with pytest.raises(ValueError, match="1-d"):
        backend.prepare(torch.zeros(2, 2, dtype=torch.int32))
    backend.prepare(torch.tensor([0, 3], dtype=torch.int32))  # PyTorch integers are fine


def test_not_a_tensor(backend, qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match="DLPack"):
        backend.run_new_tokens(q.tolist(), k, v)
    with pytest.raises(ValueError, match="NoneType"):
        backend.run_context_chunk(0, None, k, v)
    with pytest.raises(ValueError, match="k is required"):
        backend.run_new_tokens(q, None, v)


def test_memory_on_an_unknown_device_is_refused(backend, qkv):
    q, k, v = qkv
    # The meta device has no memory: PyTorch refuses to export it, or the library does.
    with pytest.raises(Exception):
        backend.run_new_tokens(torch.empty_like(q, device="meta"), k, v)


def test_running_before_prepare_and_bad_chunk_indices(qkv):
    q, k, v = qkv
    fresh = make_backend("REFERENCE")
    with pytest.raises(ValueError, match="prepare"):
        fresh.run_new_tokens(q, k, v)
    fresh.prepare(lengths_to_cu([3, 4]), chunks=[lengths_to_cu([1, 1])])
    with pytest.raises(ValueError):
        fresh.run_context_chunk(3, q, k[:2], v[:2])


def test_outputs_of_the_wrong_shape_or_dtype(backend, qkv):
    q, k, v = qkv
    with pytest.raises(ValueError):
        backend.run_new_tokens(q, k, v, out=torch.empty(7, 4, V + 1))
    with pytest.raises(ValueError):
        backend.run_new_tokens(q, k, v, out=torch.empty(7, 4, V, dtype=torch.float16))
    with pytest.raises(ValueError):
        backend.run_new_tokens(q, k, v, lse=torch.empty(4, 6))
    with pytest.raises(ValueError, match="return_lse"):
        backend.run_new_tokens(q, k, v, return_lse=False, lse=torch.empty(4, 7))


def test_bad_output_scales(backend, qkv):
    q, k, v = qkv
    for scale in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            backend.run_new_tokens(q, k, v, return_lse=False, output_scale=scale)
    with pytest.raises(ValueError, match="output_scale"):
        backend.run_new_tokens(q, k, v, return_lse=False, output_scale=torch.ones(2))


def test_negative_strides_are_refused(backend, qkv):
    q, k, v = (x.numpy() for x in qkv)
    with pytest.raises(ValueError):
        backend.run_new_tokens(q[::-1], k, v)


def test_the_backend_keeps_working_after_errors(backend, qkv):
    q, k, v = qkv
    for _ in range(3):
        with pytest.raises(ValueError):
            backend.run_new_tokens(q[:, :1], k, v)
    out, lse = backend.run_new_tokens(q, k, v)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_outputs_that_overlap_inputs_are_value_errors(rng, library):
    # qk_head_dim == v_head_dim, so q itself has out's shape.
    backend = make_backend("REFERENCE", dims=(64, 64, 128))
    cu = lengths_to_cu([3, 4])
    backend.prepare(cu)
    q, k, v = (random_tensor(rng, (7, 4, 128), library) for _ in range(3))
    with pytest.raises(ValueError, match="out overlaps q"):
        backend.run_new_tokens(q, k, v, out=q)
    with pytest.raises(ValueError, match="out overlaps v"):
        backend.run_new_tokens(q, k, v, out=v[:, :, :])
    lse = random_tensor(rng, (4, 7), library)
    with pytest.raises(ValueError, match="merge: out overlaps suffix_out"):
        backend.merge_attn_states(q, lse, k, lse, output=k)
    with pytest.raises(ValueError, match="run_prefill_step: out overlaps q"):
        mlaprefill.run_prefill_step(backend, q, k, v, cu, out=q)
    # Apart, the same call runs.
    out = random_tensor(rng, (7, 4, 128), library)
    backend.run_new_tokens(q, k, v, out=out)


def test_an_output_inside_a_wider_input_is_a_value_error(backend, qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match="out overlaps q"):
        backend.run_new_tokens(q, k, v, out=q[:, :, :V])
