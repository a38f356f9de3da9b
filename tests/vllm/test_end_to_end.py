"""End to end: the tiny DeepSeek-V2 model (tiny_deepseek.py: config made
there, random weights saved to a temporary folder) served by vLLM on this
CPU, greedy, with the MLA prefill backend option set to CUSTOM (this
library, through the plugin vLLM loads from the installed entry point) and
left unset (vLLM's own CPU backend). Each run is a fresh process, as a user's
would be.

vLLM on a CPU without AMX turns chunked prefill and prefix caching off for
MLA, so every prompt is prefilled whole in one step: the context-chunk path
is covered by test_adapter.py with vLLM's own planner instead."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

HARNESS = pathlib.Path(__file__).with_name("tiny_deepseek.py")
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "vllm" / "generate.py"
# The two backends compute the same bf16 attention with different
# accumulation orders; through two layers that moves a log-probability by a
# few thousandths (measured: at most 0.004).
LOGPROB_BOUND = 0.02
# What the library logs when the adapter selects its backend: on this CPU it
# must be KOKKOS. REFERENCE here means the installed package was built
# without Kokkos, and every vLLM run would use the fp64 oracle.
FAST_PATH = "[mla] [info] Using KOKKOS MLA prefill backend"


def run(script, *args):
    env = dict(os.environ)
    for name in ("VLLM_PLUGINS", "MLA_CONFIG", "MLA_PREFILL_BACKEND", "MLA_PLATFORM"):
        env.pop(name, None)
    env["VLLM_CPU_KVCACHE_SPACE"] = "1"  # GiB; the default is far more
    result = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def harness(*args):
    result = run(HARNESS, *args)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return None
    out = json.loads(lines[-1][len("RESULT "):])
    out["log"] = result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_deepseek")
    harness("make", str(path))
    return str(path)


def compare(ours, theirs):
    """Greedy tokens must be equal and their log-probabilities within
    LOGPROB_BOUND. A random model's next-token distribution is nearly flat,
    so two candidates can be closer than that: where the two runs choose
    differently, both runs must show it as such a near tie (each one's
    choice within the bound of the other's), and the rest of that prompt,
    which continues from different tokens, is not compared. Returns the
    largest difference and the number of near-tie splits; at least one
    prompt must agree to its end."""
    worst, splits = 0.0, 0
    for a, b in zip(ours["outputs"], theirs["outputs"], strict=True):
        for step, (x, y) in enumerate(zip(a["tokens"], b["tokens"], strict=True)):
            if x != y:
                top_a, top_b = dict(map(tuple, a["top"][step])), dict(map(tuple, b["top"][step]))
                assert y in top_a and top_a[x] - top_a[y] <= LOGPROB_BOUND, f"step {step}: {a['top'][step]}"
                assert x in top_b and top_b[y] - top_b[x] <= LOGPROB_BOUND, f"step {step}: {b['top'][step]}"
                splits += 1
                break
            worst = max(worst, abs(a["logprobs"][step] - b["logprobs"][step]))
    assert worst <= LOGPROB_BOUND
    assert splits < len(ours["outputs"]), "no prompt was compared to its end"
    return worst, splits


def test_greedy_generation_matches_vllms_own_prefill(model, capsys):
    ours = harness("generate", model, "CUSTOM")
    theirs = harness("generate", model, "vllm")
    # The adapter ran inside vLLM: once per layer for the one prefill step.
    assert ours["calls"]["run_prefill_new_tokens"] >= 2
    assert theirs["calls"]["run_prefill_new_tokens"] == 0
    assert FAST_PATH in ours["log"], "the adapter did not run KOKKOS: " + \
        "; ".join(line for line in ours["log"].splitlines() if "[mla]" in line)
    worst, splits = compare(ours, theirs)
    with capsys.disabled():  # into ci/test's log
        print(f"\ntp=1: largest log-probability difference {worst:.5f}, near-tie splits {splits}")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="tensor parallel size 2 needs two cores")
def test_tensor_parallel_size_2(model, capsys):
    # Two CPU workers, each its own process with half the heads; the calls
    # happen there, so the backend is seen in vLLM's log instead.
    ours = harness("generate", model, "CUSTOM", "2")
    theirs = harness("generate", model, "vllm", "2")
    assert "Using MLAPREFILL MLA prefill backend" in ours["log"]
    assert "Using MLAPREFILL MLA prefill backend" not in theirs["log"]
    worst, splits = compare(ours, theirs)
    with capsys.disabled():
        print(f"\ntp=2: largest log-probability difference {worst:.5f}, near-tie splits {splits}")


def test_the_readme_example_selects_it_in_vllms_worker_process(model):
    # vLLM's default: the engine and its worker in processes of their own,
    # each loading the plugin from the installed entry point.
    result = run(EXAMPLE, model)
    log = result.stdout + result.stderr
    assert "Using MLAPREFILL MLA prefill backend" in log
    assert FAST_PATH in log, re.findall(r"\[mla\] \[info\] Using \w+ MLA prefill backend", log)
    lines = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 2 and all(len(json.loads(line)) == 8 for line in lines)
