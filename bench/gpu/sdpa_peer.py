#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention on the shapes of mla-bench-gpu.

Prints a markdown table with the columns of mla-bench-gpu's attention table
(impl | shape | heads | batch | seqlens | tokens | median ms | TFLOP/s) so
ci/gpu-check can put the rows side by side:

  * SDPA flash: needs equal head dims, so V is zero-padded to 192 and the
    output sliced back to 128 (what vLLM did before it had other kernels);
  * SDPA efficient and cuDNN: run with V at 128 where the backend accepts it.

A backend that refuses the shape prints "n/a". Varlen batches run one
sequence after another inside the timed region (SDPA has no varlen entry).
FLOPs as docs/contract.md section 7 counts them, H * (192 + 128) * sum s_i^2, for
every row (the padded flash run does more work than it is credited for).

  python3 bench/gpu/sdpa_peer.py [--quick] [--runs N]
"""

import argparse
import statistics
import sys

DQK = 192
DV = 128
SCALE = 0.1352337788608801  # DeepSeek-V3: 192^-0.5 * mscale^2
ROTATIONS = 3


def varlen_lengths(total):
    """Seven sequences summing to `total`, the same rule as mla-bench-gpu."""
    unit = total // 16
    lengths = [4 * unit + 1, 2 * unit - 1, unit + 3, 3 * unit - 3, 2 * unit + 5, unit - 5, 3 * unit]
    lengths[-1] += total - sum(lengths)
    return lengths


def flops(heads, lengths):
    return heads * (DQK + DV) * sum(s * s for s in lengths)


def time_backend(torch, backend, heads, lengths, runs, pad_v):
    from torch.nn.attention import sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    dv = DQK if pad_v else DV
    sets = []
    for _ in range(ROTATIONS):
        seqs = []
        for s in lengths:
            q = torch.empty(1, heads, s, DQK, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
            k = torch.empty_like(q).uniform_(-1, 1)
            v = torch.zeros(1, heads, s, dv, device="cuda", dtype=torch.bfloat16)
            v[..., :DV].uniform_(-1, 1)
            seqs.append((q, k, v))
        sets.append(seqs)

    def run(seqs):
        for q, k, v in seqs:
            out = sdpa(q, k, v, is_causal=True, scale=SCALE)
            if pad_v:
                out = out[..., :DV]

    with sdpa_kernel([backend]):
        try:
            for i in range(3):
                run(sets[i % ROTATIONS])
            torch.cuda.synchronize()
        except RuntimeError:
            return None
        times = []
        for i in range(runs):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            run(sets[i % ROTATIONS])
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    try:
        import torch
        from torch.nn.attention import SDPBackend
    except ImportError as error:
        print(f"sdpa_peer.py: PyTorch with torch.nn.attention is needed ({error})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sdpa_peer.py: no CUDA device", file=sys.stderr)
        return 2

    seqlens = [1024, 4096] if args.quick else [1024, 2048, 4096, 8192, 16384]
    heads_list = [16] if args.quick else [128, 16]
    backends = [("SDPA flash (V padded to 192)", SDPBackend.FLASH_ATTENTION, True),
                ("SDPA efficient", SDPBackend.EFFICIENT_ATTENTION, False)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        backends.append(("SDPA cuDNN", SDPBackend.CUDNN_ATTENTION, False))

    print(f"Device: {torch.cuda.get_device_name()} (torch {torch.__version__})\n")
    print("| impl | shape | heads | batch | seqlens | tokens | median ms | TFLOP/s |")
    print("|---|---|---:|---|---|---:|---:|---:|")
    for heads in heads_list:
        for s in seqlens:
            for batch, lengths in (("one sequence", [s]), ("varlen", varlen_lengths(s))):
                label = str(lengths[0]) if len(lengths) == 1 else f"{len(lengths)} seqs"
                for name, backend, pad_v in backends:
                    ms = time_backend(torch, backend, heads, lengths, args.runs, pad_v)
                    if ms is None:
                        print(f"| {name} | bf16 192/128 causal | {heads} | {batch} | {label} | {s} | n/a | n/a |")
                    else:
                        tflops = flops(heads, lengths) / (ms * 1e-3) / 1e12
                        print(f"| {name} | bf16 192/128 causal | {heads} | {batch} | {label} | {s} | {ms:.3f} | {tflops:.1f} |")
                    sys.stdout.flush()
                    torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
