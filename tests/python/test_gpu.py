"""The Python package on an NVIDIA GPU, against the fp64 oracle: the selected
GPU backend through DLPack on CUDA tensors, PyTorch's current stream
borrowed, torch.ops.mlaprefill inside a CUDA graph, and the vLLM adapter with
vLLM-shaped metadata. Every test skips with the reason where PyTorch has no
CUDA GPU, and fails instead under MLA_REQUIRE_GPU=1 (ci/gpu-check python)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

import mlaprefill
from conftest import DQK, V, attention, lengths_to_cu
from gpu_support import (GPU_BACKENDS, check, device, expected_backend, host64, missing_gpu, missing_torch_ops,
                         padding_is_nan, poisoned, random_inputs, require, torch, torch_dtype, whole_attention)

DTYPES = ["bfloat16", "float16"]

# DeepSeek-V3/R1's softmax scale with YaRN (contract §1).
YARN_SCALE = DQK**-0.5 * (0.1 * math.log(40) + 1) ** 2

# heads, new tokens per sequence, keys per sequence in one context chunk, scale:
# odd lengths, a sequence without new tokens, sequences without context keys
# (their chunk rows have LSE -inf, and the merge must not read them).
CASES = {
    "small": (4, [5, 0, 17, 33], [3, 9, 0, 40], DQK**-0.5),
    "deepseek_16_heads": (16, [97, 0, 1, 214], [130, 7, 0, 61], YARN_SCALE),
}

# About a second of a GPU's clock: longer than the few small calls that must
# finish while the default stream is still busy with it.
SLEEP_CYCLES = 2_000_000_000


@pytest.fixture(autouse=True)
def default_selection(monkeypatch):
    # The default selection on this machine's own GPU, whatever the caller's environment says.
    for variable in ("MLA_CONFIG", "MLA_PREFILL_BACKEND", "MLA_PLATFORM"):
        monkeypatch.delenv(variable, raising=False)


def gpu_backend(dtype, heads):
    """The default selection for `dtype` and DeepSeek's dims on this GPU, created on it."""
    selector = mlaprefill.Selector()
    selection = selector.select(dtype, mlaprefill.DEEPSEEK_DIMS)
    expected = expected_backend()
    if expected is None:
        assert selection.name in GPU_BACKENDS, selection.why
    else:
        major, minor = torch.cuda.get_device_capability(device())
        assert selection.name == expected, f"compute capability {major}.{minor}: {selection.why}"
    backend = selector.create(selection, num_heads=heads, device=torch.cuda.current_device())
    assert backend.name == selection.name
    return backend


def case_inputs(generator, dtype, heads, lengths, chunk_lengths):
    cu_q, cu_c = lengths_to_cu(lengths), lengths_to_cu(chunk_lengths)
    q, k, v = random_inputs(generator, dtype, cu_q[-1], cu_q[-1], heads)
    _, chunk_k, chunk_v = random_inputs(generator, dtype, 0, cu_c[-1], heads)
    return cu_q, cu_c, (q, k, v, chunk_k, chunk_v)


def oracles(tensors, cu_q, cu_c, scale):
    """fp64 results of the new tokens, the context chunk and their merge, for
    (q, k, v, chunk_k, chunk_v) on the GPU or already copied to the host."""
    q, k, v, chunk_k, chunk_v = (host64(t) for t in tensors)
    return (attention(q, k, v, cu_q, cu_q, scale, causal=True),
            attention(q, chunk_k, chunk_v, cu_q, cu_c, scale, causal=False),
            whole_attention(q, k, v, chunk_k, chunk_v, cu_q, cu_c, scale))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_selected_gpu_backend_on_cuda_tensors(case, dtype):
    require(missing_gpu())
    heads, lengths, chunk_lengths, scale = CASES[case]
    dt = torch_dtype(dtype)
    backend = gpu_backend(dtype, heads)
    generator = torch.Generator(device=device()).manual_seed(41)
    cu_q, cu_c, tensors = case_inputs(generator, dt, heads, lengths, chunk_lengths)
    q, k, v, chunk_k, chunk_v = tensors
    nq = cu_q[-1]
    backend.prepare(cu_q, chunks=[cu_c])
    expected_new, expected_chunk, expected_merged = oracles(tensors, cu_q, cu_c, scale)

    out_buffer, out = poisoned((nq, heads, V), dt)
    lse_buffer, lse = poisoned((heads, nq), torch.float32, pad=3)
    got = backend.run_new_tokens(q, k, v, out=out, lse=lse, scale=scale)
    assert got[0] is out and got[1] is lse
    check(out, lse, expected_new, dtype)
    # Outputs it allocates itself: PyTorch's, on q's device; and the same bits (contract §6).
    fresh_out, fresh_lse = backend.run_new_tokens(q, k, v, scale=scale)
    assert fresh_out.device == q.device and fresh_out.dtype == dt and fresh_lse.dtype == torch.float32
    assert torch.equal(fresh_out, out) and torch.equal(fresh_lse, lse)

    chunk_buffer, chunk_out = poisoned((nq, heads, V), dt)
    chunk_lse_buffer, chunk_lse = poisoned((heads, nq), torch.float32, pad=3)
    backend.run_context_chunk(0, q, chunk_k, chunk_v, out=chunk_out, lse=chunk_lse, scale=scale)
    check(chunk_out, chunk_lse, expected_chunk, dtype)

    # Rows without context keys have weight 0 in the merge: NaN there must not leak (contract §3).
    empty = torch.isneginf(chunk_lse)  # [H, Nq]
    assert empty.any()
    chunk_out.permute(1, 0, 2)[empty] = float("nan")
    merged_buffer, merged = poisoned((nq, heads, V), dt)
    merged_lse_buffer, merged_lse = poisoned((heads, nq), torch.float32, pad=3)
    got = backend.merge_attn_states(chunk_out, chunk_lse, out, lse, output=merged, output_lse=merged_lse)
    assert got[0] is merged and got[1] is merged_lse
    check(merged, merged_lse, expected_merged, dtype)

    for buffer, width in ((out_buffer, V), (chunk_buffer, V), (merged_buffer, V), (lse_buffer, nq),
                          (chunk_lse_buffer, nq), (merged_lse_buffer, nq)):
        assert padding_is_nan(buffer, width), "a result was written outside its view"


def test_pytorch_current_stream_is_borrowed():
    """Inputs drawn by kernels on a side stream, every call made with that
    stream current, results read after synchronising that stream alone, while
    the default stream is still busy: nothing waited for it."""
    require(missing_gpu())
    heads, lengths, chunk_lengths, scale = CASES["small"]
    dt = torch.bfloat16
    backend = gpu_backend("bfloat16", heads)
    side = torch.cuda.Stream(device())
    generator = torch.Generator(device=device())

    def step(seed):
        generator.manual_seed(seed)
        cu_q, cu_c, tensors = case_inputs(generator, dt, heads, lengths, chunk_lengths)
        q, k, v, chunk_k, chunk_v = tensors
        backend.prepare(cu_q, chunks=[cu_c], stream=side.cuda_stream)
        out, lse = backend.run_new_tokens(q, k, v, scale=scale)
        chunk_out, chunk_lse = backend.run_context_chunk(0, q, chunk_k, chunk_v, scale=scale)
        merged = backend.merge_attn_states(chunk_out, chunk_lse, out, lse, return_lse=True)
        return cu_q, cu_c, tensors, ((out, lse), (chunk_out, chunk_lse), merged)

    # A first step loads the kernels and allocates the device metadata on this stream.
    with torch.cuda.stream(side):
        step(1)
    side.synchronize()

    torch.cuda._sleep(SLEEP_CYCLES)  # on the default stream
    with torch.cuda.stream(side):
        cu_q, cu_c, tensors, results = step(2)
        side.synchronize()
        # Asked before the copies below, which may allocate (and an allocation may wait for the device).
        default_busy = not torch.cuda.default_stream(device()).query()
        host_tensors = [host64(t) for t in tensors]
        host_results = [(host64(out), host64(lse)) for out, lse in results]
    torch.cuda.synchronize()
    assert default_busy, "the side stream's work finished only after the default stream's: something waited for it"
    for (out, lse), expected in zip(host_results, oracles(host_tensors, cu_q, cu_c, scale)):
        check(out, lse, expected, "bfloat16")


def capture(function):
    """`function` captured into a CUDA graph, and its outputs (the graph's
    static tensors). It runs twice first on the capture stream, as PyTorch
    asks: the library creates its backend, loads kernels and sizes its
    metadata buffer there, which the capture itself must not do."""
    side = torch.cuda.Stream(device())
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            function()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        outputs = function()
    return graph, outputs


def refill(generator, static_tensors):
    """New random values copied into the graph's static inputs (their views included)."""
    for tensor in static_tensors:
        tensor.copy_(torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype, device=device()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_ops_captured_in_a_cuda_graph(dtype):
    """prefill, context_chunk and merge_attn_states captured into one graph,
    replayed after new values were copied into the static inputs."""
    require(missing_gpu() or missing_torch_ops())
    heads, lengths, chunk_lengths, scale = CASES["small"]
    dt = torch_dtype(dtype)
    generator = torch.Generator(device=device()).manual_seed(7)
    cu_q, cu_c, tensors = case_inputs(generator, dt, heads, lengths, chunk_lengths)
    q, k, v, chunk_k, chunk_v = tensors
    # The operators read the lengths on the host: CPU tensors, so the capture copies nothing back.
    cu_q_t, cu_c_t = torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_c, dtype=torch.int32)
    ops = torch.ops.mlaprefill

    def step():
        out, lse = ops.prefill(q, k, v, cu_q_t, cu_q_t, scale)
        chunk_out, chunk_lse = ops.context_chunk(q, chunk_k, chunk_v, cu_q_t, cu_c_t, scale)
        return (out, lse), (chunk_out, chunk_lse), ops.merge_attn_states(chunk_out, chunk_lse, out, lse)

    graph, results = capture(step)
    for _ in range(2):
        refill(generator, tensors)
        graph.replay()
        torch.cuda.synchronize()
        for (out, lse), expected in zip(results, oracles(tensors, cu_q, cu_c, scale)):
            check(out, lse, expected, dtype)


def test_torch_merge_op_captured_in_a_cuda_graph():
    """The merge alone in a graph, its inputs the eager operators' results for
    new values on every replay."""
    require(missing_gpu() or missing_torch_ops())
    heads, lengths, chunk_lengths, scale = CASES["deepseek_16_heads"]
    dt = torch.bfloat16
    generator = torch.Generator(device=device()).manual_seed(8)
    cu_q, cu_c, tensors = case_inputs(generator, dt, heads, lengths, chunk_lengths)
    q, k, v, chunk_k, chunk_v = tensors
    cu_q_t, cu_c_t = torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_c, dtype=torch.int32)
    ops = torch.ops.mlaprefill

    def attend():
        return (*ops.prefill(q, k, v, cu_q_t, cu_q_t, scale),
                *ops.context_chunk(q, chunk_k, chunk_v, cu_q_t, cu_c_t, scale))

    static = [t.clone() for t in attend()]  # suffix out, suffix lse, prefix out, prefix lse
    graph, (merged, merged_lse) = capture(lambda: ops.merge_attn_states(static[2], static[3], static[0], static[1]))
    for _ in range(2):
        refill(generator, tensors)
        for target, value in zip(static, attend()):
            target.copy_(value)
        graph.replay()
        torch.cuda.synchronize()
        check(merged, merged_lse, oracles(tensors, cu_q, cu_c, scale)[2], "bfloat16")


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_vllm_adapter_on_cuda_tensors(monkeypatch, dtype):
    """MlaPrefillBackend (stand-alone, without vLLM) driven as vLLM's MLA
    layer drives it: prefill metadata with the device's query_start_loc and
    the host's query lengths, and a ContextChunk over a slice of the requests."""
    require(missing_gpu())
    import mlaprefill.vllm as adapter

    # The adapter reads the library's configuration once per process: here, this test's environment.
    monkeypatch.setattr(adapter, "_selector", None)
    heads, scale = 16, YARN_SCALE
    dt, dev = torch_dtype(dtype), device()
    query_lens, requests, seq_lens = [6, 13, 1, 22], slice(1, 4), [40, 0, 9]
    cu_q, cu_seq = lengths_to_cu(query_lens), lengths_to_cu(seq_lens)
    cu_chunk_q = lengths_to_cu(query_lens[requests])
    tokens = slice(int(cu_q[requests.start]), int(cu_q[requests.stop]))

    def on_device(values):
        return torch.tensor(values, dtype=torch.int32, device=dev)

    # vLLM's MLACommonPrefillMetadata and ContextChunk: device tensors where
    # vLLM keeps them on the device, host ones where it keeps them there.
    chunk = SimpleNamespace(
        index=0, request_slice=requests, token_slice=tokens, continuation_token_end=int(cu_q[2]),
        is_continuation=False, num_context_tokens=sum(seq_lens), query_start_loc=on_device(cu_chunk_q),
        max_query_len=max(query_lens[requests]), cu_seq_lens=on_device(cu_seq), starts=on_device([0, 0, 0]),
        max_seq_len=max(seq_lens), seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        token_to_seq=on_device(np.repeat(np.arange(3), seq_lens)), all_rows_active=False)
    metadata = SimpleNamespace(
        block_table=on_device([[0], [1], [2], [3]]), query_start_loc=on_device(cu_q), max_query_len=max(query_lens),
        chunked_context=SimpleNamespace(context_lens=on_device([0] + seq_lens), workspace=None, chunks=[chunk],
                                        context_lens_list=[0] + seq_lens, empty_token_slices=[]),
        q_data_type=dt, output_dtype=dt, query_lens_cpu=torch.tensor(query_lens, dtype=torch.int32),
        use_dense_mha=False)
    vllm_config = SimpleNamespace(model_config=SimpleNamespace(dtype=dt))
    backend = adapter.MlaPrefillBackend(heads, scale, 512, *mlaprefill.DEEPSEEK_DIMS, vllm_config=vllm_config)
    backend.prepare_metadata(metadata)

    generator = torch.Generator(device=dev).manual_seed(9)
    q, k, v = random_inputs(generator, dt, cu_q[-1], cu_q[-1], heads)
    _, chunk_k, chunk_v = random_inputs(generator, dt, 0, cu_seq[-1], heads)
    out_buffer, out = poisoned((cu_q[-1], heads, V), dt)
    got, lse = backend.run_prefill_new_tokens(q, k, v, return_softmax_lse=True, out=out)
    assert got is out and lse.device == q.device
    hq, hk, hv, hck, hcv = (host64(t) for t in (q, k, v, chunk_k, chunk_v))
    check(out, lse, attention(hq, hk, hv, cu_q, cu_q, scale, causal=True), dtype)
    only_out = backend.run_prefill_new_tokens(q, k, v, return_softmax_lse=False)
    assert isinstance(only_out, torch.Tensor) and torch.equal(only_out, out)

    # vLLM hands a chunk the queries of its own requests.
    q_chunk = q[tokens]
    chunk_buffer, chunk_out = poisoned((q_chunk.shape[0], heads, V), dt)
    got, chunk_lse = backend.run_prefill_context_chunk(chunk=chunk, q=q_chunk, k=chunk_k, v=chunk_v, out=chunk_out)
    assert got is chunk_out
    check(chunk_out, chunk_lse, attention(hq[tokens], hck, hcv, cu_chunk_q, cu_seq, scale, causal=False), dtype)
    assert padding_is_nan(out_buffer, V) and padding_is_nan(chunk_buffer, V)

    # Merged as vLLM merges a chunk into its requests' new tokens (here with the package's merge).
    merged, merged_lse = mlaprefill.merge_attn_states(chunk_out, chunk_lse, out[tokens], lse[:, tokens],
                                                      return_lse=True)
    expected = whole_attention(hq[tokens], hk[tokens], hv[tokens], hck, hcv, cu_chunk_q, cu_seq, scale)
    check(merged, merged_lse, expected, dtype)
