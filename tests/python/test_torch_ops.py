"""torch.ops.mlaprefill: the operators against the fp64 oracle, their
outputs from PyTorch's allocator, and PyTorch's errors for bad input."""

import math

import pytest
import torch

import mlaprefill
from conftest import DQK, V, assert_close, attention, lengths_to_cu, random_tensor

pytestmark = pytest.mark.skipif(not mlaprefill.HAS_TORCH_OPS, reason="built without libtorch")


def test_prefill_and_context_chunk_match_the_oracle(rng):
    cu_q, cu_c = lengths_to_cu([5, 0, 11]), lengths_to_cu([3, 4, 0])
    q, k = random_tensor(rng, (16, 4, DQK), "torch"), random_tensor(rng, (16, 4, DQK), "torch")
    v = random_tensor(rng, (16, 4, V), "torch")
    ck, cv = random_tensor(rng, (7, 4, DQK), "torch"), random_tensor(rng, (7, 4, V), "torch")
    scale = 1 / math.sqrt(DQK)
    cu_q_t, cu_c_t = torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_c, dtype=torch.int64)
    out, lse = torch.ops.mlaprefill.prefill(q, k, v, cu_q_t, cu_q_t, scale)
    assert_close(out, lse, *attention(q, k, v, cu_q, cu_q, scale, causal=True), "float32")
    chunk_out, chunk_lse = torch.ops.mlaprefill.context_chunk(q, ck, cv, cu_q_t, cu_c_t, scale)
    assert_close(chunk_out, chunk_lse, *attention(q, ck, cv, cu_q, cu_c, scale, causal=False), "float32")
    merged, merged_lse = torch.ops.mlaprefill.merge_attn_states(chunk_out, chunk_lse, out, lse)
    # The oracle of the whole attention: each sequence's context keys, then its new keys.
    whole_k, whole_v, cu_whole = [], [], [0]
    for b in range(len(cu_q) - 1):
        whole_k += [ck[cu_c[b] : cu_c[b + 1]], k[cu_q[b] : cu_q[b + 1]]]
        whole_v += [cv[cu_c[b] : cu_c[b + 1]], v[cu_q[b] : cu_q[b + 1]]]
        cu_whole.append(cu_whole[-1] + (cu_c[b + 1] - cu_c[b]) + (cu_q[b + 1] - cu_q[b]))
    expected = attention(q, torch.cat(whole_k), torch.cat(whole_v), cu_q, cu_whole, scale, causal=True)
    assert_close(merged, merged_lse, *expected, "float32")


def test_each_call_has_its_own_scale(rng):
    """One backend serves every scale: alternating scales each match the oracle."""
    cu = lengths_to_cu([6, 3])
    cu_t = torch.tensor(cu, dtype=torch.int32)
    q, k = random_tensor(rng, (9, 2, DQK), "torch"), random_tensor(rng, (9, 2, DQK), "torch")
    v = random_tensor(rng, (9, 2, V), "torch")
    for scale in (0.05, 0.3, 0.05):
        out, lse = torch.ops.mlaprefill.prefill(q, k, v, cu_t, cu_t, scale)
        assert_close(out, lse, *attention(q, k, v, cu, cu, scale, causal=True), "float32")


def test_an_explicit_backend_and_bf16(rng):
    cu = torch.tensor(lengths_to_cu([9, 4]))
    q, k = random_tensor(rng, (13, 2, DQK), "torch", "bfloat16"), random_tensor(rng, (13, 2, DQK), "torch",
                                                                               "bfloat16")
    v = random_tensor(rng, (13, 2, V), "torch", "bfloat16")
    out, lse = torch.ops.mlaprefill.prefill(q, k, v, cu, cu, 0.1, backend="REFERENCE")
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert_close(out, lse, *attention(q.float(), k.float(), v.float(), cu.tolist(), cu.tolist(), 0.1, True),
                 "bfloat16")


def test_bad_input_is_a_value_error_with_the_librarys_message(rng):
    q, k = random_tensor(rng, (4, 2, DQK), "torch"), random_tensor(rng, (4, 2, DQK), "torch")
    v = random_tensor(rng, (4, 2, V), "torch")
    cu = torch.tensor([0, 4])
    with pytest.raises(ValueError, match="heads"):
        torch.ops.mlaprefill.prefill(q, k[:, :1], v, cu, cu, 0.1)
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        torch.ops.mlaprefill.prefill(q, k, v, torch.tensor([0, 5, 4]), cu, 0.1)
    with pytest.raises(ValueError, match="integer"):
        torch.ops.mlaprefill.prefill(q, k, v, torch.tensor([0.0, 4.0]), cu, 0.1)
    with pytest.raises(ValueError, match="Unknown MLA prefill backend"):
        torch.ops.mlaprefill.prefill(q, k, v, cu, cu, 0.1, backend="NOPE")
    with pytest.raises(ValueError, match="element type"):
        torch.ops.mlaprefill.prefill(q.double(), k, v, cu, cu, 0.1)
    out, _ = torch.ops.mlaprefill.prefill(q, k, v, cu, cu, 0.1)  # still works afterwards
    assert torch.isfinite(out).all()


def test_vllm_masked_mha_calls_with_a_global_mask(rng):
    """vLLM's masked-MHA shape (docs/contract.md §12): one global top-k mask
    over each sequence's context and new tokens, the new tokens' call and two
    context-chunk calls each told where their keys start (key_starts), and a
    merge with the sinks, against an fp64 masked attention over the whole key
    range."""
    from test_masks import masked_attention, pack

    q_lens, first, second = [6, 11, 3], [5, 0, 7], [4, 0, 0]
    context = [a + b for a, b in zip(first, second)]
    whole = [c + n for c, n in zip(context, q_lens)]
    allowed = [rng.random((sq, n)) < 0.5 for sq, n in zip(q_lens, whole)]
    heads, scale = 4, 0.2
    q = random_tensor(rng, (sum(q_lens), heads, DQK), "torch")
    whole_k = random_tensor(rng, (sum(whole), heads, DQK), "torch")
    whole_v = random_tensor(rng, (sum(whole), heads, V), "torch")
    sinks = torch.tensor([0.5, -math.inf, 2.0, -1.0], dtype=torch.float32)
    mask = torch.from_numpy(pack(allowed, q_lens, whole))
    cu_whole = lengths_to_cu(whole)

    def rows(lengths, offsets):
        """Each sequence's `lengths` keys from `offsets` within its whole range."""
        index = [cu_whole[b] + offsets[b] + j for b in range(len(whole)) for j in range(lengths[b])]
        return whole_k[index], whole_v[index]

    cu_q = torch.tensor(lengths_to_cu(q_lens), dtype=torch.int32)
    k, v = rows(q_lens, context)
    out, lse = torch.ops.mlaprefill.prefill(q, k, v, cu_q, cu_q, scale, topk_mask=mask, key_starts=context)
    for lengths, starts in ((first, [0] * 3), (second, first)):
        ck, cv = rows(lengths, starts)
        cu_c = torch.tensor(lengths_to_cu(lengths), dtype=torch.int32)
        chunk_out, chunk_lse = torch.ops.mlaprefill.context_chunk(q, ck, cv, cu_q, cu_c, scale, topk_mask=mask,
                                                                  key_starts=starts)
        last = lengths is second
        out, lse = torch.ops.mlaprefill.merge_attn_states(chunk_out, chunk_lse, out, lse,
                                                          sinks=sinks if last else None)
    expected = masked_attention(q.numpy(), whole_k.numpy(), whole_v.numpy(), q_lens, whole, scale, allowed,
                                sinks=sinks.numpy())
    assert_close(out, lse, *expected, "float32")
    # A window needs the queries' positions, which a lone chunk call lacks.
    with pytest.raises(ValueError, match="context_chunk takes no window"):
        torch.ops.mlaprefill.context_chunk(q, k, v, cu_q, cu_q, scale, window=4)
    # A window on the new tokens' call counts from their positions after the context.
    out, lse = torch.ops.mlaprefill.prefill(q, k, v, cu_q, cu_q, scale, topk_mask=mask, window=5,
                                            key_starts=context, sinks=sinks)
    suffix = [a[:, c:] for a, c in zip(allowed, context)]
    assert_close(out, lse, *masked_attention(q.numpy(), k.numpy(), v.numpy(), q_lens, q_lens, scale, suffix, 5,
                                             sinks.numpy()), "float32")
