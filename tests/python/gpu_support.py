"""What the GPU tests of the Python package share: the skip-or-fail rule for
machines without a CUDA GPU, CUDA tensors with NaN-poisoned padding, and the
fp64 oracle of conftest.py applied to them on the host."""

import os

import numpy as np
import pytest

import mlaprefill
from conftest import DQK, V, assert_close, attention

try:  # the tests skip (or fail) with the reason when PyTorch is absent
    import torch
except ImportError:
    torch = None

GPU_BACKENDS = ("CUDA_FLASH", "HOPPER_FLASH")

# Elements of padding after a 2-byte row: 16 bytes keeps the token and head
# strides multiples of 16 bytes, which the flash kernels need (contract §5).
ROW_PAD = 8


def missing_gpu():
    """Why the package cannot run on a CUDA GPU here, or None."""
    if torch is None:
        return "PyTorch is not installed"
    if torch.version.cuda is None:
        return f"PyTorch {torch.__version__} is built without CUDA"
    if not torch.cuda.is_available():
        return f"no CUDA GPU: torch.cuda.is_available() is False (PyTorch {torch.__version__})"
    backends = mlaprefill.build_info()["backends"]
    if not any(backends.get(name, {}).get("built") for name in GPU_BACKENDS):
        return f"this build of mlaprefill has no CUDA backend ({backends['CUDA_FLASH']['detail']})"
    return None


def missing_torch_ops():
    """Why torch.ops.mlaprefill cannot take CUDA tensors here, or None."""
    note = mlaprefill.build_info()["notes"].get("torch_ops", "not built")
    if not mlaprefill.HAS_TORCH_OPS:
        return f"torch.ops.mlaprefill is not loaded (torch_ops: {note})"
    if "with CUDA" not in note:
        return f"torch.ops.mlaprefill has no CUDA kernels (torch_ops: {note})"
    return None


def require(reason):
    """Skips the test for `reason`; under MLA_REQUIRE_GPU=1, the project's
    switch for machines that must have a GPU, fails it instead."""
    if reason is None:
        return
    if os.environ.get("MLA_REQUIRE_GPU") == "1":
        pytest.fail(f"{reason} (MLA_REQUIRE_GPU=1)", pytrace=False)
    pytest.skip(reason)


def device():
    return torch.device("cuda", torch.cuda.current_device())


def torch_dtype(name):
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[name]


def expected_backend():
    """The backend the default selection must give on this GPU: HOPPER_FLASH
    on 9.0, CUDA_FLASH on 8.x; None on others, where any GPU backend will do."""
    major, minor = torch.cuda.get_device_capability(device())
    if (major, minor) == (9, 0):
        return "HOPPER_FLASH"
    return "CUDA_FLASH" if major == 8 else None


def poisoned(shape, dtype, pad=ROW_PAD):
    """A NaN-filled CUDA buffer `pad` elements wider than `shape` in its last
    dimension, and the view of `shape` into it: results must fill the view
    and leave the padding as it was."""
    buffer = torch.full((*shape[:-1], shape[-1] + pad), float("nan"), dtype=dtype, device=device())
    return buffer, buffer[..., : shape[-1]]


def padding_is_nan(buffer, width):
    return bool(torch.isnan(buffer[..., width:]).all())


def random_inputs(generator, dtype, num_q, num_k, heads):
    """Random normal q [num_q, H, DQK] with a padded head stride, and k, v
    [num_k, H, DQK] and [num_k, H, V] as the two parts of one fused buffer,
    as vLLM splits its up-projection's output; drawn on the current stream."""
    def draw(shape):
        return torch.randn(shape, generator=generator, dtype=dtype, device=device())

    q = draw((num_q, heads, DQK + ROW_PAD))[..., :DQK]
    kv = draw((num_k, heads, DQK + V))
    return q, kv[..., :DQK], kv[..., DQK:]


def host64(tensor):
    """A CUDA tensor as a float64 NumPy array (copied on the current stream);
    a NumPy array as it is."""
    if isinstance(tensor, np.ndarray):
        return tensor
    return tensor.detach().double().cpu().numpy()


def check(out, lse, expected, dtype):
    """Contract §6: the norm bounds of `dtype` against the fp64 result, and
    every row the oracle leaves without keys exactly 0 with LSE exactly -inf.
    `out` and `lse` are CUDA tensors or their host copies."""
    expected_out, expected_lse = expected
    got_out, got_lse = host64(out), host64(lse)
    assert_close(got_out, got_lse, expected_out, expected_lse, dtype)
    empty = np.isneginf(expected_lse)  # [H, Nq]
    assert np.isneginf(got_lse[empty]).all(), "a row without keys has an LSE other than -inf"
    assert (got_out.transpose(1, 0, 2)[empty] == 0).all(), "a row without keys has an output other than 0"


def whole_attention(q, k, v, chunk_k, chunk_v, cu_q, cu_chunk, scale):
    """fp64 attention of each sequence's queries over its context keys
    followed by its new keys, causal and bottom-right aligned: what merging a
    context chunk into the new tokens must give (contract §3). Arrays on the host."""
    keys, values, cu_whole = [], [], [0]
    for b in range(len(cu_q) - 1):
        keys += [chunk_k[cu_chunk[b] : cu_chunk[b + 1]], k[cu_q[b] : cu_q[b + 1]]]
        values += [chunk_v[cu_chunk[b] : cu_chunk[b + 1]], v[cu_q[b] : cu_q[b + 1]]]
        cu_whole.append(cu_whole[-1] + (cu_chunk[b + 1] - cu_chunk[b]) + (cu_q[b + 1] - cu_q[b]))
    return attention(q, np.concatenate(keys), np.concatenate(values), cu_q, cu_whole, scale, causal=True)
