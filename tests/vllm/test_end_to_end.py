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
import subprocess
import sys

import pytest

HARNESS = pathlib.Path(__file__).with_name("tiny_deepseek.py")
# The two backends compute the same bf16 attention with different
# accumulation orders; through two layers that moves a log-probability by a
# few thousandths (measured: at most 0.004).
LOGPROB_BOUND = 0.02


def harness(*args):
    env = dict(os.environ)
    for name in ("VLLM_PLUGINS", "MLA_CONFIG", "MLA_PREFILL_BACKEND", "MLA_PLATFORM"):
        env.pop(name, None)
    result = subprocess.run([sys.executable, str(HARNESS), *args], env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT "):]) if lines else None


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_deepseek")
    harness("make", str(path))
    return str(path)


def test_greedy_generation_matches_vllms_own_prefill(model):
    ours = harness("generate", model, "CUSTOM")
    theirs = harness("generate", model, "vllm")
    # The adapter ran inside vLLM: once per layer for the one prefill step.
    assert ours["calls"]["run_prefill_new_tokens"] >= 2
    assert theirs["calls"]["run_prefill_new_tokens"] == 0
    worst = 0.0
    for a, b in zip(ours["outputs"], theirs["outputs"], strict=True):
        assert a["tokens"] == b["tokens"]
        worst = max([worst] + [abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"], strict=True)])
    assert worst <= LOGPROB_BOUND
    print(f"largest log-probability difference: {worst:.5f}")
