"""The whole MLA step from Python against the NumPy oracle: gather from a
shuffled paged cache, up-project through kv_b_proj, attend."""

import numpy as np
import pytest
import torch

import mlaprefill
from conftest import HOST_BACKENDS, assert_close, attention, lengths_to_cu, make_backend

P, R, V, L, H = 128, 64, 128, 32, 2


def oracle(q, kv_c, k_pe, cache, table, context, cu_q, w, scale):
    def project(latent, rope):
        kv = (latent @ w.T).reshape(len(latent), H, P + V)
        k = np.concatenate([kv[..., :P], np.repeat(rope[:, None, :], H, axis=1)], axis=2)
        return k, kv[..., P:]

    ks, vs, cu_k = [], [], [0]
    block = cache.shape[1]
    for b in range(len(context)):
        rows = [cache[table[b][i // block], i % block] for i in range(context[b])]
        rows = np.array(rows, dtype=np.float64).reshape(-1, L + R)
        k_ctx, v_ctx = project(rows[:, :L], rows[:, L:])
        k_new, v_new = project(kv_c[cu_q[b] : cu_q[b + 1]], k_pe[cu_q[b] : cu_q[b + 1]])
        ks += [k_ctx, k_new]
        vs += [v_ctx, v_new]
        cu_k.append(cu_k[-1] + context[b] + cu_q[b + 1] - cu_q[b])
    return attention(q, np.concatenate(ks), np.concatenate(vs), cu_q, cu_k, scale, causal=True)


@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("packed", [False, True])
def test_the_whole_step_matches_the_oracle(rng, name, library, packed):
    q_lens, context, block = [3, 0, 5], [17, 4, 0], 8
    cu_q = lengths_to_cu(q_lens)
    nq = cu_q[-1]
    num_blocks = 8
    order = rng.permutation(num_blocks)
    table = np.full((3, 4), num_blocks - 1, dtype=np.int32)
    table[0, :3], table[1, :1] = order[:3], order[3:4]
    arrays = {
        "q": rng.standard_normal((nq, H, P + R)).astype(np.float32),
        "kv_c": rng.standard_normal((nq, L)).astype(np.float32),
        "k_pe": rng.standard_normal((nq, R)).astype(np.float32),
        "cache": rng.standard_normal((num_blocks, block, L + R)).astype(np.float32),
        "w": (rng.standard_normal((H * (P + V), L)) * 0.2).astype(np.float32),
    }
    inputs = {k: torch.from_numpy(v) for k, v in arrays.items()} if library == "torch" else arrays
    backend = make_backend(name, heads=H, kv_lora_rank=L)
    # Packed: 10-token chunks, so both sequences run over two chunks and the second holds both.
    plan = mlaprefill.plan_mla_prefill(backend, cu_q, context, table, block, 10 if packed else block, packed=packed)
    assert plan.kv_lora_rank == L and plan.block_size == block and plan.num_q_tokens == nq
    if packed:
        assert [c["cu_seqlens_k"] for c in plan.chunks] == [[0, 10, 10, 10], [0, 7, 10, 10], [0, 0, 1, 1]]
    args = (inputs["q"], inputs["kv_c"], inputs["k_pe"], inputs["cache"], inputs["w"])
    out, lse = mlaprefill.run_mla_prefill(backend, plan, *args)
    expected = oracle(*(arrays[k].astype(np.float64) for k in ("q", "kv_c", "k_pe", "cache")), table, context, cu_q,
                      arrays["w"].astype(np.float64), backend.scale)
    assert_close(out, lse, *expected, "float32")

    # The caller's workspace of the plan's size gives the same bits; one byte short is a ValueError.
    size = plan.workspace_bytes
    workspace = torch.empty(size + 64, dtype=torch.uint8) if library == "torch" else np.empty(size + 64, np.uint8)
    start = (-(workspace.data_ptr() if library == "torch" else workspace.ctypes.data)) % 64
    again = mlaprefill.run_mla_prefill(backend, plan, *args, workspace=workspace[start : start + size])
    assert np.array_equal(np.asarray(again[0]), np.asarray(out)) and np.array_equal(np.asarray(again[1]),
                                                                                    np.asarray(lse))
    with pytest.raises(ValueError, match="bytes of workspace"):
        mlaprefill.run_mla_prefill(backend, plan, *args, workspace=workspace[start : start + size - 1])


def test_a_block_outside_the_cache_is_a_value_error():
    backend = make_backend("REFERENCE", heads=H, kv_lora_rank=L)
    q = np.ones((1, H, P + R), np.float32)
    plan = mlaprefill.plan_mla_prefill(backend, [0, 1], [3], [[5]], 4, workspace_tokens=4)
    with pytest.raises(ValueError, match="is not a block of the cache"):
        mlaprefill.run_mla_prefill(backend, plan, q, np.ones((1, L), np.float32), np.ones((1, R), np.float32),
                                   np.ones((2, 4, L + R), np.float32), np.ones((H * (P + V), L), np.float32))


def test_a_tensor_unlike_the_plan_names_both_values():
    backend = make_backend("REFERENCE", heads=H, kv_lora_rank=L)
    plan = mlaprefill.plan_mla_prefill(backend, [0, 1], [3], [[0]], 4, workspace_tokens=4)
    q = np.ones((1, H, P + R), np.float32)
    with pytest.raises(ValueError, match="kv_c dimension 1 is 16, but the plan's kv_lora_rank is 32"):
        mlaprefill.run_mla_prefill(backend, plan, q, np.ones((1, 16), np.float32), np.ones((1, R), np.float32),
                                   np.ones((2, 4, L + R), np.float32), np.ones((H * (P + V), L), np.float32))
    with pytest.raises(ValueError, match="cache dimension 1 is 8, but the plan's block_size is 4"):
        mlaprefill.run_mla_prefill(backend, plan, q, np.ones((1, L), np.float32), np.ones((1, R), np.float32),
                                   np.ones((2, 8, L + R), np.float32), np.ones((H * (P + V), L), np.float32))


def test_outputs_that_overlap_inputs_are_value_errors(rng):
    backend = make_backend("REFERENCE", heads=H, kv_lora_rank=L)
    q = rng.standard_normal((2, H, P + R)).astype(np.float32)
    kv_c = rng.standard_normal((2, L)).astype(np.float32)
    k_pe = rng.standard_normal((2, R)).astype(np.float32)
    cache = rng.standard_normal((1, 4, L + R)).astype(np.float32)
    w = rng.standard_normal((H * (P + V), L)).astype(np.float32)
    plan = mlaprefill.plan_mla_prefill(backend, [0, 2], [3], np.zeros((1, 1), np.int32), 4, workspace_tokens=4)
    args = (backend, plan, q, kv_c, k_pe, cache, w)
    with pytest.raises(ValueError, match="run_mla_prefill: out overlaps q"):
        mlaprefill.run_mla_prefill(*args, out=q[:, :, :V])
    size = min(plan.workspace_bytes, cache.nbytes)
    with pytest.raises(ValueError, match="run_mla_prefill: workspace overlaps cache"):
        mlaprefill.run_mla_prefill(*args, workspace=cache.view(np.uint8).reshape(-1)[:size])


def run_command(*args):
    import os
    import subprocess

    command = os.environ.get("MLA_PREFILL_COMMAND")
    if not command:
        pytest.skip("MLA_PREFILL_COMMAND is not set (run through ctest)")
    return subprocess.run([command, "step", *args], capture_output=True, text=True, check=False)


def write_step(tmp_path, rng, fp8=False):
    """A step's .npy files; returns the flags and what the oracle needs."""
    q_lens, context, block = [4, 2], [11, 0], 4
    cu_q = lengths_to_cu(q_lens)
    nq = cu_q[-1]
    table = np.array([[2, 0, 3], [1, 1, 1]], dtype=np.int64)
    arrays = {
        "q": rng.standard_normal((nq, H, P + R)).astype(np.float32),
        "kv-c": rng.standard_normal((nq, L)).astype(np.float32),
        "k-pe": rng.standard_normal((nq, R)).astype(np.float32),
        "kv-b-proj": (rng.standard_normal((H * (P + V), L)) * 0.2).astype(np.float32),
        "block-table": table,
        "context-lens": np.array(context, dtype=np.int32),
        "cu-seqlens-q": np.array(cu_q, dtype=np.int32),
    }
    if fp8:
        # e4m3 bytes of small normal numbers: sign 0, exponent 6..8, any mantissa.
        arrays["cache"] = (rng.integers(6, 9, (4, block, L + R)) << 3 | rng.integers(0, 8, (4, block, L + R)))
        arrays["cache"] = arrays["cache"].astype(np.uint8)
    else:
        arrays["cache"] = rng.standard_normal((4, block, L + R)).astype(np.float32)
    flags = []
    for name, array in arrays.items():
        path = tmp_path / f"{name}.npy"
        np.save(path, array)
        flags += [f"--{name}", str(path)]
    return flags, arrays, cu_q, context


def decode_fp8(bytes_):
    exponent, mantissa = (bytes_ >> 3) & 0xF, (bytes_ & 7).astype(np.float64)
    return (1 + mantissa / 8) * 2.0 ** (exponent.astype(np.float64) - 7)


@pytest.mark.parametrize("fp8", [False, True])
def test_the_step_command_matches_the_oracle(tmp_path, rng, fp8):
    flags, arrays, cu_q, context = write_step(tmp_path, rng, fp8)
    scale = (P + R) ** -0.5
    extra = ["--cache-scale", "0.5"] if fp8 else []
    result = run_command(*flags, *extra, "--scale", str(scale), "--dtype", "fp32", "--workspace-tokens", "4",
                         "--out", str(tmp_path / "out.npy"), "--lse", str(tmp_path / "lse.npy"))
    assert result.returncode == 0, result.stderr
    assert "step on" in result.stdout
    cache = decode_fp8(arrays["cache"]) * 0.5 if fp8 else arrays["cache"].astype(np.float64)
    expected = oracle(*(arrays[k].astype(np.float64) for k in ("q", "kv-c", "k-pe")), cache, arrays["block-table"],
                      context, cu_q, arrays["kv-b-proj"].astype(np.float64), np.float32(scale))
    assert_close(np.load(tmp_path / "out.npy"), np.load(tmp_path / "lse.npy"), *expected, "float32")


def test_the_step_command_names_what_is_wrong(tmp_path, rng):
    flags, arrays, _, _ = write_step(tmp_path, rng)
    common = ["--scale", "0.1", "--dtype", "fp32", "--out", str(tmp_path / "out.npy")]
    np.save(tmp_path / "block-table.npy", np.array([[2, 0, 9], [1, 1, 1]]))
    result = run_command(*flags, *common)
    assert result.returncode == 2 and "block_table[0][2] = 9 is not a block of the cache" in result.stderr
    np.save(tmp_path / "block-table.npy", arrays["block-table"])
    np.save(tmp_path / "cache.npy", arrays["cache"].astype(np.float32).view(np.uint8))
    result = run_command(*flags, *common)
    assert result.returncode == 2 and "--cache-scale" in result.stderr
    np.save(tmp_path / "kv-b-proj.npy", arrays["kv-b-proj"][:5])
    result = run_command(*flags, *common)
    assert result.returncode == 2 and "--kv-b-proj has 5 rows" in result.stderr
