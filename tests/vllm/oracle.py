"""An fp64 torch oracle of MLA prefill attention, independent of the library
and of vLLM."""

import math

import torch


def reference(q, k, v, cu_q, cu_k, scale, causal):
    """out [Nq, H, V] and lse [H, Nq] in fp64; causal aligned at the bottom
    right; rows without keys give 0 and -inf."""
    q, k, v = q.double(), k.double(), v.double()
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=torch.float64)
    lse = torch.full((q.shape[1], q.shape[0]), -math.inf, dtype=torch.float64)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0 or k1 == k0:
            continue
        s = torch.einsum("qhd,khd->hqk", q[q0:q1], k[k0:k1]) * scale
        if causal:
            offset = (k1 - k0) - (q1 - q0)
            mask = torch.ones(q1 - q0, k1 - k0, dtype=torch.bool).triu(1 + offset)
            s = s.masked_fill(mask, -math.inf)
        lse[:, q0:q1] = torch.logsumexp(s, dim=-1)
        out[q0:q1] = torch.einsum("hqk,khv->qhv", torch.softmax(s, dim=-1), v[k0:k1])
    return out, lse
