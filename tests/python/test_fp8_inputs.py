"""float8_e4m3 q, k and v with descales from Python (docs/contract.md §4):
NumPy uint8 bytes and PyTorch tensors (float8_e4m3fn where PyTorch has it,
uint8 bytes otherwise) against an fp64 oracle of the dequantized inputs."""

import math

import numpy as np
import pytest
import torch

import mlaprefill
from conftest import DQK, HOST_BACKENDS, V, attention, lengths_to_cu, relative_error

HEADS = 4


def e4m3_values(codes):
    """The value of each OCP e4m3fn byte, written from the format: sign, 4
    exponent bits (bias 7), 3 mantissa bits; exponent 0 holds subnormals
    (m * 2^-9); 0x7f and 0xff are NaN."""
    codes = np.asarray(codes, dtype=np.uint8).astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = codes & 0x7
    normal = (1.0 + mantissa / 8.0) * np.exp2(exponent - 7.0)
    subnormal = mantissa * 2.0**-9
    values = sign * np.where(exponent == 0, subnormal, normal)
    return np.where((codes & 0x7F) == 0x7F, np.nan, values)


def random_codes(rng, shape):
    """Bytes over the whole finite range, both signs, never zero or NaN."""
    codes = rng.integers(1, 0x7F, size=shape, dtype=np.uint8)
    return codes | (rng.integers(0, 2, size=shape, dtype=np.uint8) << 7)


def fp8_backend(name, out_dtype):
    selector = mlaprefill.Selector(apply=False)
    selection = selector.select("float8_e4m3", backend=name)
    return selector.create(selection, num_heads=HEADS, scale=1.0 / math.sqrt(DQK), out_dtype=out_dtype)


def as_torch_fp8(codes):
    """PyTorch's fp8 tensor of `codes` where it has the type, else uint8 bytes."""
    bytes_ = torch.from_numpy(codes)
    fp8 = getattr(torch, "float8_e4m3fn", None)
    return bytes_.view(fp8) if fp8 is not None else bytes_


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_numpy_bytes_with_per_head_descales(rng, name):
    cu = lengths_to_cu([5, 0, 17, 1])
    n = cu[-1]
    q, k = random_codes(rng, (n, HEADS, DQK)), random_codes(rng, (n, HEADS, DQK))
    v = random_codes(rng, (n, HEADS, V))
    q_ds = (np.arange(1, HEADS + 1, dtype=np.float32) * 0.5 / 448).astype(np.float32)
    k_ds = np.float32(1.5 / 448)
    v_ds = np.full(HEADS, 1.0 / 448, dtype=np.float32) * np.float32(0.75)
    backend = fp8_backend(name, "float16")
    assert (backend.dtype, backend.out_dtype) == ("float8_e4m3", "float16")
    backend.prepare(cu)
    out, lse = backend.run_new_tokens(q, k, v, q_descale=q_ds, k_descale=float(k_ds), v_descale=v_ds)
    assert out.dtype == np.float16 and out.shape == (n, HEADS, V)
    expected_out, expected_lse = attention(e4m3_values(q) * q_ds[None, :, None], e4m3_values(k) * float(k_ds),
                                           e4m3_values(v) * v_ds[None, :, None], cu, cu, backend.scale, causal=True)
    assert relative_error(out, expected_out) < 2e-3  # fp16 output (§6)
    finite = np.isfinite(expected_lse)
    assert np.max(np.abs(np.asarray(lse, dtype=np.float64)[finite] - expected_lse[finite])) < 1e-3


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_torch_step_with_a_context_chunk_and_zero_d_descales(rng, name):
    q_lens, chunk_lens = [6, 3], [9, 0]
    cu_q, cu_c = lengths_to_cu(q_lens), lengths_to_cu(chunk_lens)
    nq, nc = cu_q[-1], cu_c[-1]
    codes = {name_: random_codes(rng, shape) for name_, shape in (
        ("q", (nq, HEADS, DQK)), ("k", (nq, HEADS, DQK)), ("v", (nq, HEADS, V)),
        ("ck", (nc, HEADS, DQK)), ("cv", (nc, HEADS, V)))}
    q_ds, k_ds, v_ds = (torch.tensor(x, dtype=torch.float32) for x in (2.0 / 448, 1.5 / 448, 1.0 / 448))  # 0-d
    backend = fp8_backend(name, "bfloat16")
    out, lse = mlaprefill.run_prefill_step(
        backend, as_torch_fp8(codes["q"]), as_torch_fp8(codes["k"]), as_torch_fp8(codes["v"]), cu_q,
        context=[(cu_c, as_torch_fp8(codes["ck"]), as_torch_fp8(codes["cv"]))],
        q_descale=q_ds, k_descale=k_ds, v_descale=v_ds)
    assert out.dtype == torch.bfloat16
    # One causal pass over each sequence's cached keys, then its new ones.
    full_k, full_v, full_lens = [], [], []
    for b in range(len(q_lens)):
        full_k += [codes["ck"][cu_c[b]:cu_c[b + 1]], codes["k"][cu_q[b]:cu_q[b + 1]]]
        full_v += [codes["cv"][cu_c[b]:cu_c[b + 1]], codes["v"][cu_q[b]:cu_q[b + 1]]]
        full_lens.append(chunk_lens[b] + q_lens[b])
    cu_full = lengths_to_cu(full_lens)
    expected_out, expected_lse = attention(
        e4m3_values(codes["q"]) * float(q_ds), e4m3_values(np.concatenate(full_k)) * float(k_ds),
        e4m3_values(np.concatenate(full_v)) * float(v_ds), cu_q, cu_full, backend.scale, causal=True)
    assert relative_error(out, expected_out) < 1e-2  # bf16 output (§6)
    assert np.max(np.abs(lse.double().numpy() - expected_lse)) < 1e-2


def test_bad_fp8_arguments_are_refused(rng):
    with pytest.raises(ValueError, match="need out_dtype float16 or bfloat16"):
        fp8_backend("REFERENCE", None)
    backend = fp8_backend("REFERENCE", "float16")
    cu = lengths_to_cu([3])
    q, k = random_codes(rng, (3, HEADS, DQK)), random_codes(rng, (3, HEADS, DQK))
    v = random_codes(rng, (3, HEADS, V))
    backend.prepare(cu)
    out = np.full((3, HEADS, V), np.nan, dtype=np.float16)
    for descales, message in (
        ({"q_descale": float("nan")}, "q descale must be a finite positive number"),
        ({"k_descale": 0.0}, "k descale must be a finite positive number"),
        ({"v_descale": np.ones(HEADS + 1, dtype=np.float32)}, r"v descale must be float32 of shape \[\], \[1\] or \[4\]"),
        ({"q_descale": np.ones(HEADS, dtype=np.float16)}, "q descale must be float32"),
        ({"k_descale": np.array([1, 1, -1, 1], dtype=np.float32)}, "k descale must be finite and positive; head 2"),
    ):
        with pytest.raises(ValueError, match=message):
            backend.run_new_tokens(q, k, v, out=out, **descales)
        assert np.isnan(out).all(), "a refused call wrote its output"
    bf16 = mlaprefill.Selector(apply=False)
    plain = bf16.create(bf16.select("float32", backend="REFERENCE"), num_heads=HEADS, scale=0.1)
    plain.prepare(cu)
    x = rng.standard_normal((3, HEADS, DQK)).astype(np.float32)
    with pytest.raises(ValueError, match="descales are for float8_e4m3 q, k and v"):
        plain.run_new_tokens(x, x, rng.standard_normal((3, HEADS, V)).astype(np.float32), q_descale=1.0)


@pytest.mark.skipif(not mlaprefill.HAS_TORCH_OPS, reason="built without libtorch")
def test_torch_operators_take_fp8_bytes_descales_and_an_output_dtype(rng):
    cu_q, cu_c = lengths_to_cu([5, 0, 11]), lengths_to_cu([3, 4, 0])
    n, nc = cu_q[-1], cu_c[-1]
    q, k = random_codes(rng, (n, HEADS, DQK)), random_codes(rng, (n, HEADS, DQK))
    v = random_codes(rng, (n, HEADS, V))
    ck, cv = random_codes(rng, (nc, HEADS, DQK)), random_codes(rng, (nc, HEADS, V))
    scale = 1.0 / math.sqrt(DQK)
    q_ds = torch.arange(1, HEADS + 1, dtype=torch.float32) * (0.5 / 448)  # one per head
    k_ds, v_ds = torch.tensor(1.5 / 448), torch.tensor([1.0 / 448])  # 0-d and [1]
    cu_q_t, cu_c_t = torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_c, dtype=torch.int32)
    ops = torch.ops.mlaprefill
    out, lse = ops.prefill(as_torch_fp8(q), as_torch_fp8(k), as_torch_fp8(v), cu_q_t, cu_q_t, scale,
                           q_descale=q_ds, k_descale=k_ds, v_descale=v_ds, out_dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16

    def values(codes, descale):
        d = descale.double().numpy()
        return e4m3_values(codes) * (d[None, :, None] if d.size > 1 else float(d.reshape(-1)[0]))

    expected_out, expected_lse = attention(values(q, q_ds), values(k, k_ds), values(v, v_ds), cu_q, cu_q, scale,
                                           causal=True)
    assert relative_error(out, expected_out) < 1e-2
    chunk_out, _ = ops.context_chunk(as_torch_fp8(q), as_torch_fp8(ck), as_torch_fp8(cv), cu_q_t, cu_c_t, scale,
                                     q_descale=q_ds, k_descale=k_ds, v_descale=v_ds, out_dtype=torch.float16)
    assert chunk_out.dtype == torch.float16
    expected_chunk, _ = attention(values(q, q_ds), values(ck, k_ds), values(cv, v_ds), cu_q, cu_c, scale,
                                  causal=False)
    assert relative_error(chunk_out, expected_chunk) < 2e-3
    with pytest.raises(ValueError, match="need out_dtype float16 or bfloat16"):
        ops.prefill(as_torch_fp8(q), as_torch_fp8(k), as_torch_fp8(v), cu_q_t, cu_q_t, scale)
