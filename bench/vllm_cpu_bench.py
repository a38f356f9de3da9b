"""vLLM's own CPU MLA prefill against mlaprefill's vLLM adapter, driven as vLLM drives them.

Each case is one MLA prefill step of one request, run through vLLM's own
MLACommonBaseImpl.forward_mha (one layer's prefill: the latents' up-projection,
the new tokens, the context gathered from a paged cache chunk by chunk, and the
LSE merges), once with the prefill backend vLLM's CPU platform picks
(CPUSDPAMLAPrefillBackend, or its zentorch subclass where zentorch is installed)
and once with mlaprefill.vllm.MlaPrefillBackend, on the same tensors. The
context chunks come from vLLM's own planner (build_mla_chunked_context_metadata),
and each backend's prepare_metadata is called once per step, as vLLM's metadata
builder does. bf16, DeepSeek dims (qk nope 128, rope 64, v 128, latent 512),
16 and 128 heads, 1k to 8k new tokens, each alone and after a cached context of
the same length split into chunks (--context-chunks).

Three times are taken per call: the step (forward_mha, what the ratio compares),
the backend (the time spent inside the prefill backend's run methods during that
call: the attention alone, without the projection, gather and merges, which
vLLM's code does the same way for both sides) and prepare (prepare_metadata,
once per step for every layer). Per case each side has one untimed warm-up, then
--rounds rounds; a round runs both sides back to back, the order alternating
from round to round, so that both see the same machine. Medians and min-max.

Both sides use every core (--threads): OMP_NUM_THREADS and KOKKOS_NUM_THREADS
are set before PyTorch and the library load (Kokkos' OpenMP space takes
OpenMP's thread count when it starts; its Threads space reads
KOKKOS_NUM_THREADS), and torch.set_num_threads sets PyTorch's.

vLLM's CPU backend keeps fp32 [heads, queries, keys] scores, their softmax and
logsumexp's temporaries at once (about 32 GiB at 128 heads and 4k tokens, 128
GiB at 8k); a case whose estimate of that exceeds the memory budget
(--memory-gib, default 85% of the available memory) runs our side only.

Usage (ci/vllm-env's environment, with this package installed into it by pip
with KOKKOS):
  $(ci/vllm-env)/bin/python bench/vllm_cpu_bench.py [--smoke] [--rounds N] [--md OUT.md] [--json OUT.json]
The table goes to stdout (and --md), progress to stderr. The run refuses to
time the library's REFERENCE backend unless --allow-reference is given, nor a
KOKKOS built on a Serial Kokkos (one core) unless --allow-one-core is.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import types

NOPE, ROPE, V, LATENT = 128, 64, 128, 512
DQK = NOPE + ROPE
# DeepSeek-V3's softmax scale with YaRN (docs/contract.md section 1).
SCALE = DQK ** -0.5 * (0.1 * math.log(40) + 1) ** 2
BLOCK = 16  # tokens per block of the paged cache
RUN_METHODS = ("run_prefill_new_tokens", "run_prefill_context_chunk")


def step_flops(heads, new, context):
    """docs/contract.md section 7: causal new tokens, the context chunks (non-causal)
    and the up-projection of every latent; the merges count nothing."""
    attention = heads * (DQK + V) * new * new + 2 * heads * (DQK + V) * new * context
    projection = 2 * (new + context) * LATENT * heads * (NOPE + V)
    return attention + projection


def vllm_peak_bytes(heads, new, keys):
    """vLLM's CPU backend at its widest call: fp32 scores, their softmax and
    logsumexp's temporaries, each [heads, new, keys], alive together (four
    such tensors cover the growth of the process' peak measured at 16 heads,
    2k tokens, with and without context)."""
    return 4 * 4 * heads * new * keys


class Projection:
    """kv_b_proj as vLLM's MLA layer calls it: returns (output, bias)."""

    def __init__(self, weight):
        self.weight = weight  # [heads * (nope + v), latent]

    def __call__(self, x):
        import torch

        return torch.nn.functional.linear(x, self.weight), None


class MlaLayer:
    """What forward_mha reads from vLLM's MLA attention layer, with vLLM's own
    helper methods bound to it."""

    def __init__(self, heads, kv_b_proj):
        from vllm.model_executor.layers.attention import mla_attention

        self.impl = mla_attention.MLACommonBaseImpl
        self.num_heads, self.kv_b_proj = heads, kv_b_proj
        self.qk_nope_head_dim, self.v_head_dim, self.kv_lora_rank = NOPE, V, LATENT
        self.dcp_world_size, self.kv_cache_dtype, self._use_flashinfer_concat_mla_k = 1, "auto", False
        for name in ("_concat_k_nope_k_pe", "_compute_prefill_context"):
            setattr(self, name, types.MethodType(getattr(self.impl, name), self))


class Step:
    """One request: `new` tokens after `context` cached ones in a paged cache,
    random bf16 data, vLLM's chunk plan with a workspace of about
    context / chunks rows."""

    def __init__(self, heads, new, context, chunks, seed=0):
        import torch

        gen = torch.Generator().manual_seed(seed)

        def rand(*shape, scale=1.0):
            return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16)

        self.heads, self.new, self.context = heads, new, context
        self.q = rand(new, heads, DQK)
        self.kv_c = rand(new, LATENT)
        self.k_pe = rand(new, 1, ROPE)
        self.layer = MlaLayer(heads, Projection(rand(heads * (NOPE + V), LATENT, scale=LATENT ** -0.5)))
        blocks = max(math.ceil(context / BLOCK), 1)
        self.cache = rand(blocks, BLOCK, LATENT + ROPE)
        self.block_table = torch.arange(blocks, dtype=torch.int32).unsqueeze(0)
        rows = BLOCK * max(math.ceil(context / chunks / BLOCK), 1)
        self.workspace = torch.empty(rows, LATENT + ROPE, dtype=torch.bfloat16)
        self.chunk_rows = min(rows, context)

    def metadata(self, backend):
        """vLLM's prefill metadata for `backend`, as its metadata builder makes it."""
        import torch
        from vllm.model_executor.layers.attention import mla_attention

        query_start = torch.tensor([0, self.new], dtype=torch.int32)
        chunked = None
        if self.context:
            chunked = mla_attention.build_mla_chunked_context_metadata(
                context_lens_cpu=torch.tensor([self.context], dtype=torch.int32),
                prefill_query_start_loc_cpu=query_start, chunked_prefill_workspace=self.workspace,
                chunked_prefill_workspace_size=self.workspace.shape[0], block_size=BLOCK, align_chunk_to_block=True,
                device=torch.device("cpu"), dcp_world_size=1, dcp_local_block_size=1, dcp_virtual_block_size=1)
        return mla_attention.MLACommonPrefillMetadata(
            block_table=self.block_table, query_start_loc=query_start, max_query_len=self.new,
            chunked_context=chunked, output_dtype=torch.bfloat16, q_data_type=torch.bfloat16,
            prefill_backend=backend, query_lens_cpu=torch.tensor([self.new], dtype=torch.int32))


class Side:
    """One prefill backend on one step: its metadata, its output, and the time
    its run methods take inside each forward_mha."""

    def __init__(self, name, backend, step):
        import torch

        self.name, self.backend, self.step = name, backend, step
        self.metadata = step.metadata(backend)
        self.chunks = len(self.metadata.chunked_context.chunks) if self.metadata.chunked_context else 0
        self.out = torch.full((step.new, step.heads * V), float("nan"), dtype=torch.bfloat16)
        self.inside = self.inside_cpu = 0.0
        for method in RUN_METHODS:
            setattr(backend, method, self._timed(getattr(backend, method)))

    def _timed(self, method):
        def timed(*args, **kwargs):
            # The process' CPU time beside the wall time: their ratio is how
            # many cores the backend kept busy.
            start, start_cpu = time.perf_counter(), time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.inside += time.perf_counter() - start
                self.inside_cpu += time.process_time() - start_cpu

        return timed

    def call(self):
        """(prepare, step, backend) seconds of one step of one layer, and the
        cores busy inside the backend."""
        import torch

        step = self.step
        start = time.perf_counter()
        self.backend.prepare_metadata(self.metadata)
        prepared = time.perf_counter()
        self.inside = self.inside_cpu = 0.0
        step.layer.impl.forward_mha(step.layer, step.q, step.kv_c, step.k_pe, step.cache,
                                    types.SimpleNamespace(prefill=self.metadata), torch.ones(()), self.out)
        return prepared - start, time.perf_counter() - prepared, self.inside, self.inside_cpu / self.inside


def summary(seconds):
    ms = sorted(s * 1e3 for s in seconds)
    return {"median": statistics.median(ms), "min": ms[0], "max": ms[-1], "all": ms}


def run_case(heads, new, context, chunks, rounds, backends, budget, log):
    """Times one case; returns its row for the table and the JSON."""
    import torch

    vllm_cls, ours_cls = backends
    step = Step(heads, new, context, chunks)
    kwargs = dict(num_heads=heads, scale=SCALE, kv_lora_rank=LATENT, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE,
                  v_head_dim=V)
    model = types.SimpleNamespace(model_config=types.SimpleNamespace(dtype=torch.bfloat16))
    sides = [Side("ours", ours_cls(**kwargs, vllm_config=model), step)]
    need = vllm_peak_bytes(heads, new, max(new, step.chunk_rows))
    row = {"heads": heads, "new_tokens": new, "context_tokens": context, "chunks": sides[0].chunks,
           "flops": step_flops(heads, new, context), "vllm_estimated_peak_gib": need / 2 ** 30}
    if need <= budget:
        sides.insert(0, Side("vllm", vllm_cls(**kwargs, vllm_config=None), step))
    else:
        row["vllm_skipped"] = (f"needs about {need / 2 ** 30:.1f} GiB for its fp32 scores, over the "
                               f"{budget / 2 ** 30:.1f} GiB budget")
    times = {side.name: [] for side in sides}
    for side in sides:
        side.call()  # warm-up
    for r in range(rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            times[side.name].append(side.call())
    for side in sides:
        prepare, forward, inside, busy = zip(*times[side.name])
        row[side.name] = {"prepare_ms": summary(prepare), "step_ms": summary(forward), "backend_ms": summary(inside),
                          "backend_cores_busy": statistics.median(busy)}
    if len(sides) == 2:
        row["max_abs_diff"] = (sides[0].out.float() - sides[1].out.float()).abs().max().item()
        row["ratio"] = row["vllm"]["step_ms"]["median"] / row["ours"]["step_ms"]["median"]
        row["backend_ratio"] = row["vllm"]["backend_ms"]["median"] / row["ours"]["backend_ms"]["median"]
    log(f"  {heads}h {new} new + {context} context ({row['chunks']} chunks): " + ", ".join(
        f"{name} {row[name]['step_ms']['median']:.1f} ms" for name in ("vllm", "ours") if name in row))
    return row


def spread(s):
    return f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"


def table(rows):
    head = ["heads", "new tokens", "context (chunks)", "vLLM step ms", "ours step ms", "vLLM / ours",
            "vLLM backend ms", "ours backend ms", "backend vLLM / ours", "backend cores busy vLLM / ours",
            "prepare ms vLLM / ours", "ours GFLOP/s", "max abs diff"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ours = r["ours"]
        context = f"{r['context_tokens']} ({r['chunks']})" if r["context_tokens"] else "none"
        gflops = r["flops"] / ours["step_ms"]["median"] / 1e6
        if "vllm" in r:
            vllm = r["vllm"]
            cells = [spread(vllm["step_ms"]), spread(ours["step_ms"]), f"**{r['ratio']:.2f}x**",
                     f"{vllm['backend_ms']['median']:.1f}", f"{ours['backend_ms']['median']:.1f}",
                     f"{r['backend_ratio']:.2f}x",
                     f"{vllm['backend_cores_busy']:.1f} / {ours['backend_cores_busy']:.1f}",
                     f"{vllm['prepare_ms']['median']:.2f} / {ours['prepare_ms']['median']:.2f}",
                     f"{gflops:.1f}", f"{r['max_abs_diff']:.1e}"]
        else:
            cells = [f"skipped: {r['vllm_skipped']}", spread(ours["step_ms"]), "-", "-",
                     f"{ours['backend_ms']['median']:.1f}", "-", f"- / {ours['backend_cores_busy']:.1f}",
                     f"- / {ours['prepare_ms']['median']:.2f}", f"{gflops:.1f}", "-"]
        lines.append("| " + " | ".join([str(r["heads"]), str(r["new_tokens"]), context] + cells) + " |")
    return "\n".join(lines)


def findings(rows, goal_tokens=4096):
    """The goal's rows, and every row where vLLM's path is faster with where
    its time went: inside the backend (the attention) or in vLLM's code
    around it (projection, gather, merges), which is the same for both."""
    lines = []
    goal = [r for r in rows if r["new_tokens"] == goal_tokens and "ratio" in r]
    if goal:
        lines.append(f"Goal vLLM / ours >= 2x at {goal_tokens} new tokens: " + "; ".join(
            f"{r['heads']} heads, {'context ' + str(r['context_tokens']) if r['context_tokens'] else 'no context'}: "
            f"{r['ratio']:.2f}x ({'met' if r['ratio'] >= 2 else 'not met'})" for r in goal) + ".")
    for r in rows:
        if r.get("ratio", math.inf) >= 1:
            continue
        outside = {name: r[name]["step_ms"]["median"] - r[name]["backend_ms"]["median"] for name in ("vllm", "ours")}
        lines.append(
            f"vLLM's path is faster at {r['heads']} heads, {r['new_tokens']} new + {r['context_tokens']} context "
            f"tokens ({r['ratio']:.2f}x): inside the backend vLLM {r['vllm']['backend_ms']['median']:.1f} ms, ours "
            f"{r['ours']['backend_ms']['median']:.1f} ms; outside it (vLLM's own projection, gather and merges) "
            f"vLLM {outside['vllm']:.1f} ms, ours {outside['ours']:.1f} ms; prepare_metadata vLLM "
            f"{r['vllm']['prepare_ms']['median']:.2f} ms, ours {r['ours']['prepare_ms']['median']:.2f} ms.")
    return lines


def machine(threads, torch, vllm, mlaprefill, library, vllm_cls):
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": model, "cores": len(os.sched_getaffinity(0)), "threads": threads,
            "torch_threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "torch": torch.__version__, "vllm": vllm.__version__, "mlaprefill": mlaprefill.build_info()["version"],
            "python": platform.python_version(), "library_backend": library.name,
            "library_kernel": library.kernel_info,
            "library_build": mlaprefill.build_info()["backends"].get(library.name, {}).get("detail", "a plugin"),
            "vllm_backend": f"{vllm_cls.__module__}.{vllm_cls.__qualname__}",
            "memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30}


def available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="16 heads, 128 and 256 new tokens, 1 round")
    parser.add_argument("--heads", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1024, 2048, 4096, 8192], help="new tokens")
    parser.add_argument("--context-chunks", type=int, default=2,
                        help="the cached context (as long as the new tokens) is gathered in this many chunks")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="default: every core")
    parser.add_argument("--memory-gib", type=float, help="budget for vLLM's side (default: 85%% of available)")
    parser.add_argument("--allow-reference", action="store_true",
                        help="time even when the library runs REFERENCE (a smoke run, not a measurement)")
    parser.add_argument("--allow-one-core", action="store_true",
                        help="time even when KOKKOS is built on a Serial Kokkos (a smoke run, not a measurement)")
    parser.add_argument("--md", help="write the Markdown here too")
    parser.add_argument("--json", help="write every measurement here")
    args = parser.parse_args()
    if args.smoke:
        args.heads, args.tokens, args.rounds = [16], [128, 256], 1

    # Before PyTorch and the library load: OpenMP and Kokkos read these when they start.
    os.environ["OMP_NUM_THREADS"] = os.environ["KOKKOS_NUM_THREADS"] = str(args.threads)
    # Unbound threads, as PyTorch's default (Kokkos warns when this is unset).
    os.environ.setdefault("OMP_PROC_BIND", "false")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM logs to stdout, where the table goes
    import torch
    import vllm
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.mla.prefill.base import MLADimensions
    from vllm.v1.attention.backends.mla.prefill.selector import MLAPrefillSelectorConfig

    import mlaprefill
    import mlaprefill.vllm as adapter

    torch.set_num_threads(args.threads)
    # vLLM's CPU platform's own choice for a DeepSeek layer in bf16.
    vllm_cls = current_platform.get_mla_prefill_backend_cls(
        MLAPrefillSelectorConfig(dtype=torch.bfloat16, mla_dimensions=MLADimensions(
            qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V)))
    if vllm_cls.__module__.startswith("mlaprefill"):
        sys.exit(f"vLLM's CPU prefill backend is bound to {vllm_cls.__qualname__} (mlaprefill.vllm.register() ran); "
                 f"run this in a fresh process")
    # The selector the adapter itself uses, so the name is the backend that runs.
    selector = adapter._shared_selector()
    library = selector.create(selector.select("bfloat16", (NOPE, ROPE, V)), 1, scale=SCALE)
    info = machine(args.threads, torch, vllm, mlaprefill, library, vllm_cls)
    print(f"mlaprefill backend: {library.name} ({library.kernel_info}); vLLM: {info['vllm_backend']}", file=sys.stderr)
    if library.name == "REFERENCE" and not args.allow_reference:
        sys.exit("mlaprefill runs REFERENCE here (the fp64 oracle, not a fast backend): install the package with "
                 "KOKKOS, or pass --allow-reference for a smoke run that is no measurement")
    if one_core(info) and not args.allow_one_core:
        sys.exit(f"mlaprefill's KOKKOS is built on {info['library_build']}: it would use one core of {args.threads}. "
                 f"Install the package on an OpenMP Kokkos (ci/setup-kokkos; plain `pip install .` takes it, a "
                 f"given MLA_WITH_KOKKOS=ON does not), or pass --allow-one-core for a smoke run")
    budget = args.memory_gib * 2 ** 30 if args.memory_gib else 0.85 * available_bytes()
    load_before = os.getloadavg()[0]
    rows = []
    for heads in args.heads:
        for new in args.tokens:
            for context in (0, new):
                rows.append(run_case(heads, new, context, args.context_chunks, args.rounds,
                                     (vllm_cls, adapter.MlaPrefillBackend), budget,
                                     lambda line: print(line, file=sys.stderr, flush=True)))
    info["load_1min_before"], info["load_1min_after"] = load_before, os.getloadavg()[0]
    info["rounds"], info["memory_budget_gib"] = args.rounds, budget / 2 ** 30
    text = report(info, rows)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": info, "rows": rows}, f, indent=1)


def one_core(info):
    """Whether the library's KOKKOS runs on a Serial Kokkos (its build says so) while more threads are asked."""
    build = info["library_build"].lower()
    parallel = "openmp" in build or "threads" in build
    return info["library_backend"] == "KOKKOS" and "serial" in build and not parallel and info["threads"] > 1


def report(info, rows):
    warning = ""
    if info["library_backend"] == "REFERENCE":
        warning = "**Not a measurement: mlaprefill ran REFERENCE, its fp64 oracle (--allow-reference).**\n\n"
    elif one_core(info):
        warning = ("**Not a measurement: mlaprefill's KOKKOS ran on a Serial Kokkos, one core of "
                   f"{info['threads']} (--allow-one-core).**\n\n")
    return (
        f"{warning}"
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']:.0f} GiB; torch {info['torch']}, "
        f"vLLM {info['vllm']}, mlaprefill {info['mlaprefill']}, Python {info['python']}.\n"
        f"mlaprefill: {info['library_backend']} ({info['library_kernel']}; built on {info['library_build']}); "
        f"vLLM: {info['vllm_backend']}.\n"
        f"Threads: {info['threads']} for both (torch.set_num_threads -> {info['torch_threads']}; OMP_NUM_THREADS and "
        f"KOKKOS_NUM_THREADS {info['omp_num_threads']}). Load average {info['load_1min_before']:.2f} before, "
        f"{info['load_1min_after']:.2f} after.\n\n"
        f"One MLA prefill step of one request through vLLM's forward_mha, bf16, DeepSeek dims (qk 128 + 64, v 128, "
        f"latent 512), scale {SCALE:.6f}; context: cached tokens gathered in chunks by vLLM's planner. Times per "
        f"call of one layer, median (min-max) of {info['rounds']} rounds after a warm-up, both sides interleaved. "
        f"Step: forward_mha (projection, attention, gather, merges); backend: inside the prefill backend's run "
        f"methods (the attention); prepare: prepare_metadata, once per step. GFLOP/s: the step as "
        f"docs/contract.md section 7 counts it. Backend cores busy: the process' CPU time over the wall time "
        f"inside the backend (coarse below some tens of ms: the kernel counts CPU time in ticks). Max abs diff: "
        f"ours against vLLM's output.\n\n"
        + table(rows) + "\n\n" + "\n".join(f"- {line}" for line in findings(rows) + busy_machine(info)))


def busy_machine(info):
    # With every core asked for, each OpenMP barrier waits for threads the
    # scheduler gave to other work: short calls then take many times longer.
    if info["load_1min_before"] < 0.5:
        return []
    return [f"The machine was not idle (load average {info['load_1min_before']:.2f} before the run): with "
            f"{info['threads']} threads on {info['cores']} cores, parallel regions wait for descheduled threads, "
            f"and these times are not a measurement."]


if __name__ == "__main__":
    main()
