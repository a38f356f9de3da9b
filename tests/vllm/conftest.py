"""Shared pieces of the tests against the installed vLLM (ci/vllm-env's
environment, with this package installed into it by pip): one MLA prefill
step driven through
vLLM's own MLACommonBaseImpl.forward_mha, with metadata from vLLM's own
chunked-context planner."""

import math
import types

import pytest
import torch

pytest.importorskip("vllm", reason="these tests run in the environment ci/vllm-env makes")

from vllm.model_executor.layers.attention import mla_attention as vllm_mla  # noqa: E402
from vllm.v1.attention.backends.mla.prefill.cpu_sdpa import CPUSDPAMLAPrefillBackend  # noqa: E402

from oracle import reference  # noqa: E402

import mlaprefill.vllm as adapter  # noqa: E402
from vllm.v1.attention.backends.mla.prefill import selector as vllm_selector  # noqa: E402

# The tiny DeepSeek model's attention (tests/vllm/tiny_deepseek.py): what
# vLLM's CPU MLA kernels take (latent 512, rope 64), small elsewhere.
HEADS, LATENT, NOPE, ROPE, V = 4, 512, 32, 64, 32
SCALE = 1.0 / math.sqrt(NOPE + ROPE)


class Step:
    """One MLA prefill step on random data: requests with `query_lens` new
    tokens after `context_lens` cached ones (a paged cache of `block_size`
    token blocks), planned by vLLM's build_mla_chunked_context_metadata with
    a workspace of `workspace` rows."""

    def __init__(self, query_lens, context_lens, block_size=16, workspace=64, dtype=torch.bfloat16, seed=0):
        gen = torch.Generator().manual_seed(seed)

        def rand(*shape, scale=1.0):
            return (torch.randn(*shape, generator=gen) * scale).to(dtype)

        self.dtype, self.block_size = dtype, block_size
        self.query_lens, self.context_lens = list(query_lens), list(context_lens)
        n = sum(query_lens)
        self.q = rand(n, HEADS, NOPE + ROPE)
        self.kv_c = rand(n, LATENT)
        self.k_pe = rand(n, 1, ROPE)
        self.kv_b_proj = Projection(rand(HEADS * (NOPE + V), LATENT, scale=LATENT ** -0.5))
        # The cache: each request's context in its own blocks, then random
        # blocks nobody owns (a gather that reads past its rows shows).
        blocks = [math.ceil(c / block_size) for c in context_lens]
        width = max(max(blocks), 1)
        self.cache = rand(sum(blocks) + 3, block_size, LATENT + ROPE)
        table, first = [], 0
        for count in blocks:
            table.append(list(range(first, first + count)) + [0] * (width - count))
            first += count
        self.block_table = torch.tensor(table, dtype=torch.int32)
        self.workspace = torch.empty(workspace, LATENT + ROPE, dtype=dtype)
        self.query_start_loc = torch.tensor([0] + list(_cumsum(query_lens)), dtype=torch.int32)

    def chunked_context(self):
        return vllm_mla.build_mla_chunked_context_metadata(
            context_lens_cpu=torch.tensor(self.context_lens, dtype=torch.int32),
            prefill_query_start_loc_cpu=self.query_start_loc,
            chunked_prefill_workspace=self.workspace,
            chunked_prefill_workspace_size=self.workspace.shape[0],
            block_size=self.block_size,
            align_chunk_to_block=True,
            device=torch.device("cpu"),
            dcp_world_size=1,
            dcp_local_block_size=1,
            dcp_virtual_block_size=1,
        )

    def metadata(self, backend):
        """vLLM's prefill metadata, as MLACommonMetadataBuilder makes it, and
        the backend prepared with it (the builder's call)."""
        metadata = vllm_mla.MLACommonPrefillMetadata(
            block_table=self.block_table,
            query_start_loc=self.query_start_loc,
            max_query_len=max(self.query_lens),
            chunked_context=self.chunked_context(),
            output_dtype=self.dtype,
            q_data_type=self.dtype,
            prefill_backend=backend,
            query_lens_cpu=torch.tensor(self.query_lens, dtype=torch.int32),
        )
        backend.prepare_metadata(metadata)
        return metadata

    def forward(self, backend):
        """vLLM's MLACommonBaseImpl.forward_mha with `backend` as the prefill
        backend: the output [N, H*V]."""
        impl = types.SimpleNamespace(num_heads=HEADS, qk_nope_head_dim=NOPE, v_head_dim=V, kv_lora_rank=LATENT,
                                     kv_b_proj=self.kv_b_proj, dcp_world_size=1, kv_cache_dtype="auto",
                                     _use_flashinfer_concat_mla_k=False)
        for name in ("_concat_k_nope_k_pe", "_compute_prefill_context"):
            setattr(impl, name, types.MethodType(getattr(vllm_mla.MLACommonBaseImpl, name), impl))
        attn_metadata = types.SimpleNamespace(prefill=self.metadata(backend))
        output = torch.full((self.q.shape[0], HEADS * V), float("nan"), dtype=self.dtype)
        vllm_mla.MLACommonBaseImpl.forward_mha(impl, self.q, self.kv_c, self.k_pe, self.cache, attn_metadata,
                                               torch.ones(()), output)
        return output

    def expected(self):
        """fp64 attention of each request's new tokens to its whole context
        and (causally) to themselves: [N, H*V]."""
        ks, vs, cu_k = [], [], [0]
        q_first = 0
        for b, (nq, nc) in enumerate(zip(self.query_lens, self.context_lens)):
            rows = self.cache[self.block_table[b]].reshape(-1, LATENT + ROPE)[:nc]
            latents = torch.cat([rows[:, :LATENT], self.kv_c[q_first:q_first + nq]])
            k_pe = torch.cat([rows[:, LATENT:], self.k_pe[q_first:q_first + nq, 0]])
            kv = self.kv_b_proj(latents)[0].view(-1, HEADS, NOPE + V)
            ks.append(torch.cat([kv[..., :NOPE], k_pe.unsqueeze(1).expand(-1, HEADS, -1)], dim=-1))
            vs.append(kv[..., NOPE:])
            cu_k.append(cu_k[-1] + nc + nq)
            q_first += nq
        out, _ = reference(self.q, torch.cat(ks), torch.cat(vs), self.query_start_loc.tolist(), cu_k, SCALE,
                           causal=True)
        return out.reshape(out.shape[0], -1)


class Projection:
    """kv_b_proj as vLLM's MLA layer calls it: a linear layer with a
    `weight`, returning (output, bias)."""

    def __init__(self, weight):
        self.weight = weight

    def __call__(self, x):
        return (x @ self.weight.T, None)


def _cumsum(values):
    total = 0
    for value in values:
        total += value
        yield total


def vllm_cpu_backend():
    return CPUSDPAMLAPrefillBackend(num_heads=HEADS, scale=SCALE, kv_lora_rank=LATENT, qk_nope_head_dim=NOPE,
                                    qk_rope_head_dim=ROPE, v_head_dim=V, vllm_config=None)


def new_backend(cls, vllm_config=None):
    return cls(num_heads=HEADS, scale=SCALE, kv_lora_rank=LATENT, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE,
               v_head_dim=V, vllm_config=vllm_config)


@pytest.fixture
def fresh_selection(monkeypatch):
    """The environment read afresh by the test using it: the adapter's shared
    Selector and vLLM's cached automatic choice are per process."""
    monkeypatch.setattr(adapter, "_selector", None)
    for name in ("MLA_CONFIG", "MLA_PREFILL_BACKEND", "MLA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    vllm_selector._auto_select_mla_prefill_backend.cache_clear()
    yield
    vllm_selector._auto_select_mla_prefill_backend.cache_clear()
