"""Top-k masks, windows and sinks (docs/contract.md §12) from Python: the host
backends against a NumPy fp64 masked attention written here, a chunked step
with sinks applied once, and the refusals."""

import math

import numpy as np
import pytest

import mlaprefill
from conftest import DQK, HOST_BACKENDS, V, assert_close, lengths_to_cu, make_backend, random_tensor


def masked_attention(q, k, v, q_lens, k_lens, scale, allowed, window=0, sinks=None):
    """fp64, causal bottom-right: query i of a sequence sees key j when j <=
    i + sk - sq, allowed[b][i][j], and (with a window) j > i + sk - sq - window;
    sinks join the denominator, not the LSE."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    heads = q.shape[1]
    out = np.zeros((q.shape[0], heads, v.shape[2]))
    lse = np.full((heads, q.shape[0]), -np.inf)
    q0 = k0 = 0
    for b, (sq, sk) in enumerate(zip(q_lens, k_lens)):
        for i in range(sq):
            position = i + sk - sq
            seen = [j for j in range(sk) if j <= position and allowed[b][i][j] and (window == 0 or j > position - window)]
            if not seen:
                continue
            for h in range(heads):
                s = scale * (k[[k0 + j for j in seen], h] @ q[q0 + i, h])
                m = s.max()
                w = np.exp(s - m)
                denominator = w.sum() + (0.0 if sinks is None else math.exp(sinks[h] - m))
                out[q0 + i, h] = (w[:, None] * v[[k0 + j for j in seen], h]).sum(0) / denominator
                lse[h, q0 + i] = m + math.log(w.sum())
        q0 += sq
        k0 += sk
    return out, lse


def pack(allowed, q_lens, k_lens):
    """vLLM's bit-packed rows: int32 [B, rows, words], rows and words padded."""
    rows = max(q_lens) + 1
    words = (math.ceil(max(k_lens) / 32) + 3) // 4 * 4
    bits = np.zeros((len(q_lens), rows, words * 32), dtype=np.uint8)
    for b, sq in enumerate(q_lens):
        for i in range(sq):
            bits[b, i, : k_lens[b]] = allowed[b][i]
    return np.packbits(bits, axis=-1, bitorder="little").view(np.int32).copy()


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_masks_windows_and_sinks_match_numpy(rng, name):
    q_lens = [5, 0, 40, 9]
    k_lens = [5, 0, 40, 30]
    allowed = [rng.random((sq, sk)) < 0.4 for sq, sk in zip(q_lens, k_lens)]
    q = random_tensor(rng, (sum(q_lens), 4, DQK))
    k = random_tensor(rng, (sum(k_lens), 4, DQK))
    v = random_tensor(rng, (sum(k_lens), 4, V))
    sinks = np.array([0.5, -np.inf, 2.0, -1.0], dtype=np.float32)
    backend = make_backend(name)
    backend.prepare(lengths_to_cu(q_lens), lengths_to_cu(k_lens))
    for window, with_sinks in [(0, False), (7, False), (0, True), (12, True)]:
        out, lse = backend.run_new_tokens(q, k, v, topk_mask=pack(allowed, q_lens, k_lens), window=window,
                                          sinks=sinks if with_sinks else None)
        expected = masked_attention(q, k, v, q_lens, k_lens, backend.scale, allowed, window,
                                    sinks if with_sinks else None)
        assert_close(out, lse, *expected, "float32")


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_chunked_step_applies_sinks_once(rng, name):
    q_lens, context = [6, 11], [9, 0]
    whole = [c + n for c, n in zip(context, q_lens)]
    allowed = [rng.random((sq, n)) < 0.5 for sq, n in zip(q_lens, whole)]
    q = random_tensor(rng, (sum(q_lens), 4, DQK))
    k = random_tensor(rng, (sum(q_lens), 4, DQK))
    v = random_tensor(rng, (sum(q_lens), 4, V))
    ck = random_tensor(rng, (sum(context), 4, DQK))
    cv = random_tensor(rng, (sum(context), 4, V))
    sinks = np.array([1.0, 0.0, -0.5, 3.0], dtype=np.float32)
    backend = make_backend(name)
    out, lse = mlaprefill.run_prefill_step(backend, q, k, v, lengths_to_cu(q_lens),
                                           context=[(lengths_to_cu(context), ck, cv)],
                                           topk_mask=pack(allowed, q_lens, whole), sinks=sinks)
    # One pass over each sequence's context keys, then its new ones.
    full_k = np.concatenate([ck[:9], k[:6], k[6:]])
    full_v = np.concatenate([cv[:9], v[:6], v[6:]])
    expected = masked_attention(q, full_k, full_v, q_lens, whole, backend.scale, allowed, 0, sinks)
    assert_close(out, lse, *expected, "float32")


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_bad_masks_and_sinks_are_refused(rng, name):
    q = random_tensor(rng, (4, 4, DQK))
    v = random_tensor(rng, (4, 4, V))
    backend = make_backend(name)
    backend.prepare([0, 4])
    with pytest.raises(ValueError, match="must be an int32 or uint32 tensor"):
        backend.run_new_tokens(q, q, v, topk_mask=np.zeros((1, 4, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="rows per sequence"):
        backend.run_new_tokens(q, q, v, topk_mask=np.zeros((1, 2, 4), dtype=np.int32))
    with pytest.raises(ValueError, match="window must be 0"):
        backend.run_new_tokens(q, q, v, window=-2)
    with pytest.raises(ValueError, match="sinks must be finite or -inf"):
        backend.run_new_tokens(q, q, v, sinks=np.array([0, 0, np.nan, 0], dtype=np.float32))
