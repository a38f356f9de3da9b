"""A tiny DeepSeek-V2 model (config made here, random weights, nothing from a
hub) served by vLLM on the CPU with greedy decoding, with the MLA prefill
backend chosen as a user would: vLLM's attention_config option.

    python tiny_deepseek.py make DIR              saves the model under DIR
    python tiny_deepseek.py generate DIR BACKEND [TP]  prints one JSON line:
        per prompt the tokens, their log-probabilities and each step's two
        most likely tokens, and how many times the adapter's run methods
        were called in this process (BACKEND: CUSTOM for this library's,
        "vllm" for vLLM's own; TP: tensor parallel size, default 1)

Run it with the environment ci/vllm-env makes (test_end_to_end.py does)."""

import json
import os
import sys

# vLLM's CPU MLA decode kernel takes only a latent of kv_lora_rank 512 plus a
# rope part of 64 (head size 576); the rest is as small as vLLM allows.
CONFIG = dict(
    vocab_size=512,
    hidden_size=256,
    intermediate_size=512,
    moe_intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    q_lora_rank=None,
    kv_lora_rank=512,
    qk_nope_head_dim=32,
    qk_rope_head_dim=64,
    v_head_dim=32,
    first_k_dense_replace=2,  # dense layers only: no MoE kernels
    n_routed_experts=4,
    num_experts_per_tok=2,
    n_shared_experts=1,
    max_position_embeddings=1024,
)

# Three prompts as token ids: short, long (one prefill of 293 tokens), tiny.
PROMPTS = [list(range(1, 12)), [(7 * i) % 500 + 1 for i in range(293)], [5] * 3]
MAX_TOKENS = 8


def make_model(path, seed=0):
    """Saves the tiny model with random bfloat16 weights under `path`."""
    import torch
    from transformers import AutoModelForCausalLM, DeepseekV2Config

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(DeepseekV2Config(**CONFIG)).to(torch.bfloat16)
    model.save_pretrained(path)


def count_calls():
    """Counts the adapter's run calls (the engine runs in this process)."""
    import mlaprefill.vllm as adapter

    calls = {"run_prefill_new_tokens": 0, "run_prefill_context_chunk": 0}
    for name in calls:
        original = getattr(adapter.MlaPrefillBackend, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        setattr(adapter.MlaPrefillBackend, name, counted)
    return calls


def cpu_binding(tp):
    """VLLM_CPU_OMP_THREADS_BIND for `tp` CPU workers: one allowed core each
    (vLLM binds workers to NUMA nodes otherwise, and this machine has one)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < tp:
        raise SystemExit(f"tensor parallel size {tp} needs {tp} cores; this process may use {len(cores)}")
    return "|".join(str(core) for core in cores[:tp])


def generate(path, backend, tp=1, prompts=PROMPTS, max_tokens=MAX_TOKENS):
    from vllm import LLM, SamplingParams

    if tp > 1:
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", cpu_binding(tp))
    calls = count_calls()
    option = None if backend == "vllm" else backend
    llm = LLM(model=path, skip_tokenizer_init=True, dtype="bfloat16", max_model_len=1024, enforce_eager=True,
              seed=0, tensor_parallel_size=tp, attention_config={"mla_prefill_backend": option})
    params = SamplingParams(temperature=0, max_tokens=max_tokens, logprobs=2, ignore_eos=True, detokenize=False)
    outputs = llm.generate([{"prompt_token_ids": p} for p in prompts], params)
    results = []
    for output in outputs:
        tokens = list(output.outputs[0].token_ids)
        steps = output.outputs[0].logprobs
        results.append({
            "tokens": tokens,
            "logprobs": [step[t].logprob for t, step in zip(tokens, steps)],
            "top": [sorted(([t, lp.logprob] for t, lp in step.items()), key=lambda e: -e[1])[:2] for step in steps],
        })
    return {"outputs": results, "calls": calls}


def main(argv):
    # vLLM's engine in this process (so the calls can be counted), a small
    # KV cache (GiB; the default is far more).
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    if len(argv) == 3 and argv[1] == "make":
        make_model(argv[2])
    elif len(argv) in (4, 5) and argv[1] == "generate":
        print("RESULT " + json.dumps(generate(argv[2], argv[3], int(argv[4]) if len(argv) == 5 else 1)))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
