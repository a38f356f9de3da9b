"""Shared pieces of the Python tests: an fp64 NumPy oracle of the library's
contract (independent of the library, so that a binding which misreads
strides or shapes cannot agree with itself), random inputs, and the backends
this build has on the host."""

import math

import numpy as np
import pytest

import mlaprefill

P, R, V = mlaprefill.DEEPSEEK_DIMS
DQK = P + R


def attention(q, k, v, cu_q, cu_k, scale, causal):
    """out [Nq, H, V] and lse [H, Nq] in fp64; causal is bottom-right aligned;
    rows without keys give 0 and -inf."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    nq, heads = q.shape[0], q.shape[1]
    out = np.zeros((nq, heads, v.shape[2]))
    lse = np.full((heads, nq), -np.inf)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        sq, sk = q1 - q0, k1 - k0
        for i in range(sq):
            visible = sk if not causal else min(sk, i + 1 + (sk - sq))
            if visible <= 0:
                continue
            s = np.einsum("hd,khd->hk", q[q0 + i], k[k0 : k0 + visible]) * scale
            m = s.max(axis=1, keepdims=True)
            p = np.exp(s - m)
            total = p.sum(axis=1)
            out[q0 + i] = np.einsum("hk,khv->hv", p, v[k0 : k0 + visible]) / total[:, None]
            lse[:, q0 + i] = (m[:, 0] + np.log(total))
    return out, lse


def to_numpy(x):
    if hasattr(x, "detach"):
        return x.detach().float().cpu().numpy().astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def relative_error(actual, expected):
    actual, expected = to_numpy(actual), to_numpy(expected)
    assert not np.isnan(actual).any(), "NaN in the result"
    return float(np.linalg.norm(actual - expected) / max(np.linalg.norm(expected), 1e-30))


# Contract §9: relative norm error against fp64, and LSE absolute error.
TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}
LSE_TOLERANCE = {"float32": 1e-3, "float16": 1e-3, "bfloat16": 1e-2}


def assert_close(out, lse, expected_out, expected_lse, dtype):
    assert relative_error(out, expected_out) < TOLERANCE[dtype]
    if lse is not None:
        got = to_numpy(lse)
        finite = np.isfinite(expected_lse)
        assert np.array_equal(np.isfinite(got), finite), "-inf rows differ"
        if finite.any():
            assert np.abs(got[finite] - expected_lse[finite]).max() < LSE_TOLERANCE[dtype]


def lengths_to_cu(lengths):
    return [0] + list(np.cumsum(lengths).astype(int))


@pytest.fixture
def rng():
    return np.random.default_rng(20261123)


def random_tensor(rng, shape, library="numpy", dtype="float32"):
    data = rng.standard_normal(shape).astype(np.float32)
    if library == "numpy":
        return data.astype(np.float16 if dtype == "float16" else np.float32)
    import torch

    table = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    return torch.from_numpy(data).to(table[dtype])


HOST_BACKENDS = [
    c["name"]
    for c in mlaprefill.Selector(apply=False).report("float32")
    if c["valid"] and c["name"] in ("REFERENCE", "KOKKOS")
]


def make_backend(name, dtype="float32", heads=4, dims=mlaprefill.DEEPSEEK_DIMS, kv_lora_rank=512):
    selector = mlaprefill.Selector(apply=False)
    selection = selector.select(dtype, dims, backend=name)
    return selector.create(selection, num_heads=heads, scale=1.0 / math.sqrt(dims[0] + dims[1]),
                           kv_lora_rank=kv_lora_rank, dims=dims)
