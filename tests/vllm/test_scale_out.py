"""Scale-out on an existing engine: torch.distributed (gloo, two processes on
this machine) splits a long context across ranks; each rank computes its
partial attention with the library, the ranks gather outputs and LSEs, and
the library's merge joins them. The result matches one process attending to
the whole context."""

import math

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import mlaprefill
from oracle import reference

HEADS, DIMS = 4, (32, 64, 32)
QK, V = DIMS[0] + DIMS[1], DIMS[2]
SCALE = 1.0 / math.sqrt(QK)
WORLD = 2
# Two sequences: new tokens and a long context each, split unevenly.
QUERY_LENS, CONTEXT_LENS = [7, 4], [301, 77]
SPLIT = [[190, 111], [0, 77]]  # context tokens of each sequence per rank


def cumulate(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def inputs():
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(sum(QUERY_LENS), HEADS, QK, generator=gen)
    k = torch.randn(sum(CONTEXT_LENS), HEADS, QK, generator=gen)
    v = torch.randn(sum(CONTEXT_LENS), HEADS, V, generator=gen)
    return q, k, v


def rank_slice(tensor, rank):
    """This rank's context rows of each sequence, in batch order."""
    parts, first = [], 0
    for b, total in enumerate(CONTEXT_LENS):
        before = sum(SPLIT[b][:rank])
        parts.append(tensor[first + before:first + before + SPLIT[b][rank]])
        first += total
    return torch.cat(parts)


def backend():
    selector = mlaprefill.Selector()
    return selector.create(selector.select("float32", DIMS), HEADS, scale=SCALE, kv_lora_rank=512)


def run_rank(rank, folder):
    dist.init_process_group("gloo", init_method=f"file://{folder}/init", rank=rank, world_size=WORLD)
    try:
        q, k, v = inputs()
        lib = backend()
        cu_q = cumulate(QUERY_LENS)
        lib.prepare(cu_q, chunks=[cumulate(SPLIT[b][rank] for b in range(len(CONTEXT_LENS)))])
        out, lse = lib.run_context_chunk(0, q, rank_slice(k, rank), rank_slice(v, rank))
        outs = [torch.empty_like(out) for _ in range(WORLD)]
        lses = [torch.empty_like(lse) for _ in range(WORLD)]
        dist.all_gather(outs, out)
        dist.all_gather(lses, lse)
        merged, merged_lse = lib.merge_attn_states(outs[0], lses[0], outs[1], lses[1], return_lse=True)
        torch.save((merged, merged_lse), f"{folder}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_a_context_split_across_two_ranks_merges_to_the_whole(tmp_path):
    mp.spawn(run_rank, args=(str(tmp_path),), nprocs=WORLD, join=True)
    q, k, v = inputs()
    lib = backend()
    cu_q, cu_k = cumulate(QUERY_LENS), cumulate(CONTEXT_LENS)
    lib.prepare(cu_q, chunks=[cu_k])
    whole, whole_lse = lib.run_context_chunk(0, q, k, v)
    expected, expected_lse = reference(q, k, v, cu_q, cu_k, SCALE, causal=False)
    assert (whole.double() - expected).abs().max() < 1e-4
    for rank in range(WORLD):
        merged, merged_lse = torch.load(tmp_path / f"rank{rank}.pt")
        assert (merged - whole).abs().max() < 1e-5
        assert (merged_lse - whole_lse).abs().max() < 1e-5
    # One rank's part alone is far from the whole: the merge did the work.
    lib.prepare(cu_q, chunks=[cumulate(SPLIT[b][0] for b in range(len(CONTEXT_LENS)))])
    part, _ = lib.run_context_chunk(0, q, rank_slice(k, 0), rank_slice(v, 0))
    assert (part - whole).abs().max() > 0.1
