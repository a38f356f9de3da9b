"""The backend operations from Python against the fp64 oracle, on NumPy
arrays and PyTorch tensors: results, in-place outputs, strides."""

import numpy as np
import pytest
import torch

import mlaprefill
from conftest import (DQK, HOST_BACKENDS, V, assert_close, attention, lengths_to_cu, make_backend,
                      random_tensor)

LIBRARIES = ["numpy", "torch"]


def data_pointer(x):
    return x.data_ptr() if isinstance(x, torch.Tensor) else x.__array_interface__["data"][0]


@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("library", LIBRARIES)
def test_new_tokens_match_the_oracle(rng, name, library):
    lengths = [5, 0, 17, 1]  # odd lengths and an empty sequence
    cu = lengths_to_cu(lengths)
    n = cu[-1]
    q, k = (random_tensor(rng, (n, 4, DQK), library) for _ in range(2))
    v = random_tensor(rng, (n, 4, V), library)
    backend = make_backend(name)
    backend.prepare(cu)
    out, lse = backend.run_new_tokens(q, k, v)
    assert type(out) is type(q) and tuple(out.shape) == (n, 4, V) and tuple(lse.shape) == (4, n)
    expected_out, expected_lse = attention(q, k, v, cu, cu, backend.scale, causal=True)
    assert_close(out, lse, expected_out, expected_lse, "float32")
    only_out = backend.run_new_tokens(q, k, v, return_lse=False)
    assert not isinstance(only_out, tuple)
    assert np.array_equal(np.asarray(only_out), np.asarray(out))


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_a_call_may_pass_its_own_scale(rng, name):
    cu = lengths_to_cu([4, 7])
    q, k = (random_tensor(rng, (11, 4, DQK), "numpy") for _ in range(2))
    v = random_tensor(rng, (11, 4, V), "numpy")
    backend = make_backend(name)
    backend.prepare(cu)
    out, lse = backend.run_new_tokens(q, k, v, scale=0.31)
    assert_close(out, lse, *attention(q, k, v, cu, cu, 0.31, causal=True), "float32")
    selector = mlaprefill.Selector(apply=False)
    unscaled = selector.create(selector.select("float32", backend=name), num_heads=4)
    unscaled.prepare(cu)
    with pytest.raises(ValueError, match="no softmax scale"):
        unscaled.run_new_tokens(q, k, v)
    with pytest.raises(ValueError, match="scale must be finite"):
        unscaled.run_new_tokens(q, k, v, scale=float("inf"))


@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("library", LIBRARIES)
def test_outputs_are_written_in_place(rng, name, library):
    cu = lengths_to_cu([3, 9])
    q, k = (random_tensor(rng, (12, 4, DQK), library) for _ in range(2))
    v = random_tensor(rng, (12, 4, V), library)
    out = random_tensor(rng, (12, 4, V), library)
    lse = random_tensor(rng, (4, 12), library)
    out[:] = float("nan")  # poisoned: every element must be written
    lse[:] = float("nan")
    backend = make_backend(name)
    backend.prepare(cu)
    got_out, got_lse = backend.run_new_tokens(q, k, v, out=out, lse=lse)
    assert got_out is out and got_lse is lse
    assert data_pointer(got_out) == data_pointer(out)
    expected_out, expected_lse = attention(q, k, v, cu, cu, backend.scale, causal=True)
    assert_close(out, lse, expected_out, expected_lse, "float32")


@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("library", LIBRARIES)
def test_strided_inputs_and_outputs_are_honoured(rng, name, library):
    cu = lengths_to_cu([7, 4])
    n = cu[-1]
    # q and k are slices of wider rows, v a head-major buffer seen token-major,
    # out every other row of a larger buffer: no input is contiguous.
    wide_q = random_tensor(rng, (n, 4, DQK + 32), library)
    wide_k = random_tensor(rng, (n, 4, DQK + 8), library)
    head_major_v = random_tensor(rng, (4, n, V), library)
    q, k = wide_q[:, :, 16 : 16 + DQK], wide_k[:, :, :DQK]
    v = head_major_v.transpose(1, 0, 2) if library == "numpy" else head_major_v.transpose(0, 1)
    big_out = random_tensor(rng, (2 * n, 4, V), library)
    out = big_out[::2]
    backend = make_backend(name)
    backend.prepare(cu)
    got, lse = backend.run_new_tokens(q, k, v, out=out)
    assert data_pointer(got) == data_pointer(big_out)
    expected_out, expected_lse = attention(q, k, v, cu, cu, backend.scale, causal=True)
    assert_close(got, lse, expected_out, expected_lse, "float32")


@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_torch_tensors(rng, name, dtype):
    cu = lengths_to_cu([6, 13])
    q, k = (random_tensor(rng, (19, 4, DQK), "torch", dtype) for _ in range(2))
    v = random_tensor(rng, (19, 4, V), "torch", dtype)
    backend = make_backend(name, dtype)
    backend.prepare(cu)
    out, lse = backend.run_new_tokens(q, k, v)
    assert out.dtype == q.dtype and lse.dtype == torch.float32
    expected_out, expected_lse = attention(q.float(), k.float(), v.float(), cu, cu, backend.scale, causal=True)
    assert_close(out, lse, expected_out, expected_lse, dtype)


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_float16_numpy_arrays(rng, name):
    cu = lengths_to_cu([8])
    q, k = (random_tensor(rng, (8, 4, DQK), "numpy", "float16") for _ in range(2))
    v = random_tensor(rng, (8, 4, V), "numpy", "float16")
    backend = make_backend(name, "float16")
    backend.prepare(cu)
    out, lse = backend.run_new_tokens(q, k, v)
    assert out.dtype == np.float16
    expected_out, expected_lse = attention(q, k, v, cu, cu, backend.scale, causal=True)
    assert_close(out, lse, expected_out, expected_lse, "float16")


@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("library", LIBRARIES)
def test_context_chunk_and_merge_make_the_whole_attention(rng, name, library):
    q_lengths, context_lengths = [4, 0, 9], [6, 3, 0]
    cu_q, cu_c = lengths_to_cu(q_lengths), lengths_to_cu(context_lengths)
    nq, nc = cu_q[-1], cu_c[-1]
    q, k = random_tensor(rng, (nq, 4, DQK), library), random_tensor(rng, (nq, 4, DQK), library)
    v = random_tensor(rng, (nq, 4, V), library)
    ck, cv = random_tensor(rng, (nc, 4, DQK), library), random_tensor(rng, (nc, 4, V), library)
    backend = make_backend(name)
    backend.prepare(cu_q, chunks=[cu_c])
    suffix, suffix_lse = backend.run_new_tokens(q, k, v)
    prefix, prefix_lse = backend.run_context_chunk(0, q, ck, cv)
    expected_prefix, expected_prefix_lse = attention(q, ck, cv, cu_q, cu_c, backend.scale, causal=False)
    assert_close(prefix, prefix_lse, expected_prefix, expected_prefix_lse, "float32")
    merged, merged_lse = backend.merge_attn_states(prefix, prefix_lse, suffix, suffix_lse, return_lse=True)
    # The whole attention: each sequence's context keys, then its new keys.
    whole_k, whole_v, cu_whole = [], [], [0]
    for b in range(len(q_lengths)):
        whole_k += [np.asarray(ck[cu_c[b] : cu_c[b + 1]]), np.asarray(k[cu_q[b] : cu_q[b + 1]])]
        whole_v += [np.asarray(cv[cu_c[b] : cu_c[b + 1]]), np.asarray(v[cu_q[b] : cu_q[b + 1]])]
        cu_whole.append(cu_whole[-1] + context_lengths[b] + q_lengths[b])
    expected, expected_lse = attention(q, np.concatenate(whole_k), np.concatenate(whole_v), cu_q, cu_whole,
                                       backend.scale, causal=True)
    assert_close(merged, merged_lse, expected, expected_lse, "float32")
    # The module function and the whole step agree with it too.
    assert_close(mlaprefill.merge_attn_states(prefix, prefix_lse, suffix, suffix_lse), None, expected, None,
                 "float32")
    out, lse = mlaprefill.run_prefill_step(backend, q, k, v, cu_q, context=[(cu_c, ck, cv)])
    assert_close(out, lse, expected, expected_lse, "float32")


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_prefill_step_uses_the_callers_workspace_and_outputs(rng, name):
    cu_q, cu_c = lengths_to_cu([3, 5]), lengths_to_cu([2, 7])
    q, k = random_tensor(rng, (8, 4, DQK), "torch"), random_tensor(rng, (8, 4, DQK), "torch")
    v = random_tensor(rng, (8, 4, V), "torch")
    ck, cv = random_tensor(rng, (9, 4, DQK), "torch"), random_tensor(rng, (9, 4, V), "torch")
    backend = make_backend(name)
    size = backend.workspace_size(cu_q, chunks=[cu_c])
    assert size > 0
    workspace = torch.empty(size, dtype=torch.uint8)
    out, lse = torch.full((8, 4, V), float("nan")), torch.full((4, 8), float("nan"))
    got = mlaprefill.run_prefill_step(backend, q, k, v, cu_q, context=[(cu_c, ck, cv)], out=out, lse=lse,
                                      workspace=workspace)
    assert got[0] is out and got[1] is lse
    reference = make_backend("REFERENCE")
    expected_out, expected_lse = mlaprefill.run_prefill_step(reference, q, k, v, cu_q, context=[(cu_c, ck, cv)])
    assert_close(out, lse, expected_out.numpy(), expected_lse.numpy(), "float32")
    with pytest.raises(ValueError, match="workspace"):
        mlaprefill.run_prefill_step(backend, q, k, v, cu_q, context=[(cu_c, ck, cv)],
                                    workspace=torch.empty(1, dtype=torch.uint8))


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_fp8_output_with_host_and_tensor_scales(rng, name):
    backend = make_backend(name)
    if not backend.supports_quant_output():
        pytest.skip(f"{name} writes no fp8 output")
    cu = lengths_to_cu([5, 6])
    q, k = random_tensor(rng, (11, 4, DQK), "torch"), random_tensor(rng, (11, 4, DQK), "torch")
    v = random_tensor(rng, (11, 4, V), "torch")
    backend.prepare(cu)
    exact = backend.run_new_tokens(q, k, v, return_lse=False)
    host = backend.run_new_tokens(q, k, v, return_lse=False, output_scale=0.5)
    device = backend.run_new_tokens(q, k, v, return_lse=False, output_scale=torch.tensor([0.5]))
    # vLLM's static scale is 0-d (input_scale.max()): taken as one element.
    zero_d = backend.run_new_tokens(q, k, v, return_lse=False, output_scale=torch.tensor(0.5))
    assert host.dtype == getattr(torch, "float8_e4m3fn", torch.uint8)
    assert torch.equal(host.view(torch.uint8), device.view(torch.uint8))
    assert torch.equal(host.view(torch.uint8), zero_d.view(torch.uint8))
    # The bytes decode to out / scale within fp8 e4m3's 3-bit mantissa.
    decoded = fp8_e4m3_to_float(host.view(torch.uint8).numpy())
    expected = exact.numpy() / 0.5
    assert np.all(np.abs(decoded - expected) <= 0.0625 * np.abs(expected) + 2.0 ** -9)


def fp8_e4m3_to_float(bytes_):
    sign = np.where(bytes_ & 0x80, -1.0, 1.0)
    exponent = (bytes_ >> 3) & 0xF
    mantissa = (bytes_ & 0x7).astype(np.float64)
    normal = sign * (1 + mantissa / 8) * 2.0 ** (exponent.astype(np.float64) - 7)
    subnormal = sign * (mantissa / 8) * 2.0 ** -6
    return np.where(exponent == 0, subnormal, normal)


def test_requires_grad_tensors_are_read_without_copies(rng):
    backend = make_backend("REFERENCE")
    cu = lengths_to_cu([4])
    q = random_tensor(rng, (4, 4, DQK), "torch").requires_grad_()
    k, v = random_tensor(rng, (4, 4, DQK), "torch"), random_tensor(rng, (4, 4, V), "torch")
    backend.prepare(cu)
    out, lse = backend.run_new_tokens(q, k, v)
    expected_out, expected_lse = attention(q.detach(), k, v, cu, cu, backend.scale, causal=True)
    assert_close(out, lse, expected_out, expected_lse, "float32")


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_a_stream_handle_with_host_arrays_is_not_passed_to_them(rng, library):
    """A stream handle means something to GPU arrays only: host arrays are
    exported without it (NumPy refuses any stream), and a host queue ignores
    it, so prepare and run with a handle give the same bits as without."""
    backend = make_backend("REFERENCE")
    cu = lengths_to_cu([4, 3])
    q, k = random_tensor(rng, (7, 4, DQK), library), random_tensor(rng, (7, 4, DQK), library)
    v = random_tensor(rng, (7, 4, V), library)
    backend.prepare(cu)
    expected, expected_lse = backend.run_new_tokens(q, k, v)
    backend.prepare(cu, stream=12345)
    out, lse = np.full((7, 4, V), np.nan, np.float32), np.full((4, 7), np.nan, np.float32)
    backend._native.run_new_tokens(q, k, v, backend.scale, True, out, lse, None, 12345)
    assert np.array_equal(out, np.asarray(expected)) and np.array_equal(lse, np.asarray(expected_lse))
