"""KOKKOS against PyTorch's scaled_dot_product_attention on the CPU, in one run.

PyTorch's SDPA is what vLLM's CPU MLA prefill backends are built on, so it is
the peer a CPU user already has. Both read the same tensors (q, k, v laid out
[tokens, heads, dim] as the library takes them; SDPA gets [1, heads, tokens,
dim] views of that storage, one call per sequence of a varlen batch), at
DeepSeek dims (qk 192, v 128; 16 and 128 heads), causal, fp32 and bf16, with
1 thread and with every core. Each output is compared with REFERENCE (fp64
accumulation) on its first head, heads being independent.

SDPA is timed in two forms, interleaved: V as it is (128 wide), and V
zero-padded to the qk width (192) with the output sliced back to 128. PyTorch's
CPU flash kernel takes only equal head dims, so the first form runs SDPA's
math path and the second its flash kernel; the padding and the slice are
inside the timed call, as a caller pays them. The faster form of each case is
the peer. Both count the same FLOPs (docs/contract.md section 7, V = 128): the
padded columns are work the peer chooses to do, not work of the problem.

Usage (from the source root, with a cpu-openmp build and ci/vllm-env's venv):
  PYTHONPATH=build/cpu-openmp/python $(ci/vllm-env)/bin/python bench/cpu_peer_bench.py \
      [--quick] [--json OUT.json]
One worker process per thread count (Kokkos fixes its thread count when it
starts; OMP_NUM_THREADS sets it, torch.set_num_threads PyTorch's). Every timed
call runs on the 1-thread worker and right after on the all-cores one, five
times for KOKKOS, three for each SDPA form (once for its slowest cases; the two
forms take turns within each repetition), and the best time of each is kept:
the ratios compare measurements taken side by side, and work of others on a
shared machine only ever slows a call down. The markdown table goes to stdout,
progress to stderr.
bench/plot_cpu_peer.py draws the JSON.
"""

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

DQK, DV = 192, 128
# The two ways of calling SDPA with a V narrower than q and k (see above).
SDPA_FORMS = ("SDPA as is", "SDPA padded")


def cases(quick):
    """(label, heads, sequence lengths) of one run."""
    out = []
    lengths = [1024, 2048] if quick else [1024, 2048, 4096, 8192]
    for n in lengths:
        out.append((f"causal {n}", 16, [n]))
    out.append(("varlen 4 seqs", 16, [1536, 3072, 2560, 1024] if not quick else [384, 768, 640, 256]))
    for n in [1024, 2048] if not quick else [1024]:
        out.append((f"causal {n}", 128, [n]))
    return out


def causal_flops(heads, lengths):
    # docs/contract.md section 7: H * (dqk + dv) * sum_i s_i^2 for causal prefill.
    return heads * (DQK + DV) * sum(s * s for s in lengths)


def jobs(quick):
    return [(d, c) for d in ("float32", "bfloat16") for c in cases(quick)]


def repeats(backend, flops):
    """Timed calls per thread count: KOKKOS five times; each SDPA form three
    times, and once for the slowest cases (a 1-thread call of SDPA's math path
    at 8k takes over half a minute)."""
    if backend == "KOKKOS":
        return 5
    return 1 if flops >= 1e11 else 3


class Job:
    """The tensors, outputs and KOKKOS backend of one case in one worker."""

    def __init__(self, selector, dtype_name, label, heads, lengths):
        import torch

        self.torch = torch
        self.dtype_name, self.label, self.heads, self.lengths = dtype_name, label, heads, lengths
        dtype = getattr(torch, dtype_name)
        self.total = sum(lengths)
        self.cu = [0]
        for n in lengths:
            self.cu.append(self.cu[-1] + n)
        # The same seed in every worker: both thread counts see the same tensors.
        gen = torch.Generator().manual_seed(1234 + heads + self.total)
        self.q = (torch.rand(self.total, heads, DQK, generator=gen) * 4 - 2).to(dtype)
        self.k = (torch.rand(self.total, heads, DQK, generator=gen) * 4 - 2).to(dtype)
        self.v = (torch.rand(self.total, heads, DV, generator=gen) * 2 - 1).to(dtype)
        self.scale = 1.0 / math.sqrt(DQK)
        self.flops = causal_flops(heads, lengths)
        self.selector = selector
        self.kokkos = selector.create(selector.select(dtype_name, backend="KOKKOS"), heads, scale=self.scale)
        self.kokkos.prepare(self.cu)
        self.out = {b: torch.full((self.total, heads, DV), float("nan"), dtype=dtype)
                    for b in ("KOKKOS",) + SDPA_FORMS}
        self.warm = set()

    def call(self, backend):
        if backend == "KOKKOS":
            self.kokkos.run_new_tokens(self.q, self.k, self.v, return_lse=False, out=self.out["KOKKOS"])
            return
        functional = self.torch.nn.functional
        for b in range(len(self.lengths)):
            s, e = self.cu[b], self.cu[b + 1]
            # [1, H, S, d] views of the [S, H, d] storage the library reads.
            qb, kb, vb = (x[s:e].transpose(0, 1).unsqueeze(0) for x in (self.q, self.k, self.v))
            if backend == "SDPA padded":
                vb = functional.pad(vb, (0, DQK - DV))
            o = functional.scaled_dot_product_attention(qb, kb, vb, is_causal=True, scale=self.scale)
            self.out[backend][s:e].copy_(o[..., :DV].squeeze(0).transpose(0, 1))

    def timed(self, backend):
        """Wall seconds of one call; the first call of a backend is preceded by
        a warm-up unless the case is among the largest."""
        if backend not in self.warm and self.flops < 1e11:
            self.call(backend)
        self.warm.add(backend)
        start = time.perf_counter()
        self.call(backend)
        return time.perf_counter() - start

    def errors(self):
        """Max abs error of each output against REFERENCE, on the first head."""
        ref_backend = self.selector.create(self.selector.select(self.dtype_name, backend="REFERENCE"), 1,
                                           scale=self.scale)
        ref_backend.prepare(self.cu)
        one = [x[:, :1].contiguous() for x in (self.q, self.k, self.v)]
        ref = ref_backend.run_new_tokens(*one, return_lse=False).float()
        return {b: (o[:, :1].float() - ref).abs().max().item() for b, o in self.out.items()}


def child(threads, quick):
    """Answers the parent's requests on stdin, one JSON line each:
    "run INDEX BACKEND" (one timed call) and "check INDEX" (errors)."""
    import torch
    import mlaprefill

    torch.set_num_threads(threads)
    selector = mlaprefill.Selector(apply=False)
    todo = jobs(quick)
    job, job_index = None, None
    print(json.dumps({"torch": torch.__version__}), flush=True)
    for line in sys.stdin:
        words = line.split()
        index = int(words[1])
        if index != job_index:
            job = None  # free the previous case's tensors first
            dtype_name, (label, heads, lengths) = todo[index]
            job, job_index = Job(selector, dtype_name, label, heads, lengths), index
        if words[0] == "run":
            answer = {"seconds": job.timed(" ".join(words[2:]))}  # a form's name has spaces
        else:
            answer = {"errors": job.errors(), "kokkos_kernel": job.kokkos.kernel_info}
        print(json.dumps(answer), flush=True)


def table(runs, all_threads):
    lines = []
    by = {}
    for run in runs:
        for r in run["results"]:
            by[(r["dtype"], r["heads"], r["case"], r["threads"], r["backend"])] = r
    keys = []
    for r in runs[0]["results"]:
        key = (r["dtype"], r["heads"], r["case"])
        if key not in keys:
            keys.append(key)
    head = ["dtype", "heads", "case", "tokens"]
    for t in (1, all_threads):
        head += [f"KOKKOS {t}t ms", f"KOKKOS {t}t GFLOP/s", f"SDPA as is {t}t ms", f"SDPA padded {t}t ms",
                 f"SDPA {t}t GFLOP/s"]
    head += [f"KOKKOS {all_threads}t / 1t", f"KOKKOS / SDPA ({all_threads}t)", "max err KOKKOS",
             "max err SDPA as is", "max err SDPA padded"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for dtype, heads, case in keys:
        row = [dtype, str(heads), case]
        k1 = by[(dtype, heads, case, 1, "KOKKOS")]
        row.append(str(k1["tokens"]))
        for t in (1, all_threads):
            k = by[(dtype, heads, case, t, "KOKKOS")]
            peer = by[(dtype, heads, case, t, "SDPA")]
            row += [f"{k['ms']:.1f}", f"{k['gflops']:.1f}"]
            # The faster form, the one the peer's GFLOP/s and the ratio use, in bold.
            for form in SDPA_FORMS:
                ms = f"{by[(dtype, heads, case, t, form)]['ms']:.1f}"
                row.append(f"**{ms}**" if form == peer["form"] else ms)
            row.append(f"{peer['gflops']:.1f}")
        kn = by[(dtype, heads, case, all_threads, "KOKKOS")]
        sn = by[(dtype, heads, case, all_threads, "SDPA")]
        row.append(f"{k1['ms'] / kn['ms']:.2f}x")
        row.append(f"{sn['ms'] / kn['ms']:.2f}x")
        for backend in ("KOKKOS",) + SDPA_FORMS:
            err = max(by[(dtype, heads, case, t, backend)]["max_abs_err_vs_reference"] for t in (1, all_threads))
            row.append(f"{err:.1e}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def result(label, heads, lengths, dtype_name, threads, backend, repeat_count, seconds, flops):
    return {"case": label, "heads": heads, "lengths": lengths, "tokens": sum(lengths), "dtype": dtype_name,
            "threads": threads, "backend": backend, "repeats": repeat_count, "ms": seconds * 1e3,
            "gflops": flops / seconds / 1e9, "load_1min": os.getloadavg()[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small cases only (a smoke run)")
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--child-threads", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_threads:
        child(args.child_threads, args.quick)
        return
    all_threads = os.cpu_count() or 1
    workers = []
    for threads in sorted({1, all_threads}):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="false")
        cmd = [sys.executable, __file__, "--child-threads", str(threads)] + (["--quick"] if args.quick else [])
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        workers.append((proc, {"threads": threads, "torch": json.loads(proc.stdout.readline())["torch"],
                               "results": []}))

    def ask(proc, request):
        proc.stdin.write(request + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    load_before = os.getloadavg()[0]
    for index, (dtype_name, (label, heads, lengths)) in enumerate(jobs(args.quick)):
        flops = causal_flops(heads, lengths)
        # KOKKOS, then the two SDPA forms taking turns within each repetition.
        for group in (("KOKKOS",), SDPA_FORMS):
            best = {backend: {} for backend in group}
            # Each repetition runs on the 1-thread worker and right after on the
            # all-cores one; the best of the repetitions is kept (the machine is
            # shared, and other work only ever makes a call slower).
            for _ in range(repeats(group[0], flops)):
                for backend in group:
                    for proc, run in workers:
                        t = ask(proc, f"run {index} {backend}")["seconds"]
                        best[backend][run["threads"]] = min(t, best[backend].get(run["threads"], t))
            for backend in group:
                for proc, run in workers:
                    seconds = best[backend][run["threads"]]
                    run["results"].append(result(label, heads, lengths, dtype_name, run["threads"], backend,
                                                 repeats(backend, flops), seconds, flops))
                print(f"  {dtype_name} {heads}h {label} {backend}: " +
                      ", ".join(f"{t} thr {best[backend][t] * 1e3:.1f} ms" for t in sorted(best[backend])),
                      file=sys.stderr, flush=True)
            if group == SDPA_FORMS:
                # The peer: per thread count, the faster form.
                for proc, run in workers:
                    form = min(SDPA_FORMS, key=lambda f: best[f][run["threads"]])
                    peer = result(label, heads, lengths, dtype_name, run["threads"], "SDPA", repeats(form, flops),
                                  best[form][run["threads"]], flops)
                    peer["form"] = form
                    run["results"].append(peer)
        for proc, run in workers:
            answer = ask(proc, f"check {index}")
            run["kokkos_kernel"] = answer["kokkos_kernel"]
            for r in run["results"]:
                if (r["dtype"], r["heads"], r["case"]) == (dtype_name, heads, label):
                    r["max_abs_err_vs_reference"] = answer["errors"][r.get("form", r["backend"])]
    runs = [run for _, run in workers]
    meta = {
        "machine": platform.processor() or platform.machine(),
        "cores": all_threads,
        "torch": runs[0]["torch"],
        "kokkos_kernel": runs[0]["kokkos_kernel"],
        "python": platform.python_version(),
        # The machine's 1-minute load average before the run and at its end;
        # this run's own workers add about 1 to 2 while they compute.
        "load_1min_before": load_before,
        "load_1min_after": os.getloadavg()[0],
        "sdpa_forms": {"SDPA as is": f"v {DV} wide (SDPA's math path)",
                       "SDPA padded": f"v zero-padded to {DQK}, output sliced back to {DV} (its flash kernel)",
                       "SDPA": "the faster of the two per case and thread count (its `form`)",
                       "flops": f"counted with v {DV} for both forms (docs/contract.md section 7)"},
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "runs": runs}, f, indent=1)
    print(f"PyTorch {meta['torch']} (SDPA), KOKKOS {meta['kokkos_kernel']}; threads 1 and {all_threads} "
          f"(KOKKOS: OMP_NUM_THREADS per worker process; PyTorch: torch.set_num_threads); "
          f"load average {meta['load_1min_before']:.2f} before, {meta['load_1min_after']:.2f} after\n")
    print(f"SDPA as is: v {DV} wide (SDPA's math path). SDPA padded: v zero-padded to {DQK} and the output sliced "
          f"back (its flash kernel; padding and slice timed). The faster form, in bold, is the peer: SDPA GFLOP/s "
          f"and KOKKOS / SDPA use it. GFLOP/s count v {DV} for every column (docs/contract.md section 7).\n")
    print(table(runs, all_threads))


if __name__ == "__main__":
    main()
