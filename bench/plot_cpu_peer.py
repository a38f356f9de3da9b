"""GFLOP/s against tokens for each backend and thread count, from the JSON of
bench/cpu_peer_bench.py: one panel per (dtype, heads), causal single
sequences as lines, the varlen batch as separate markers.

  python3 bench/plot_cpu_peer.py RESULTS.json OUT.png
Needs matplotlib (Debian's python3-matplotlib, which ci/setup installs).
"""

import json
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        data = json.load(f)
    results = [r for run in data["runs"] for r in run["results"]]
    dtypes = sorted({r["dtype"] for r in results}, key=lambda d: d != "float32")
    head_counts = sorted({r["heads"] for r in results})
    fig, axes = plt.subplots(len(dtypes), len(head_counts), figsize=(5.5 * len(head_counts), 4.2 * len(dtypes)),
                             sharey=True, squeeze=False)
    panels = [(ax, d, h) for row, d in zip(axes, dtypes) for ax, h in zip(row, head_counts)]
    styles = {"KOKKOS": "-", "SDPA": "--"}
    markers = {1: "o", data["meta"]["cores"]: "s"}
    for ax, dtype, heads in panels:
        for backend in ("KOKKOS", "SDPA"):
            for threads in sorted({r["threads"] for r in results}):
                mine = [r for r in results if (r["dtype"], r["heads"], r["backend"], r["threads"]) ==
                        (dtype, heads, backend, threads)]
                causal = sorted((r["tokens"], r["gflops"]) for r in mine if r["case"].startswith("causal"))
                label = f"{backend}, {threads} thread{'s' if threads > 1 else ''}"
                line = ax.plot([c[0] for c in causal], [c[1] for c in causal], styles[backend],
                               marker=markers.get(threads, "^"), label=label)[0]
                for r in mine:
                    if r["case"].startswith("varlen"):
                        ax.plot([r["tokens"]], [r["gflops"]], marker="*", markersize=11, color=line.get_color(),
                                linestyle="none")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{dtype}, {heads} heads (qk 192, v 128)")
        ax.set_xlabel("tokens (causal; * = varlen batch)")
        ax.grid(True, alpha=0.3)
    for row in axes:
        row[0].set_ylabel("GFLOP/s (docs/contract.md section 7)")
    axes[0][-1].legend(fontsize=8)
    meta = data["meta"]
    # The kernel description can be long: wrapped, so that the title fits the figure.
    title = f"KOKKOS vs PyTorch {meta['torch']} SDPA on {meta['cores']} CPU cores ({meta['kokkos_kernel']})"
    fig.suptitle("\n".join(textwrap.wrap(title, 140)), fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
